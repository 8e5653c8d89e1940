#include "io/remote/sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cstdio>
#include <ctime>

namespace jtree::remote {
namespace {

std::string sha256_raw(const void* data, size_t size) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data, size, out, &len, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// Trims and collapses runs of spaces ("Trimall" in the specification).
std::string trim_all(std::string_view v) {
  std::string out;
  bool space = false;
  for (char c : v) {
    if (c == ' ' || c == '\t') {
      space = true;
      continue;
    }
    if (space && !out.empty()) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

}  // namespace

std::string hex(std::string_view raw) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(raw.size() * 2);
  for (char c : raw) {
    const auto b = static_cast<unsigned char>(c);
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

std::string sha256_hex(std::span<const std::byte> data) {
  return hex(sha256_raw(data.data(), data.size()));
}

std::string sha256_hex(std::string_view data) { return hex(sha256_raw(data.data(), data.size())); }

std::string hmac_sha256(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string uri_encode(std::string_view s, bool keep_slash) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                            (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' ||
                            c == '~';
    if (unreserved || (keep_slash && c == '/')) {
      out += ch;
    } else {
      out += '%';
      out += kDigits[c >> 4];
      out += kDigits[c & 15];
    }
  }
  return out;
}

std::string canonical_query(const std::vector<std::pair<std::string, std::string>>& query) {
  std::vector<std::pair<std::string, std::string>> enc;
  enc.reserve(query.size());
  for (const auto& [k, v] : query) enc.emplace_back(uri_encode(k, false), uri_encode(v, false));
  std::sort(enc.begin(), enc.end());
  std::string out;
  for (const auto& [k, v] : enc) {
    if (!out.empty()) out += '&';
    out += k;
    out += '=';
    out += v;
  }
  return out;
}

SigV4Signature sign_v4(const SigV4Request& request, const SigV4Key& key) {
  // Canonical headers: lower-case names, sorted; values of repeated names joined by ','.
  std::vector<std::pair<std::string, std::string>> headers;
  for (const auto& [name, value] : request.headers) {
    headers.emplace_back(lower(name), trim_all(value));
  }
  std::stable_sort(headers.begin(), headers.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string canonical_headers, signed_headers;
  for (size_t i = 0; i < headers.size(); ++i) {
    if (i > 0 && headers[i].first == headers[i - 1].first) {
      canonical_headers.back() = ',';  // replaces the previous line's '\n'
      canonical_headers += headers[i].second + "\n";
      continue;
    }
    canonical_headers += headers[i].first + ":" + headers[i].second + "\n";
    if (!signed_headers.empty()) signed_headers += ';';
    signed_headers += headers[i].first;
  }

  SigV4Signature sig;
  sig.signed_headers = signed_headers;
  sig.canonical_request = request.method + "\n" + request.canonical_uri + "\n" +
                          canonical_query(request.query) + "\n" + canonical_headers + "\n" +
                          signed_headers + "\n" + request.payload_hash;
  const std::string date = key.amz_date.substr(0, 8);
  const std::string scope = date + "/" + key.region + "/" + key.service + "/aws4_request";
  sig.string_to_sign = "AWS4-HMAC-SHA256\n" + key.amz_date + "\n" + scope + "\n" +
                       sha256_hex(sig.canonical_request);
  std::string k = hmac_sha256("AWS4" + key.secret_access_key, date);
  k = hmac_sha256(k, key.region);
  k = hmac_sha256(k, key.service);
  k = hmac_sha256(k, "aws4_request");
  sig.signature = hex(hmac_sha256(k, sig.string_to_sign));
  sig.authorization = "AWS4-HMAC-SHA256 Credential=" + key.access_key_id + "/" + scope +
                      ", SignedHeaders=" + signed_headers + ", Signature=" + sig.signature;
  return sig;
}

std::string amz_date(int64_t unix_seconds) {
  const time_t t = static_cast<time_t>(unix_seconds);
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

}  // namespace jtree::remote
