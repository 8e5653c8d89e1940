// When and how long to wait before trying a request again. Pure functions.
#pragma once

#include <optional>
#include <string_view>

#include "jtree/remote.h"

namespace jtree::remote {

/// Whether an HTTP status is worth another attempt: 408, 429 and 5xx except 501 and 505
/// (which say "never": not implemented, version not supported).
bool retryable_status(long status);

/// Whether a libcurl error code is transient: connection refused or reset, timeouts, stalls,
/// a body shorter than announced, HTTP/2 stream errors, TLS handshakes cut short. Not: bad
/// URLs, certificate failures, write errors raised by jtree itself.
bool retryable_curl_code(int code);

/// A Retry-After value in seconds ("120"); HTTP dates and anything else: nullopt.
std::optional<double> parse_retry_after(std::string_view value);

/// The wait before retry `retry` (1 for the first retry): `unit` (uniform in [0, 1)) times
/// min(backoff_max, backoff_initial x 2^(retry-1)) ("full jitter": concurrent clients do not
/// retry in lockstep), raised to the server's Retry-After if that is longer, never above
/// backoff_max.
double backoff_seconds(const HttpOptions& options, int retry, double unit,
                       std::optional<double> retry_after);

}  // namespace jtree::remote
