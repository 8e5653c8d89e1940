#include "io/remote/s3_xml.h"

#include <optional>

#include "io/remote/content_range.h"

namespace jtree::remote {
namespace {

// One element of a parsed document: its name, its own text (children's text excluded), its
// parent (-1 for the root) and one past its last descendant. Names point into the input.
struct Element {
  std::string_view name;
  std::string text;
  int parent = -1;
  size_t end = 0;
};

Status malformed(std::string_view what) {
  return Status::corruption("malformed XML answer: " + std::string(what));
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// Appends code point `cp` as UTF-8.
void put_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Decodes one entity at the start of `s` (just after '&'); returns the characters consumed
// including the ';', or 0 when it is not a valid entity.
size_t decode_entity(std::string_view s, std::string& out) {
  const size_t semi = s.substr(0, 12).find(';');
  if (semi == std::string_view::npos) return 0;
  const std::string_view name = s.substr(0, semi);
  if (name == "lt") out += '<';
  else if (name == "gt") out += '>';
  else if (name == "amp") out += '&';
  else if (name == "quot") out += '"';
  else if (name == "apos") out += '\'';
  else if (name.size() >= 2 && name[0] == '#') {
    const bool hex = name[1] == 'x' || name[1] == 'X';
    const std::string_view digits = name.substr(hex ? 2 : 1);
    if (digits.empty() || digits.size() > 8) return 0;
    uint32_t cp = 0;
    for (char c : digits) {
      int d;
      if (c >= '0' && c <= '9') d = c - '0';
      else if (hex && c >= 'a' && c <= 'f') d = c - 'a' + 10;
      else if (hex && c >= 'A' && c <= 'F') d = c - 'A' + 10;
      else return 0;
      cp = cp * (hex ? 16 : 10) + static_cast<uint32_t>(d);
    }
    if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    put_utf8(out, cp);
  } else {
    return 0;
  }
  return semi + 1;
}

// Appends entity-decoded text.
Status append_text(std::string_view raw, std::string& out) {
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '&') {
      out += raw[i];
      continue;
    }
    const size_t n = decode_entity(raw.substr(i + 1), out);
    if (n == 0) return malformed("unknown or invalid entity");
    i += n;
  }
  return Status::success();
}

// Parses a whole document into its elements, in document order.
Result<std::vector<Element>> parse_elements(std::string_view xml) {
  if (xml.size() > kMaxXmlBytes) return malformed("document too large");
  if (xml.substr(0, 3) == "\xEF\xBB\xBF") xml.remove_prefix(3);  // a UTF-8 byte order mark
  std::vector<Element> elements;
  std::vector<int> open;  // indices of open elements
  bool root_closed = false;
  size_t i = 0;
  while (i < xml.size()) {
    if (xml[i] != '<') {
      const size_t lt = xml.find('<', i);
      const std::string_view raw = xml.substr(i, lt == std::string_view::npos ? xml.size() - i
                                                                              : lt - i);
      if (open.empty()) {
        for (char c : raw) {
          if (!is_space(c)) return malformed("text outside the root element");
        }
      } else {
        JTREE_RETURN_IF_ERROR(append_text(raw, elements[open.back()].text));
      }
      i += raw.size();
      continue;
    }
    const std::string_view rest = xml.substr(i);
    if (rest.substr(0, 4) == "<!--") {
      const size_t end = rest.find("-->", 4);
      if (end == std::string_view::npos) return malformed("unterminated comment");
      i += end + 3;
      continue;
    }
    if (rest.substr(0, 9) == "<![CDATA[") {
      const size_t end = rest.find("]]>", 9);
      if (end == std::string_view::npos) return malformed("unterminated CDATA");
      if (open.empty()) return malformed("CDATA outside the root element");
      elements[open.back()].text.append(rest.substr(9, end - 9));
      i += end + 3;
      continue;
    }
    if (rest.substr(0, 2) == "<?") {
      const size_t end = rest.find("?>", 2);
      if (end == std::string_view::npos) return malformed("unterminated declaration");
      i += end + 2;
      continue;
    }
    if (rest.substr(0, 2) == "<!") return malformed("DOCTYPE or other declaration");
    if (rest.substr(0, 2) == "</") {
      const size_t gt = rest.find('>');
      if (gt == std::string_view::npos) return malformed("unterminated end tag");
      std::string_view name = rest.substr(2, gt - 2);
      while (!name.empty() && is_space(name.back())) name.remove_suffix(1);
      if (open.empty() || elements[open.back()].name != name) {
        return malformed("mismatched end tag");
      }
      elements[open.back()].end = elements.size();
      open.pop_back();
      if (open.empty()) root_closed = true;
      i += gt + 1;
      continue;
    }
    // A start tag: the name, then attributes (skipped; quoted values may hold '>').
    size_t j = 1;
    while (j < rest.size() && !is_space(rest[j]) && rest[j] != '>' && rest[j] != '/') ++j;
    const std::string_view name = rest.substr(1, j - 1);
    if (name.empty()) return malformed("empty element name");
    char quote = 0;
    for (; j < rest.size(); ++j) {
      const char c = rest[j];
      if (quote != 0) {
        if (c == quote) quote = 0;
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '>') {
        break;
      }
    }
    if (j >= rest.size()) return malformed("unterminated start tag");
    const bool self_closing = rest[j - 1] == '/';
    if (root_closed) return malformed("a second root element");
    if (elements.size() >= kMaxXmlElements) return malformed("too many elements");
    if (static_cast<int>(open.size()) >= kMaxXmlDepth) return malformed("nesting too deep");
    elements.push_back({name, {}, open.empty() ? -1 : open.back(), elements.size() + 1});
    if (self_closing) {
      if (open.empty()) root_closed = true;
    } else {
      open.push_back(static_cast<int>(elements.size()) - 1);
    }
    i += j + 1;
  }
  if (!open.empty()) return malformed("unterminated element");
  if (elements.empty()) return malformed("no root element");
  return elements;
}

// The text of the first child of `parent` named `name`, or nullopt.
std::optional<std::string_view> child_text(const std::vector<Element>& e, int parent,
                                           std::string_view name) {
  // Only the parent's subtree: a missing child must not cost a scan of the whole document.
  for (size_t i = static_cast<size_t>(parent) + 1; i < e[parent].end; ++i) {
    if (e[i].parent == parent && e[i].name == name) return std::string_view(e[i].text);
  }
  return std::nullopt;
}

Result<std::vector<Element>> parse_root(std::string_view xml, std::string_view root) {
  JTREE_ASSIGN_OR_RETURN(std::vector<Element> e, parse_elements(xml));
  if (e[0].name != root) {
    return malformed("expected <" + std::string(root) + ">, got <" +
                     std::string(e[0].name.substr(0, 64)) + ">");
  }
  return e;
}

}  // namespace

