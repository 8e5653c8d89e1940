// AWS Signature Version 4 (header signing), as S3 verifies it. Pure functions: no clock, no
// environment; the caller passes the time. Checked against AWS's published test vectors and
// botocore's signer (tests/remote/).
//
// Why not libcurl's CURLOPT_AWS_SIGV4: curl 7.88 signs the query string as written (S3 wants
// it sorted and encoded), omits x-amz-content-sha256, and orders x-amz-copy-source-range
// before x-amz-copy-source, so several S3 calls fail with it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace jtree::remote {

/// Hex SHA-256 of the empty string (the payload hash of bodiless requests).
inline constexpr std::string_view kEmptySha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// Lower-case hex SHA-256 of `data`.
std::string sha256_hex(std::span<const std::byte> data);
std::string sha256_hex(std::string_view data);
/// Raw HMAC-SHA256 of `data` under `key` (32 bytes).
std::string hmac_sha256(std::string_view key, std::string_view data);
/// Lower-case hex of raw bytes.
std::string hex(std::string_view raw);

/// RFC 3986 percent-encoding as SigV4 wants it: unreserved characters (A-Z a-z 0-9 - _ . ~)
/// are kept, every other byte becomes %XX (upper-case hex); '/' is kept when `keep_slash`.
std::string uri_encode(std::string_view s, bool keep_slash);

/// A request to sign.
struct SigV4Request {
  std::string method;
  /// The path exactly as sent, already URI-encoded ("/bucket/my%20key"); S3 paths are not
  /// normalized.
  std::string canonical_uri;
  /// Query parameters, not encoded ("uploadId" -> "a/b"); "?uploads" is {"uploads", ""}.
  std::vector<std::pair<std::string, std::string>> query;
  /// Headers to sign (must include "host"); names in any case, values as sent.
  std::vector<std::pair<std::string, std::string>> headers;
  /// Hex SHA-256 of the body, or "UNSIGNED-PAYLOAD".
  std::string payload_hash;
};

/// Who signs, where, when.
struct SigV4Key {
  std::string access_key_id;
  std::string secret_access_key;
  std::string region;
  std::string service;   ///< "s3"
  std::string amz_date;  ///< "20150830T123600Z" (also sent as the x-amz-date header)
};

/// The pieces of a signature (the intermediate ones are exposed for tests and messages).
struct SigV4Signature {
  std::string canonical_request;
  std::string string_to_sign;
  std::string signed_headers;  ///< "host;range;x-amz-content-sha256;x-amz-date"
  std::string signature;       ///< hex
  std::string authorization;   ///< the Authorization header's value
};

/// The canonical query string: keys and values encoded, sorted by key then value, joined by
/// '&' ("a=1&b=" for {"b",""},{"a","1"}).
std::string canonical_query(const std::vector<std::pair<std::string, std::string>>& query);

/// Signs `request`. Header values are trimmed and inner runs of spaces collapsed, as the
/// specification requires; headers with the same name are joined by ','.
SigV4Signature sign_v4(const SigV4Request& request, const SigV4Key& key);

/// "YYYYMMDDTHHMMSSZ" for a Unix time (UTC).
std::string amz_date(int64_t unix_seconds);

}  // namespace jtree::remote
