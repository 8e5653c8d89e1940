#include "io/remote/remote_call.h"

#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "io/remote/retry.h"

namespace jtree::remote {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double jitter_unit() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
}

std::string fmt_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", s);
  return buf;
}

// An attempt's verdict: nullopt when it succeeded.
std::optional<Failure> judge(const CallSpec& spec, const Attempt& a, ResponseHandler& handler) {
  if (!a.handler_status.ok()) return Failure{a.handler_status, handler.transient_error, {}};
  if (a.curl_code != 0) {
    return Failure{Status::io_error(a.curl_error), retryable_curl_code(a.curl_code), {}};
  }
  if (!a.handler_called) return spec.map_error ? spec.map_error(a) : http_failure(a, spec.what);
  Status done = handler.on_done();
  if (!done.ok()) return Failure{done, handler.transient_error, {}};
  return std::nullopt;
}

}  // namespace

Failure http_failure(const Attempt& a, const std::string& what) {
  Failure f;
  std::string msg = "HTTP " + std::to_string(a.head.status);
  // A short, printable excerpt of the server's explanation helps more than the code alone.
  std::string excerpt;
  for (char c : a.error_body.substr(0, 200)) excerpt += (c >= 32 && c < 127) ? c : ' ';
  if (!excerpt.empty()) msg += ": " + excerpt;
  const long s = a.head.status;
  if (const std::string* ra = a.head.find("retry-after")) f.retry_after = parse_retry_after(*ra);
  if (s == 404 || s == 410) {
    f.status = Status::not_found(msg);
  } else if (s == 401 || s == 403) {
    f.status = Status::permission_denied(msg);
  } else if (s == 412) {
    f.status = Status::aborted("the object changed while being read (" + msg + ")");
  } else {
    f.status = Status::io_error(msg);
    f.transient = retryable_status(s);
  }
  return f;
}

Result<ResponseHead> call(const CallSpec& spec, ResponseHandler& handler) {
  const HttpOptions& o = *spec.options;
  const Clock::time_point start = Clock::now();
  const double deadline = std::max(0.001, o.deadline_seconds);
  int attempts = 0;
  Failure last;
  for (;;) {
    const double remaining = deadline - seconds_since(start);
    if (remaining <= 0) break;
    HttpRequest req;
    Status built = spec.build(req);
    if (!built.ok()) return built.with_prefix(spec.name + ": " + spec.what);
    handler.reset();
    if (spec.limiter) spec.limiter->acquire();
    Attempt a = HttpClient::shared().perform(req, *spec.transport, handler, remaining);
    if (spec.limiter) spec.limiter->release();
    ++attempts;
    if (spec.stats) {
      spec.stats->requests.fetch_add(1, std::memory_order_relaxed);
      spec.stats->bytes_received.fetch_add(a.body_bytes, std::memory_order_relaxed);
      spec.stats->bytes_sent.fetch_add(a.sent_bytes, std::memory_order_relaxed);
      spec.stats->connections.fetch_add(static_cast<uint64_t>(a.new_connections),
                                        std::memory_order_relaxed);
      if (a.head.http_version == 2) {
        spec.stats->http2_responses.fetch_add(1, std::memory_order_relaxed);
      }
    }
    std::optional<Failure> f = judge(spec, a, handler);
    if (!f) return std::move(a.head);
    last = std::move(*f);
    if (!last.transient) {
      std::string where = spec.name + ": " + spec.what;
      if (attempts > 1) {
        return last.status.with_prefix(where + " (attempt " + std::to_string(attempts) + ")");
      }
      return last.status.with_prefix(where);
    }
    if (attempts > o.max_retries) break;
    const double wait = backoff_seconds(o, attempts, jitter_unit(), last.retry_after);
    if (seconds_since(start) + wait >= deadline) break;
    if (spec.stats) spec.stats->retries.fetch_add(1, std::memory_order_relaxed);
    std::this_thread::sleep_for(std::chrono::duration<double>(wait));
  }
  const std::string summary = " (gave up after " + std::to_string(attempts) + " attempt" +
                              (attempts == 1 ? "" : "s") + " in " +
                              fmt_seconds(seconds_since(start)) + " s; deadline " +
                              fmt_seconds(deadline) + " s, max_retries " +
                              std::to_string(o.max_retries) + ")";
  if (attempts == 0) {
    return Status::aborted(spec.name + ": " + spec.what + ": deadline passed before the request");
  }
  return Status(last.status.code(), spec.name + ": " + spec.what + ": " +
                                        last.status.message() + summary);
}

Status BufferHandler::on_body(std::span<const std::byte> data) {
  if (body.size() + data.size() > max_bytes_) {
    return Status::resource_exhausted("answer larger than " + std::to_string(max_bytes_) +
                                     " bytes");
  }
  body.append(reinterpret_cast<const char*>(data.data()), data.size());
  return Status::success();
}

}  // namespace jtree::remote