Result<S3Error> parse_s3_error(std::string_view xml) {
  JTREE_ASSIGN_OR_RETURN(std::vector<Element> e, parse_root(xml, "Error"));
  S3Error err;
  err.code = child_text(e, 0, "Code").value_or("");
  err.message = child_text(e, 0, "Message").value_or("");
  err.request_id = child_text(e, 0, "RequestId").value_or("");
  err.region = child_text(e, 0, "Region").value_or("");
  return err;
}

Result<std::string> parse_initiate_multipart_upload(std::string_view xml) {
  JTREE_ASSIGN_OR_RETURN(std::vector<Element> e, parse_root(xml, "InitiateMultipartUploadResult"));
  auto id = child_text(e, 0, "UploadId");
  if (!id || id->empty()) return malformed("InitiateMultipartUploadResult without an UploadId");
  return std::string(*id);
}

Result<std::string> parse_complete_multipart_upload(std::string_view xml) {
  JTREE_ASSIGN_OR_RETURN(std::vector<Element> e, parse_root(xml, "CompleteMultipartUploadResult"));
  return std::string(child_text(e, 0, "ETag").value_or(""));
}

Result<std::string> parse_copy_part_result(std::string_view xml) {
  JTREE_ASSIGN_OR_RETURN(std::vector<Element> e, parse_root(xml, "CopyPartResult"));
  auto etag = child_text(e, 0, "ETag");
  if (!etag || etag->empty()) return malformed("CopyPartResult without an ETag");
  return std::string(*etag);
}

