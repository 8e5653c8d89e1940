#include "io/remote/remote_call.h"

#include <cctype>
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

// A failed transfer's verdict: transient as libcurl's code says, unless the failure is one
// that repeats (retry.h permanent_failure), which the message then says.
Failure transfer_failure(const Attempt& a, std::string_view url) {
  const std::string why = permanent_failure(a.curl_code, a.os_errno, url, a.curl_error);
  if (!why.empty()) {
    return Failure{Status::io_error(a.curl_error + " (" + why + "; not retried)"), false, {}};
  }
  return Failure{Status::io_error(a.curl_error), retryable_curl_code(a.curl_code), {}};
}

// An attempt of the request to `url`'s verdict: nullopt when it succeeded.
std::optional<Failure> judge(const CallSpec& spec, const Attempt& a, ResponseHandler& handler,
                             std::string_view url) {
  if (!a.handler_status.ok()) return Failure{a.handler_status, handler.transient_error, {}};
  if (a.curl_code != 0) return transfer_failure(a, url);
  if (!a.handler_called) return spec.map_error ? spec.map_error(a) : http_failure(a, spec.what);
  Status done = handler.on_done();
  if (!done.ok()) return Failure{done, handler.transient_error, {}};
  return std::nullopt;
}

constexpr size_t kMaxExcerpt = 100;

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The text of markup (HTML, XML): its <title> when it has a non-blank one (an HTML error
// page's title is its summary: "404 Not Found"), else every text between its tags.
std::string markup_text(std::string_view body) {
  const std::string low = lower(body);
  const size_t open = low.find("<title");
  const size_t start = open == std::string::npos ? open : low.find('>', open);
  const size_t end = start == std::string::npos ? start : low.find("</title", start);
  if (end != std::string::npos) {
    std::string title(body.substr(start + 1, end - start - 1));
    if (title.find_first_not_of(" \t\r\n") != std::string::npos) return title;
  }
  std::string text;
  bool in_tag = false;
  for (char c : body) {
    if (c == '<') in_tag = true;
    if (!in_tag) text += c;
    if (c == '>') {
      in_tag = false;
      text += ' ';  // tags separate words ("<h1>404</h1>nginx")
    }
  }
  return text;
}

}  // namespace

std::string error_excerpt(std::string_view body) {
  const size_t first = body.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return "";
  body.remove_prefix(first);
  std::string text;
  if (body.front() == '<') {
    text = markup_text(body);
  } else {
    text = std::string(body.substr(0, body.find('\n')));  // a plain body's first line
  }
  // One line of printable ASCII, blanks collapsed, at most kMaxExcerpt characters.
  std::string out;
  for (char c : text) {
    const bool printable = c > 32 && c < 127;
    if (printable) out += c;
    else if (!out.empty() && out.back() != ' ') out += ' ';
    if (out.size() > kMaxExcerpt) break;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  if (out.size() > kMaxExcerpt) out = out.substr(0, kMaxExcerpt - 3) + "...";
  return out;
}

Failure http_failure(const Attempt& a, const std::string& what) {
  Failure f;
  std::string msg = "HTTP " + std::to_string(a.head.status);
  // The server's explanation, cut to one short line (an error page is often a whole HTML
  // document): it helps more than the code alone.
  const std::string excerpt = error_excerpt(a.error_body);
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
    std::optional<Failure> f = judge(spec, a, handler, req.url);
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
