// One request, made to succeed: attempts with exponential backoff and jitter on transient
// failures (429, 5xx, timeouts, resets, stalls, truncated bodies), within a total deadline,
// ending with an error that names the object, the request and what failed.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <semaphore>
#include <string>

#include "io/remote/http_client.h"
#include "jtree/io.h"
#include "jtree/remote.h"

namespace jtree::remote {

/// Counters shared by the calls of one Source or Sink.
struct CallStats {
  std::atomic<uint64_t> requests{0};      ///< attempts sent
  std::atomic<uint64_t> bytes_received{0};
  std::atomic<uint64_t> bytes_sent{0};
  std::atomic<uint64_t> retries{0};
  std::atomic<uint64_t> connections{0};   ///< new connections opened
  std::atomic<uint64_t> http2_responses{0};
};

/// Why an attempt failed, and whether another may succeed.
struct Failure {
  Status status;
  bool transient = false;
  std::optional<double> retry_after;  ///< the server's Retry-After, in seconds
};

/// A server's error body as one short line for a message (at most 100 characters): an HTML
/// page's <title>, else the text between the tags of markup, else a plain body's first line;
/// printable ASCII only, blanks collapsed, "..." where it was cut. "" for an empty body.
std::string error_excerpt(std::string_view body);

/// The generic reading of an unaccepted response (its body through error_excerpt): 404
/// NotFound, 401/403 PermissionDenied, 412 Aborted (the object changed), 408/429/5xx transient
/// IOError, others IOError. `what` names the request ("GET bytes=0-99").
Failure http_failure(const Attempt& attempt, const std::string& what);

/// A request and how to make it.
struct CallSpec {
  std::string name;  ///< the object, first in every message ("https://h/x", "s3://b/k")
  std::string what;  ///< the request ("GET bytes=0-99", "UploadPart 3")
  /// Fills the request for a new attempt (S3 signs here: signatures carry the time).
  std::function<Status(HttpRequest&)> build;
  /// Reads an unaccepted response (S3 parses its XML); default http_failure.
  std::function<Failure(const Attempt&)> map_error;
  const Transport* transport = nullptr;
  const HttpOptions* options = nullptr;
  CallStats* stats = nullptr;                        ///< optional
  std::counting_semaphore<>* limiter = nullptr;      ///< optional: bounds attempts in flight
};

/// Runs `spec` until it succeeds, fails for good, runs out of retries or passes its deadline.
/// Returns the accepted response's head; the body went to `handler` (reset before each
/// attempt). Errors: "<name>: <what>: <reason> (after N attempts in T s)".
Result<ResponseHead> call(const CallSpec& spec, ResponseHandler& handler);

/// A handler that keeps the body in memory (bounded), for small XML answers.
class BufferHandler : public ResponseHandler {
 public:
  explicit BufferHandler(size_t max_bytes = 16u << 20) : max_bytes_(max_bytes) {}
  Status on_body(std::span<const std::byte> data) override;
  void reset() override {
    ResponseHandler::reset();
    body.clear();
  }
  std::string body;

 private:
  size_t max_bytes_;
};

}  // namespace jtree::remote
