#include "io/remote/s3_client.h"

#include <ctime>

#include "io/remote/retry.h"
#include "io/remote/sigv4.h"

namespace jtree::remote {
namespace {

// Handles the XML answer of an S3 call: kept in memory, and checked for an <Error> document,
// which S3 may send with status 200 (CompleteMultipartUpload, UploadPartCopy).
class S3XmlHandler final : public BufferHandler {
 public:
  Status on_done() override {
    if (body.find("<Error>") == std::string::npos) return Status::success();
    auto err = parse_s3_error(body);
    if (!err.ok()) return Status::success();  // "<Error>" inside some value: not an error document
    transient_error = err->code == "InternalError" || err->code == "SlowDown" ||
                      err->code == "ServiceUnavailable" || err->code == "RequestTimeout";
    return Status::io_error("HTTP 200 with an error: " + err->code + ": " + err->message);
  }
};

// A handler for answers without a body of interest (PUT, DELETE, HEAD). A body is read (so
// that the connection can be reused) up to a bound, and not downloaded beyond it.
class IgnoreBody final : public ResponseHandler {
 public:
  Status on_body(std::span<const std::byte> data) override {
    ignored_ += data.size();
    return Status::success();
  }
  bool satisfied() const override { return ignored_ > kMaxIgnoredBodyBytes; }
  void reset() override {
    ResponseHandler::reset();
    ignored_ = 0;
  }

