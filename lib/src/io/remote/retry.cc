#include "io/remote/retry.h"

#include <curl/curl.h>

#include <algorithm>
#include <cmath>

#include "io/remote/content_range.h"

namespace jtree::remote {

bool retryable_status(long status) {
  if (status == 408 || status == 429) return true;
  return status >= 500 && status <= 599 && status != 501 && status != 505;
}

bool retryable_curl_code(int code) {
  switch (static_cast<CURLcode>(code)) {
    case CURLE_COULDNT_RESOLVE_HOST:  // resolvers fail transiently under load
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_AGAIN:
      return true;
    default:
      return false;
  }
}

std::optional<double> parse_retry_after(std::string_view value) {
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\r')) value.remove_suffix(1);
  auto v = parse_decimal(value);
  if (!v) return std::nullopt;
  return static_cast<double>(std::min<uint64_t>(*v, 86400));
}

double backoff_seconds(const HttpOptions& options, int retry, double unit,
                       std::optional<double> retry_after) {
  const double cap = std::max(0.0, options.backoff_max_seconds);
  const double exp = options.backoff_initial_seconds * std::ldexp(1.0, std::clamp(retry - 1, 0, 60));
  double wait = std::clamp(unit, 0.0, 1.0) * std::min(cap, std::max(0.0, exp));
  if (retry_after) wait = std::max(wait, *retry_after);
  return std::min(wait, cap);
}

}  // namespace jtree::remote
