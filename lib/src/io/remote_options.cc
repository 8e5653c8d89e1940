// jtree/remote.h: check_remote_options, the one rule for which RemoteOptions values are
// usable (the Python module and the CLI report a bad value before anything is opened; the
// dispatch checks them again for every remote open and write).
#include <cmath>
#include <cstdio>
#include <string>

#include "jtree/remote.h"

namespace jtree {
namespace {

constexpr uint64_t kMinPartSize = 5ull << 20;  // S3's smallest part (the last one aside)
constexpr uint64_t kMaxPartSize = 5ull << 30;  // S3's largest part

Status bad(const std::string& what) {
  return Status::invalid_argument("remote options: " + what);
}

// A time in seconds: finite and > 0 (>= 0 when zero_ok).
Status check_seconds(double v, const char* name, bool zero_ok = false) {
  if (!std::isfinite(v) || v < 0 || (v == 0 && !zero_ok)) {
    char value[32];
    std::snprintf(value, sizeof value, "%g", v);
    return bad(std::string(name) + " must be " + (zero_ok ? ">= 0" : "> 0") +
               " seconds, not " + value);
  }
  return Status::success();
}

// A header line "Name: value" with no line break (one header, never a smuggled second one).
Status check_header(const std::string& h) {
  const size_t colon = h.find(':');
  if (colon == 0 || colon == std::string::npos) {
    return bad("http header \"" + h + "\" is not \"Name: value\"");
  }
  if (h.find_first_of("\r\n") != std::string::npos || h.find('\0') != std::string::npos) {
    return bad("http header \"" + h.substr(0, colon) + "\" holds a line break or NUL");
  }
  return Status::success();
}

}  // namespace

Status check_remote_options(const RemoteOptions& o) {
  const HttpOptions& h = o.http;
  if (h.max_retries < 0) return bad("max_retries must be >= 0");
  JTREE_RETURN_IF_ERROR(check_seconds(h.deadline_seconds, "deadline"));
  JTREE_RETURN_IF_ERROR(check_seconds(h.connect_timeout_seconds, "connect_timeout"));
  JTREE_RETURN_IF_ERROR(check_seconds(h.stall_timeout_seconds, "stall_timeout"));
  JTREE_RETURN_IF_ERROR(check_seconds(h.backoff_initial_seconds, "backoff_initial", true));
  JTREE_RETURN_IF_ERROR(check_seconds(h.backoff_max_seconds, "backoff_max", true));
  if (h.max_concurrency < 1) return bad("max_concurrency must be >= 1");
  if (h.max_request_bytes == 0) return bad("max_request_bytes must be >= 1");
  if (h.fetch_bytes == 0) return bad("fetch_bytes must be >= 1");
  for (const std::string& header : h.http_headers) JTREE_RETURN_IF_ERROR(check_header(header));
  const S3Options& s = o.s3;
  if (s.part_size < kMinPartSize || s.part_size > kMaxPartSize) {
    return bad("part_size must be between 5 MiB and 5 GiB (S3's limits), not " +
               std::to_string(s.part_size));
  }
  if (s.upload_concurrency < 1) return bad("upload_concurrency must be >= 1");
  if (s.addressing != S3Addressing::kAuto && s.addressing != S3Addressing::kPath &&
      s.addressing != S3Addressing::kVirtual) {
    return bad("addressing must be auto, path or virtual");
  }
  if (s.access_key_id.empty() != s.secret_access_key.empty()) {
    return bad("access_key_id and secret_access_key go together");
  }
  if (!s.session_token.empty() && s.access_key_id.empty()) {
    return bad("session_token needs access_key_id and secret_access_key");
  }
  return Status::success();
}

}  // namespace jtree
