// jtree/remote.h — the HTTP(S) and S3 backends: their settings, and a few object-store calls.
//
// Reading: open_source() / Reader::open() take "http://", "https://" and "s3://bucket/key"
// URLs. A remote open costs one round trip of two parallel range requests (the head of the
// file, and its tail as a suffix range), plus one more when the header or index is larger than
// those first reads; chunk data is then fetched with parallel range requests that carry only
// the bytes asked for (neighbouring ranges coalesced).
//
// Writing: create_sink() / save() take "s3://bucket/key". Small objects are one PUT; larger
// ones a multipart upload whose parts are uploaded in parallel, with memory bounded by
// s3.part_size x (s3.upload_concurrency + 1). The object appears only on commit; any failure
// aborts the upload, so no partial object is ever visible. append() on an s3:// object writes
// a new version of it (server-side copies of the old bytes, then the new generation), whose
// commit carries If-Match with the old version's ETag (docs/remote.md: which stores check it).
//
// Trust: every response is checked (status, Content-Range, length, ETag). The object is pinned
// to the ETag of the first response: if it is replaced while a Reader uses it, reads fail with
// "the object changed while being read" instead of mixing two versions. TLS peers are verified
// unless http.verify_tls is false. Proxies come from the standard variables (http_proxy,
// https_proxy, HTTPS_PROXY, ALL_PROXY, NO_PROXY), as libcurl reads them.
//
// Servers that ignore Range (they answer a range request with 200 and the whole body, as
// Python's http.server does): a range read never silently becomes a download of the whole
// object. The transfer stops as soon as the answer's headers show it is longer than the range
// asked for, and the read fails with NotSupported ("server ignores HTTP Range requests ...").
// With http.allow_full_download the object is instead downloaded once, whole, into an unlinked
// temporary file ($TMPDIR, else /tmp; at most http.full_download_max_bytes), and every read of
// that Source is served from it. A 200 no longer than the range asked for (a small object)
// is simply used.
//
// Errors name the URL (for S3 also the bucket and key) and what failed, e.g.
//   "s3://ckpt/run1/step100.jtree: GET bytes=0-65535: HTTP 403 SignatureDoesNotMatch: ...".
// Codes: NotFound (404), PermissionDenied (401/403), IOError (network, 5xx after the last
// retry, malformed answers), Aborted (the object changed; a deadline), InvalidArgument (a bad
// URL or option), NotSupported (a server that ignores Range, without http.allow_full_download),
// ResourceExhausted (such an object larger than http.full_download_max_bytes).
//
// Thread safety: RemoteOptions (its HttpOptions and S3Options parts) is a plain value. The
// functions below may be called from any thread. All transfers of a process share one libcurl connection pool (connections are
// reused across files and requests).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "jtree/export.h"
#include "jtree/status.h"

namespace jtree {

/// How S3 requests name the bucket.
enum class S3Addressing : uint8_t {
  /// Virtual-hosted on AWS endpoints when the bucket name allows it (DNS-safe, no dots over
  /// https); path-style on custom endpoints (AWS_ENDPOINT_URL...), which are often IPs.
  kAuto = 0,
  kPath = 1,     ///< https://endpoint/bucket/key
  kVirtual = 2,  ///< https://bucket.endpoint/key
};

/// Settings of every remote transfer: requests, retries, limits, TLS, and what to do with
/// servers that ignore Range. They apply to http(s):// URLs and to S3's requests alike (S3 is
/// spoken over HTTP), and would to any other remote backend's.
struct JTREE_API HttpOptions {
  // ---- requests, retries, limits ------------------------------------------------------------
  /// Retries of one request after its first attempt, on 408, 429, 5xx, timeouts, connection
  /// resets and refusals, stalls and truncated bodies. Other errors (403, 404, 412...) are not
  /// retried, nor those that would repeat: a connection refused by this machine (a loopback
  /// address), a TLS handshake whose versions or ciphers do not meet (https:// to a plain-HTTP
  /// port).
  int max_retries = 8;
  /// Time allowed for one request, all its attempts and waits included; past it the request
  /// fails with the last error seen.
  double deadline_seconds = 300;
  /// Backoff before retry n (n = 1, 2...): a random time in [0, min(max, initial x 2^n)]
  /// ("full jitter"). A server's Retry-After is honoured when it is longer (up to max).
  double backoff_initial_seconds = 0.1;
  double backoff_max_seconds = 10;
  double connect_timeout_seconds = 10;
  /// A transfer that receives nothing for this long is abandoned (and retried).
  double stall_timeout_seconds = 30;
  /// Requests in flight at once for one object (reads; also how many fetches the Reader runs).
  /// Object stores cap each connection's rate, so a load's share of the link grows with it;
  /// 64 is what a Reader's default bytes in flight allow (256 MiB in fetches of 4 MiB).
  int max_concurrency = 64;
  /// Ranges of one read() closer than this are fetched by one request (the gap is discarded).
  uint64_t coalesce_gap = 64 * 1024;
  /// Larger ranges are split into requests of at most this size, fetched in parallel (a retry
  /// then repeats only the failed piece).
  uint64_t max_request_bytes = 32ull << 20;
  /// The Reader's largest fetch from a remote object (it caps ReadOptions::max_fetch_bytes):
  /// small enough that decoding overlaps the transfers, large enough to keep requests few.
  uint64_t fetch_bytes = 4ull << 20;

