// When and how long to wait before trying a request again. Pure functions.
#pragma once

#include <optional>
#include <string>
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

/// Why a failed transfer would fail the same way however often it is retried, though its
/// libcurl code is one retryable_curl_code() counts as transient; "" when a retry may help.
///  - A connection refused (ECONNREFUSED, `os_errno`) by a loopback host of `url` (localhost,
///    127.0.0.0/8, ::1): nothing listens on that port of this machine, and no network between
///    could have refused it for a moment (a remote host's refusal may be a restart: retried).
///  - A TLS handshake refused over the protocol version or the ciphers (`curl_error`: "wrong
///    version number" for https:// to a plain-HTTP port, "protocol version", "unsupported
///    protocol", "no shared cipher", "handshake failure"): the next handshake is the same.
std::string permanent_failure(int curl_code, long os_errno, std::string_view url,
                              std::string_view curl_error);

/// Whether `host` (as in a URL: "localhost", "127.0.0.1", "[::1]") is this machine's loopback.
bool is_loopback_host(std::string_view host);

/// A Retry-After value in seconds ("120"); HTTP dates and anything else: nullopt.
std::optional<double> parse_retry_after(std::string_view value);

/// The wait before retry `retry` (1 for the first retry): `unit` (uniform in [0, 1)) times
/// min(backoff_max, backoff_initial x 2^(retry-1)) ("full jitter": concurrent clients do not
/// retry in lockstep), raised to the server's Retry-After if that is longer, never above
/// backoff_max.
double backoff_seconds(const HttpOptions& options, int retry, double unit,
                       std::optional<double> retry_after);

}  // namespace jtree::remote