 private:
  static constexpr uint64_t kMaxIgnoredBodyBytes = 64 * 1024;
  uint64_t ignored_ = 0;
};

std::string header_name(const std::string& line) { return line.substr(0, line.find(':')); }

std::string header_value(const std::string& line) {
  const size_t colon = line.find(':');
  if (colon == std::string::npos) return {};
  size_t start = colon + 1;
  while (start < line.size() && line[start] == ' ') ++start;
  return line.substr(start);
}

std::string xml_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

void prepare_s3_request(const S3Config& c, std::string_view bucket, std::string_view key,
                        const std::vector<std::pair<std::string, std::string>>& query,
                        std::string payload_hash, HttpRequest& req, int64_t now) {
  const S3Target t = s3_target(c, bucket, key);
  req.url = t.url_prefix + t.canonical_uri;
  const std::string q = canonical_query(query);
  if (!q.empty()) req.url += "?" + q;
  if (c.anonymous()) return;
  if (payload_hash.empty()) payload_hash = sha256_hex(req.body);
  const std::string date = amz_date(now);
  req.headers.push_back("Host: " + t.host);
  req.headers.push_back("x-amz-date: " + date);
  req.headers.push_back("x-amz-content-sha256: " + payload_hash);
  if (!c.session_token.empty()) req.headers.push_back("x-amz-security-token: " + c.session_token);
  SigV4Request sr;
  sr.method = req.method;
  sr.canonical_uri = t.canonical_uri;
  sr.query = query;
  for (const std::string& h : req.headers) sr.headers.emplace_back(header_name(h), header_value(h));
  sr.payload_hash = payload_hash;
  SigV4Key k{c.access_key_id, c.secret_access_key, c.region, "s3", date};
  req.headers.push_back("Authorization: " + sign_v4(sr, k).authorization);
}

Failure s3_failure(const Attempt& a, const std::string& what, const S3Config& c,
                   const S3Location& loc) {
  Failure f;
  const long s = a.head.status;
  S3Error err;
  if (auto parsed = parse_s3_error(a.error_body); parsed.ok()) err = std::move(*parsed);
  std::string msg = "HTTP " + std::to_string(s);
  if (!err.code.empty()) msg += " " + err.code;
  if (!err.message.empty()) msg += ": " + error_excerpt(err.message);
  const std::string where = " (bucket \"" + loc.bucket + "\", key \"" + loc.key + "\")";
  if (const std::string* ra = a.head.find("retry-after")) f.retry_after = parse_retry_after(*ra);
  const std::string* bucket_region = a.head.find("x-amz-bucket-region");
  if (s == 404) {
    if (err.code.empty()) msg += " (not found)";  // HEAD answers have no body to say more
    f.status = Status::not_found(msg + where);
  } else if (s == 401 || s == 403) {
    std::string hint = c.anonymous()
                           ? "; no credentials were found (set AWS_ACCESS_KEY_ID and "
                             "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE)"
                           : "; credentials from " + c.credential_source;
    if (err.code == "RequestTimeTooSkewed") hint += "; the system clock is off";
    f.status = Status::permission_denied(msg + where + hint);
  } else if (s == 412) {
    f.status = Status::aborted("the object changed while being read (" + msg + ")" + where);
  } else if (err.code == "ConditionalRequestConflict") {
    // 409: another conditional write of the same key is completing at the same moment.
    f.status = Status::aborted("another write of the object is in progress (" + msg + ")" + where);
  } else if (s == 301 || s == 307 || err.code == "AuthorizationHeaderMalformed" ||
             err.code == "PermanentRedirect" || err.code == "IllegalLocationConstraintException") {
    std::string region = bucket_region ? *bucket_region : err.region;
    f.status = Status::invalid_argument(
        msg + where + "; the request used region \"" + c.region + "\"" +
        (region.empty() ? "" : ", the bucket is in \"" + region + "\" (set AWS_REGION)"));
  } else {
    f.status = Status::io_error(msg + where);
    f.transient = retryable_status(s) || err.code == "RequestTimeout" ||
                  err.code == "SlowDown" || err.code == "InternalError";
  }
  return f;
}

std::vector<std::string> WriteCondition::headers() const {
  std::vector<std::string> h;
  if (!if_match.empty()) h.push_back("If-Match: " + if_match);
  if (if_none_match) h.push_back("If-None-Match: *");
  return h;
}

std::string complete_multipart_xml(const std::vector<UploadedPart>& parts) {
  std::string x = "<CompleteMultipartUpload>";
  for (const UploadedPart& p : parts) {
    x += "<Part><PartNumber>" + std::to_string(p.number) + "</PartNumber><ETag>" +
         xml_escape(p.etag) + "</ETag></Part>";
  }
  x += "</CompleteMultipartUpload>";
  return x;
}

S3Client::S3Client(S3Config config, const RemoteOptions& options)
    : config_(std::move(config)), options_(options) {
  transport_.connect_timeout_seconds = options.http.connect_timeout_seconds;
  transport_.stall_timeout_seconds = options.http.stall_timeout_seconds;
  transport_.verify_tls = options.http.verify_tls;
  transport_.ca_file = config_.ca_file;
  transport_.ca_path = options.http.ca_path;
  transport_.http2 = options.http.http2;
  transport_.follow_redirects = false;  // a redirect means a wrong region: reported instead
}

Result<ResponseHead> S3Client::run(const S3Location& loc, const std::string& what, const Call& c,
                                   ResponseHandler& handler) {
  CallSpec spec;
  spec.name = loc.url();
  spec.what = what;
  spec.transport = &transport_;
  spec.options = &options_.http;
  spec.stats = &stats_;
  spec.build = [&](HttpRequest& req) {
    req.method = c.method;
    req.headers = c.headers;
    req.body = c.body;
    prepare_s3_request(config_, loc.bucket, loc.key, c.query, c.payload_hash, req,
                       static_cast<int64_t>(std::time(nullptr)));
    return Status::success();
  };
  spec.map_error = [&](const Attempt& a) { return s3_failure(a, what, config_, loc); };
  return call(spec, handler);
}

Result<ObjectInfo> S3Client::head(const S3Location& loc) {
  IgnoreBody h;
  JTREE_ASSIGN_OR_RETURN(ResponseHead head, run(loc, "HEAD", {"HEAD", {}, {}, {}, ""}, h));
  ObjectInfo info;
  info.url = loc.url();
  if (auto cl = head.content_length()) info.size = *cl;
  if (const std::string* e = head.find("etag")) info.etag = *e;
  return info;
}

Status S3Client::put_object(const S3Location& loc, std::span<const std::byte> body,
                            const WriteCondition& condition) {
  IgnoreBody h;
  const std::string hash = sha256_hex(body);
  return run(loc, "PUT (" + std::to_string(body.size()) + " bytes)",
             {"PUT", {}, condition.headers(), body, hash}, h)
      .status();
}

Status S3Client::delete_object(const S3Location& loc) {
  IgnoreBody h;
  return run(loc, "DELETE", {"DELETE", {}, {}, {}, ""}, h).status();
}

Result<ListBucketPage> S3Client::list_page(const std::string& bucket, const std::string& prefix,
                                           const std::string& token, int max_keys) {
  Call c{"GET", {{"list-type", "2"}, {"max-keys", std::to_string(max_keys)}}, {}, {}, ""};
  if (!prefix.empty()) c.query.emplace_back("prefix", prefix);
  if (!token.empty()) c.query.emplace_back("continuation-token", token);
  S3XmlHandler h;
  S3Location loc{bucket, ""};
  JTREE_RETURN_IF_ERROR(run(loc, "ListObjectsV2 prefix \"" + prefix + "\"", c, h).status());
  auto page = parse_list_bucket_result(h.body);
  if (!page.ok()) return page.status().with_prefix(loc.url() + ": ListObjectsV2");
  return page;
}

Result<ListUploadsPage> S3Client::list_uploads_page(const std::string& bucket,
                                                    const std::string& prefix,
                                                    const std::string& key_marker,
                                                    const std::string& upload_id_marker,
                                                    int max_uploads) {
  Call c{"GET", {{"uploads", ""}, {"max-uploads", std::to_string(max_uploads)}}, {}, {}, ""};
  if (!prefix.empty()) c.query.emplace_back("prefix", prefix);
  if (!key_marker.empty()) c.query.emplace_back("key-marker", key_marker);
  if (!upload_id_marker.empty()) c.query.emplace_back("upload-id-marker", upload_id_marker);
  S3XmlHandler h;
  S3Location loc{bucket, ""};
  JTREE_RETURN_IF_ERROR(run(loc, "ListMultipartUploads prefix \"" + prefix + "\"", c, h).status());
  auto page = parse_list_multipart_uploads(h.body);
  if (!page.ok()) return page.status().with_prefix(loc.url() + ": ListMultipartUploads");
  return page;
}

Result<std::string> S3Client::create_multipart_upload(const S3Location& loc) {
  S3XmlHandler h;
  JTREE_RETURN_IF_ERROR(
      run(loc, "CreateMultipartUpload", {"POST", {{"uploads", ""}}, {}, {}, ""}, h).status());
  auto id = parse_initiate_multipart_upload(h.body);
  if (!id.ok()) return id.status().with_prefix(loc.url() + ": CreateMultipartUpload");
  return id;
}

Result<std::string> S3Client::upload_part(const S3Location& loc, const std::string& upload_id,
                                          int part, std::span<const std::byte> body,
                                          const std::string& sha256) {
  IgnoreBody h;
  Call c{"PUT", {{"partNumber", std::to_string(part)}, {"uploadId", upload_id}}, {}, body, sha256};
  JTREE_ASSIGN_OR_RETURN(ResponseHead head,
                         run(loc, "UploadPart " + std::to_string(part) + " (" +
                                      std::to_string(body.size()) + " bytes)",
                             c, h));
  const std::string* etag = head.find("etag");
  if (etag == nullptr || etag->empty()) {
    return Status::io_error(loc.url() + ": UploadPart " + std::to_string(part) +
                           ": answer without an ETag");
  }
  return *etag;
}

Result<std::string> S3Client::upload_part_copy(const S3Location& loc, const std::string& upload_id,
                                               int part, const S3Location& source, uint64_t first,
                                               uint64_t last, const std::string& source_etag) {
  Call c{"PUT", {{"partNumber", std::to_string(part)}, {"uploadId", upload_id}}, {}, {}, ""};
  c.headers.push_back("x-amz-copy-source: " +
                      uri_encode("/" + source.bucket + "/" + source.key, true));
  c.headers.push_back("x-amz-copy-source-range: bytes=" + std::to_string(first) + "-" +
                      std::to_string(last));
  if (!source_etag.empty()) c.headers.push_back("x-amz-copy-source-if-match: " + source_etag);
  S3XmlHandler h;
  const std::string what = "UploadPartCopy " + std::to_string(part) + " from " + source.url() +
                           " bytes=" + std::to_string(first) + "-" + std::to_string(last);
  JTREE_RETURN_IF_ERROR(run(loc, what, c, h).status());
  auto etag = parse_copy_part_result(h.body);
  if (!etag.ok()) return etag.status().with_prefix(loc.url() + ": " + what);
  return etag;
}

Result<std::string> S3Client::complete_multipart_upload(const S3Location& loc,
                                                        const std::string& upload_id,
                                                        const std::vector<UploadedPart>& parts,
                                                        const WriteCondition& condition) {
  const std::string xml = complete_multipart_xml(parts);
  const auto body = std::as_bytes(std::span(xml));
  Call c{"POST", {{"uploadId", upload_id}}, {"Content-Type: application/xml"}, body,
         sha256_hex(xml)};
  for (std::string& h : condition.headers()) c.headers.push_back(std::move(h));
  S3XmlHandler h;
  JTREE_RETURN_IF_ERROR(
      run(loc, "CompleteMultipartUpload (" + std::to_string(parts.size()) + " parts)", c, h)
          .status());
  auto etag = parse_complete_multipart_upload(h.body);
  if (!etag.ok()) return etag.status().with_prefix(loc.url() + ": CompleteMultipartUpload");
  return etag;
}

Status S3Client::abort_multipart_upload(const S3Location& loc, const std::string& upload_id) {
  IgnoreBody h;
  Status st = run(loc, "AbortMultipartUpload", {"DELETE", {{"uploadId", upload_id}}, {}, {}, ""}, h)
                  .status();
  return st.is_not_found() ? Status::success() : st;  // already gone
}

}  // namespace jtree::remote
