#include "io/remote/retry.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <string>

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

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The host of `url` as libcurl reads it ("" when it cannot parse it).
std::string url_host(std::string_view url) {
  std::string host;
  CURLU* u = curl_url();
  if (u == nullptr) return host;
  char* h = nullptr;
  if (curl_url_set(u, CURLUPART_URL, std::string(url).c_str(), 0) == CURLUE_OK &&
      curl_url_get(u, CURLUPART_HOST, &h, 0) == CURLUE_OK) {
    host = h;
  }
  curl_free(h);
  curl_url_cleanup(u);
  return host;
}

// What OpenSSL says when the two ends of a handshake share no protocol version or cipher.
bool tls_mismatch(std::string_view curl_error) {
  const std::string e = lower(curl_error);
  for (const char* what : {"wrong version number", "protocol version", "unsupported protocol",
                           "no protocols available", "version too low", "no shared cipher",
                           "no cipher", "handshake failure"}) {
    if (e.find(what) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

bool is_loopback_host(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::string h = lower(host);
  if (h == "localhost" || h.ends_with(".localhost")) return true;
  in_addr v4{};
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, h.c_str(), &v6) != 1) return false;
  if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
  return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
}

std::string permanent_failure(int curl_code, long os_errno, std::string_view url,
                              std::string_view curl_error) {
  if (curl_code == CURLE_COULDNT_CONNECT && os_errno == ECONNREFUSED &&
      is_loopback_host(url_host(url))) {
    return "connection refused by this machine: nothing listens on that port";
  }
  if (curl_code == CURLE_SSL_CONNECT_ERROR && tls_mismatch(curl_error)) {
    return "the TLS versions or ciphers of client and server do not meet";
  }
  return "";
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
