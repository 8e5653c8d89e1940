// One HTTP attempt at a time per caller, many callers at once: a libcurl multi handle driven
// by one event-loop thread, shared by every remote Source and Sink of the process. Callers
// block in perform() while the loop runs their transfer alongside all others, so connections
// (and TLS sessions, DNS answers) are reused across requests, files and threads, and HTTP/2
// streams are multiplexed over one connection when the server offers it.
//
// Retries are not done here: see remote_call.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jtree/status.h"

namespace jtree::remote {

/// What one response may make the client keep, whatever the server sends (SECURITY.md):
/// the body of an unaccepted response (an error) is kept up to kMaxErrorBodyBytes and the
/// transfer stops there; the header lines of one attempt (1xx and redirect responses
/// included) may total kMaxResponseHeaderBytes, beyond which the attempt fails with
/// ResourceExhausted; at most kMaxResponseHeaders headers are kept (later ones are dropped).
/// Accepted bodies go to the handler, which bounds them (BufferHandler, RangeHandler).
inline constexpr size_t kMaxErrorBodyBytes = 64 * 1024;
inline constexpr size_t kMaxResponseHeaderBytes = 256 * 1024;
inline constexpr size_t kMaxResponseHeaders = 256;

/// How to connect (per request: different objects may want different settings).
struct Transport {
  double connect_timeout_seconds = 10;
  double stall_timeout_seconds = 30;  ///< abandon a transfer that receives nothing this long
  bool verify_tls = true;
  std::string ca_file;  ///< empty: CURL_CA_BUNDLE / SSL_CERT_FILE / the system's bundle
  std::string ca_path;  ///< empty: SSL_CERT_DIR / the system's
  bool http2 = true;
  bool follow_redirects = false;
};

/// One request.
struct HttpRequest {
  std::string method = "GET";        ///< GET, HEAD, PUT, POST, DELETE
  std::string url;
  std::vector<std::string> headers;  ///< "Name: value"
  /// The body of a PUT or POST. Not copied: it must stay valid until perform() returns.
  std::span<const std::byte> body;
};

/// The status and headers of a response.
struct ResponseHead {
  long status = 0;
  int http_version = 0;  ///< 1 or 2
  std::vector<std::pair<std::string, std::string>> headers;  ///< names lower-cased

  /// The first header named `name` (lower-case), or null.
  const std::string* find(std::string_view name) const;
  /// Content-Length, when present and a number.
  std::optional<uint64_t> content_length() const;
};

/// Receives the final response of one attempt. Runs on the client's thread while the caller
/// waits in perform(); an attempt's handler calls never overlap.
class ResponseHandler {
 public:
  virtual ~ResponseHandler() = default;
  /// Whether this handler takes the body of a response with this status. Bodies of other
  /// statuses are kept (the first 64 KiB) in Attempt::error_body.
  virtual bool accepts(long status) const { return status >= 200 && status < 300; }
  /// The headers of an accepted response are complete; called once per attempt before any
  /// body byte (also when there is no body). An error stops the transfer.
  virtual Status on_head(const ResponseHead& head) { return Status::success(); }
  /// Body bytes of an accepted response, in order. An error stops the transfer.
  virtual Status on_body(std::span<const std::byte> data) = 0;
  /// True once the handler has all it needs: the rest of the body is not downloaded and the
  /// attempt counts as complete (a server that ignored a Range header).
  virtual bool satisfied() const { return false; }
  /// After a transfer that completed: whether the body was whole (a body shorter than its
  /// headers announced is an error here). Called by the retry loop, not by HttpClient.
  virtual Status on_done() { return Status::success(); }
  /// Forgets a failed attempt's state before the next one.
  virtual void reset() { transient_error = false; }

  /// Set by a handler when its error is worth another attempt (a truncated body), as
  /// opposed to one that would repeat (a server that answers the wrong range).
  bool transient_error = false;
};

/// What happened to one attempt.
struct Attempt {
  int curl_code = 0;       ///< CURLcode; 0 when the transfer completed (or was satisfied)
  std::string curl_error;  ///< libcurl's message for curl_code
  long os_errno = 0;       ///< the system's errno behind a failed transfer (0: none known)
  Status handler_status;   ///< the handler's error, when it stopped the transfer
  bool handler_called = false;  ///< on_head was called (the status was accepted)
  ResponseHead head;
  std::string error_body;  ///< a body the handler did not accept (its first 64 KiB only)
  uint64_t body_bytes = 0; ///< body bytes received (accepted or not)
  uint64_t sent_bytes = 0; ///< request body bytes sent
  long new_connections = 0;
};

/// The process-wide client.
class HttpClient {
 public:
  /// The shared client, started on first use and never destroyed (transfers may be running
  /// in other threads while the process exits).
  static HttpClient& shared();

  /// Runs one attempt of `request` and waits for it; at most `timeout_seconds` in all.
  /// Thread-safe. `handler` must outlive the call.
  Attempt perform(const HttpRequest& request, const Transport& transport,
                  ResponseHandler& handler, double timeout_seconds);

  struct Impl;

 private:
  HttpClient();
  Impl* impl_;  // never freed: see shared()
};

}  // namespace jtree::remote