Result<ListBucketPage> parse_list_bucket_result(std::string_view xml, size_t max_entries) {
  JTREE_ASSIGN_OR_RETURN(std::vector<Element> e, parse_root(xml, "ListBucketResult"));
  ListBucketPage page;
  for (size_t i = 1; i < e.size(); ++i) {
    if (e[i].parent != 0) continue;
    const int self = static_cast<int>(i);
    if (e[i].name == "Contents") {
      if (page.objects.size() + page.common_prefixes.size() >= max_entries) {
        return Status::resource_exhausted("ListBucketResult with more than " +
                                         std::to_string(max_entries) + " entries");
      }
      ListedObject o;
      auto key = child_text(e, self, "Key");
      if (!key) return malformed("<Contents> without a <Key>");
      o.key = std::string(*key);
      auto size = child_text(e, self, "Size");
      if (size) {
        auto v = parse_decimal(*size);
        if (!v) return malformed("<Size> is not a number");
        o.size = *v;
      }
      o.etag = std::string(child_text(e, self, "ETag").value_or(""));
      page.objects.push_back(std::move(o));
    } else if (e[i].name == "CommonPrefixes") {
      if (page.objects.size() + page.common_prefixes.size() >= max_entries) {
        return Status::resource_exhausted("ListBucketResult with more than " +
                                         std::to_string(max_entries) + " entries");
      }
      auto prefix = child_text(e, self, "Prefix");
      if (!prefix) return malformed("<CommonPrefixes> without a <Prefix>");
      page.common_prefixes.emplace_back(*prefix);
    } else if (e[i].name == "IsTruncated") {
      if (e[i].text != "true" && e[i].text != "false") return malformed("<IsTruncated>");
      page.truncated = e[i].text == "true";
    } else if (e[i].name == "NextContinuationToken") {
      page.next_continuation_token = e[i].text;
    }
  }
  if (page.truncated && page.next_continuation_token.empty()) {
    return malformed("a truncated ListBucketResult without a NextContinuationToken");
  }
  return page;
}

Result<ListUploadsPage> parse_list_multipart_uploads(std::string_view xml, size_t max_entries) {
  JTREE_ASSIGN_OR_RETURN(std::vector<Element> e, parse_root(xml, "ListMultipartUploadsResult"));
  ListUploadsPage page;
  for (size_t i = 1; i < e.size(); ++i) {
    if (e[i].parent != 0) continue;
    const int self = static_cast<int>(i);
    if (e[i].name == "Upload") {
      if (page.uploads.size() >= max_entries) {
        return Status::resource_exhausted("ListMultipartUploadsResult with more than " +
                                         std::to_string(max_entries) + " uploads");
      }
      PendingUpload u;
      auto key = child_text(e, self, "Key");
      if (!key) return malformed("<Upload> without a <Key>");
      auto id = child_text(e, self, "UploadId");
      if (!id || id->empty()) return malformed("<Upload> without an <UploadId>");
      u.key = std::string(*key);
      u.upload_id = std::string(*id);
      u.initiated = std::string(child_text(e, self, "Initiated").value_or(""));
      page.uploads.push_back(std::move(u));
    } else if (e[i].name == "IsTruncated") {
      if (e[i].text != "true" && e[i].text != "false") return malformed("<IsTruncated>");
      page.truncated = e[i].text == "true";
    } else if (e[i].name == "NextKeyMarker") {
      page.next_key_marker = e[i].text;
    } else if (e[i].name == "NextUploadIdMarker") {
      page.next_upload_id_marker = e[i].text;
    }
  }
  if (page.truncated && page.next_key_marker.empty()) {
    return malformed("a truncated ListMultipartUploadsResult without a NextKeyMarker");
  }
  return page;
}

}  // namespace jtree::remote