  // ---- TLS and HTTP ------------------------------------------------------------------------
  bool verify_tls = true;  ///< verify the server's certificate and name
  /// CA bundle file. Empty: AWS_CA_BUNDLE (s3:// only), CURL_CA_BUNDLE, SSL_CERT_FILE, else the
  /// system's bundle.
  std::string ca_file;
  /// Directory of hashed CA certificates. Empty: SSL_CERT_DIR, else the system's.
  std::string ca_path;
  bool http2 = true;  ///< offer HTTP/2 (ALPN, over TLS); HTTP/1.1 is used when not agreed
  /// Extra request headers for http(s):// URLs, e.g. "Authorization: Bearer ...".
  std::vector<std::string> http_headers;

  // ---- servers that ignore Range -----------------------------------------------------------
  /// When a server answers a range request with the whole object (200): false (the default)
  /// fails the read with NotSupported, after receiving no body byte; true downloads the object
  /// once, whole, into an unlinked temporary file in $TMPDIR (else /tmp), and serves every
  /// read of the Source from it. The download is one request: deadline_seconds bounds it.
  bool allow_full_download = false;
  /// The largest object allow_full_download downloads (disk space of the temporary file);
  /// larger ones fail with ResourceExhausted, before any body byte when the server sends
  /// Content-Length.
  uint64_t full_download_max_bytes = 16ull << 30;
};

/// Settings of s3:// URLs only: credentials, where the service is, and uploads.
struct JTREE_API S3Options {
  /// Credentials. Empty: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, else
  /// the profile's entries in ~/.aws/credentials or ~/.aws/config. None at all: unsigned
  /// (anonymous) requests, which public buckets accept.
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;
  /// Profile. Empty: AWS_PROFILE, else "default". Files: AWS_SHARED_CREDENTIALS_FILE and
  /// AWS_CONFIG_FILE, else ~/.aws/credentials and ~/.aws/config.
  std::string profile;
  /// Region. Empty: AWS_REGION, AWS_DEFAULT_REGION, the profile's region, else "us-east-1".
  std::string region;
  /// Endpoint of an S3-compatible store ("http://127.0.0.1:7480", "https://storage.googleapis.com").
  /// Empty, as boto3 finds it: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's
  /// `services = NAME` section `[services NAME]`'s `s3 = endpoint_url = ...`, the profile's
  /// own `s3 = endpoint_url = ...`, the profile's endpoint_url, else AWS's regional endpoint.
  /// AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true (or the profile's
  /// ignore_configured_endpoint_urls = true) skips all of these but this field.
  std::string endpoint;
  /// Addressing. kAuto also reads the profile's `s3 = addressing_style = path|virtual`.
  S3Addressing addressing = S3Addressing::kAuto;

  // ---- uploads -----------------------------------------------------------------------------
  /// Multipart part size (S3 needs >= 5 MiB). Parts grow x2 every 1000 parts, so an upload can
  /// reach 10,000 parts of up to 5 GiB without knowing its size in advance. Objects smaller
  /// than one part are written with a single PUT.
  uint64_t part_size = 8ull << 20;
  /// Parts uploaded at once; memory is bounded by part_size x (upload_concurrency + 1).
  int upload_concurrency = 4;
};

/// Settings of the remote backends, one part per concern: `http` for every transfer, `s3`
/// for s3:// URLs (a new backend adds its own part). A default-constructed value is what most
/// callers want: empty strings mean "from the environment", as documented per field (and in
/// docs/remote.md).
struct JTREE_API RemoteOptions {
  HttpOptions http;
  S3Options s3;
};

/// InvalidArgument naming the first unusable value: max_retries < 0; a deadline, connect or
/// stall timeout that is not > 0 (backoffs: < 0); max_concurrency, upload_concurrency,
/// max_request_bytes or fetch_bytes < 1; a part_size outside S3's 5 MiB..5 GiB; an http
/// header that is not one "Name: value" line; an access key id without its secret (or the
/// reverse), a session token without them. Every remote open and write checks its options
/// so; bindings and tools call it to report a bad setting before they open anything.
/// (Endpoints are checked where they are resolved: a bad one fails the open or write.)
JTREE_API Status check_remote_options(const RemoteOptions& options);

/// What stat_object() and list_objects() report about an object.
struct JTREE_API ObjectInfo {
  std::string url;   ///< the object's URL (s3://bucket/key for S3)
  uint64_t size = 0;
  std::string etag;  ///< as the server sent it (quotes included), may be empty
};

/// The size and ETag of an http(s):// or s3:// object (a HEAD request). NotFound when absent.
JTREE_API Result<ObjectInfo> stat_object(std::string_view url, const RemoteOptions& options = {});

/// Every object under an S3 prefix, "s3://bucket/prefix" (ListObjectsV2, all pages; keys in
/// the store's order, which is lexicographic on S3). `max_objects` bounds the answer
/// (ResourceExhausted past it).
JTREE_API Result<std::vector<ObjectInfo>> list_objects(std::string_view s3_prefix_url,
                                                       const RemoteOptions& options = {},
                                                       uint64_t max_objects = 10'000'000);

/// Deletes an s3:// object (DeleteObject). Deleting an absent key succeeds, as on S3.
JTREE_API Status delete_object(std::string_view s3_url, const RemoteOptions& options = {});

}  // namespace jtree
