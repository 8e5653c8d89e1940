// The HTTP client against a hostile server that needs nothing outside the test: a thread on a
// loopback socket that answers one request with an endless error body, endless headers,
// endless 1xx responses, or an endless accepted body. What the client keeps and receives must
// stay bounded (http_client.h: kMaxErrorBodyBytes, kMaxResponseHeaderBytes; BufferHandler's
// cap), and each attempt must end at once, not when the server stops. Failures that retrying
// cannot fix (a port of this machine refusing, https:// to a plain-HTTP port) end at once, and
// an error page comes back as one short line.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>

#include <doctest/doctest.h>

#include "io/remote/http_client.h"
#include "io/remote/remote_call.h"
#include "io/remote/remote_source.h"
#include "jtree/jtree.h"
#include "loopback_socket.h"

using namespace jtree;
using namespace jtree::remote;

namespace {

using Clock = std::chrono::steady_clock;

// Answers the first connection on 127.0.0.1:<port>: reads the request head, sends `head`,
// then `repeat` again and again until the client goes away (or 256 MiB, or 30 s); with no
// `repeat`, closes the connection after `head` (a finite answer). `at_once`: answers as soon
// as the client's first bytes arrive, whatever they are (a plain-HTTP server that a TLS
// ClientHello reaches).
class HostileServer {
 public:
  HostileServer(std::string head, std::string repeat, bool at_once = false)
      : head_(std::move(head)), repeat_(std::move(repeat)), at_once_(at_once) {
    listen_fd_ = remote_testing::bind_loopback(&port_, 4);
    thread_ = std::thread([this] { serve(); });
  }
  ~HostileServer() {
    stop_ = true;
    thread_.join();
    ::close(listen_fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/object"; }
  uint64_t sent() const { return sent_.load(); }

 private:
  void serve() {
    pollfd p{listen_fd_, POLLIN, 0};
    const auto give_up = Clock::now() + std::chrono::seconds(30);
    while (!stop_ && Clock::now() < give_up) {
      if (::poll(&p, 1, 50) <= 0) continue;
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      answer(fd, give_up);
      ::close(fd);
    }
  }

  void answer(int fd, Clock::time_point give_up) {
    timeval tv{0, 200 * 1000};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string request;
    char buf[4096];
    while (request.find("\r\n\r\n") == std::string::npos && !(at_once_ && !request.empty()) &&
           Clock::now() < give_up && !stop_) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n == 0) return;
      if (n > 0) request.append(buf, static_cast<size_t>(n));
    }
    if (!send_all(fd, head_)) return;
    while (!repeat_.empty() && !stop_ && Clock::now() < give_up && sent_.load() < (256u << 20)) {
      if (!send_all(fd, repeat_)) return;
    }
  }

  bool send_all(int fd, const std::string& s) {
    size_t done = 0;
    while (done < s.size()) {
      const ssize_t n = ::send(fd, s.data() + done, s.size() - done, MSG_NOSIGNAL);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        if (stop_) return false;
        continue;
      }
      if (n <= 0) return false;  // the client closed the connection
      done += static_cast<size_t>(n);
      sent_ += static_cast<uint64_t>(n);
    }
    return true;
  }

  std::string head_, repeat_;
  bool at_once_ = false;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> sent_{0};
};

// One attempt of a GET, as the retry loop makes it.
Attempt get(const std::string& url, ResponseHandler& handler) {
  HttpRequest req;
  req.url = url;
  Transport tr;
  tr.stall_timeout_seconds = 10;
  return HttpClient::shared().perform(req, tr, handler, 20);
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

TEST_CASE("an endless error body: the first 64 KiB are kept and the transfer stops there") {
  HostileServer server("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 10000000000\r\n\r\n",
                       std::string(64 * 1024, 'x'));
  BufferHandler h;
  const auto start = Clock::now();
  const Attempt a = get(server.url(), h);
  CHECK(a.curl_code == 0);
  CHECK(a.head.status == 500);
  CHECK(!a.handler_called);
  CHECK(a.error_body.size() == kMaxErrorBodyBytes);
  CHECK(a.body_bytes < (4u << 20));  // what libcurl had buffered when it stopped, at most
  CHECK(seconds_since(start) < 10);
  // Read through the retry loop, it is the HTTP status, with an excerpt of the body.
  HttpOptions o;
  o.max_retries = 0;
  Transport tr;
  HostileServer again("HTTP/1.1 503 Service Unavailable\r\n\r\n", std::string(65536, 'y'));
  CallSpec spec;
  spec.name = again.url();
  spec.what = "GET";
  spec.transport = &tr;
  spec.options = &o;
  spec.build = [&](HttpRequest& r) {
    r.url = again.url();
    return Status::success();
  };
  auto r = call(spec, h);
  REQUIRE(!r.ok());
  CHECK(r.status().is_io_error());
  CHECK(r.status().message().find("HTTP 503: yyyy") != std::string::npos);
}

TEST_CASE("an endless header: the attempt fails once the headers pass their bound") {
  HostileServer server("HTTP/1.1 200 OK\r\n",
                       "X-Filler: " + std::string(1000, 'a') + "\r\n");
  BufferHandler h;
  const auto start = Clock::now();
  const Attempt a = get(server.url(), h);
  // Ours (ResourceExhausted), or libcurl's own limit where it is lower than ours.
  const bool ours = a.handler_status.code() == StatusCode::kResourceExhausted;
  CHECK((ours || a.curl_code != 0));
  if (ours) {
    CHECK(a.handler_status.message().find("response headers exceed") != std::string::npos);
  }
  CHECK(a.head.headers.size() <= kMaxResponseHeaders);
  CHECK(seconds_since(start) < 10);
  CHECK(server.sent() < (16u << 20));
}

TEST_CASE("endless 1xx responses count against the same bound") {
  HostileServer server("", "HTTP/1.1 100 Continue\r\nX-A: b\r\n\r\n");
  BufferHandler h;
  const auto start = Clock::now();
  const Attempt a = get(server.url(), h);
  CHECK((a.handler_status.code() == StatusCode::kResourceExhausted || a.curl_code != 0));
  CHECK(!a.handler_called);
  CHECK(seconds_since(start) < 10);
}

TEST_CASE("a header line of one megabyte is refused") {
  HostileServer server("HTTP/1.1 200 OK\r\nX-Huge: " + std::string(1 << 20, 'h') + "\r\n\r\n",
                       "body");
  BufferHandler h;
  const Attempt a = get(server.url(), h);
  CHECK((a.handler_status.code() == StatusCode::kResourceExhausted || a.curl_code != 0));
  CHECK(!a.handler_called);
}

TEST_CASE("an endless accepted body: BufferHandler's cap ends the transfer") {
  HostileServer server("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", std::string(65536, 'z'));
  BufferHandler h(1 << 20);
  const auto start = Clock::now();
  const Attempt a = get(server.url(), h);
  CHECK(a.handler_status.code() == StatusCode::kResourceExhausted);
  CHECK(h.body.size() <= (1u << 20));
  CHECK(a.body_bytes < (4u << 20));
  CHECK(seconds_since(start) < 10);
}

TEST_CASE("a handler that throws ends the attempt with its error, not the process") {
  // The body callback runs inside libcurl's C code, which an exception must not unwind
  // through: one from the handler (std::bad_alloc growing its buffer) used to end the process.
  struct Throwing : ResponseHandler {
    int kind = 0;
    Status on_body(std::span<const std::byte>) override {
      if (kind == 0) throw std::bad_alloc();
      throw std::runtime_error("handler gave up");
    }
  };
  for (int kind = 0; kind < 2; ++kind) {
    CAPTURE(kind);
    HostileServer server("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n",
                         std::string(4096, 'z'));
    Throwing h;
    h.kind = kind;
    const auto start = Clock::now();
    const Attempt a = get(server.url(), h);
    CHECK(a.curl_code == 0);  // (the handler's error, not libcurl's)
    if (kind == 0) {
      CHECK(a.handler_status.code() == StatusCode::kResourceExhausted);
      CHECK(a.handler_status.message() == "out of memory");
    } else {
      CHECK(a.handler_status.code() == StatusCode::kAborted);
      CHECK(a.handler_status.message() == "unexpected exception: handler gave up");
    }
    CHECK(seconds_since(start) < 10);
  }
}

TEST_CASE("opening a URL whose server answers an endless error body fails at once") {
  HostileServer server("HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\n\r\n",
                       std::string(65536, 'n'));
  OpenOptions oo;
  oo.remote.http.max_retries = 0;
  oo.remote.http.deadline_seconds = 20;
  const auto start = Clock::now();
  auto r = Reader::open(server.url(), oo);
  REQUIRE(!r.ok());
  CHECK(r.status().is_not_found());
  CHECK(r.status().message().find(server.url()) != std::string::npos);
  CHECK(seconds_since(start) < 10);
  CHECK(server.sent() < (16u << 20));
}

// ---- servers that ignore Range (issue 23, item 8) -------------------------------------------

namespace {

// A server that ignores Range: 200 with Content-Length 50 MB of 'z' to every GET.
constexpr uint64_t kIgnoredSize = 50'000'000;
std::string whole_body_head() {
  return "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(kIgnoredSize) +
         "\r\nConnection: close\r\n\r\n";
}

RemoteSourceStats stats_of(const Source& s) {
  return dynamic_cast<const RemoteSource&>(s).detailed_stats();
}

}  // namespace

TEST_CASE("a range read answered with the whole object stops at once: NotSupported, no body") {
  HostileServer server(whole_body_head(), std::string(65536, 'z'));
  OpenOptions oo;
  oo.remote.http.max_retries = 0;
  oo.remote.http.deadline_seconds = 20;
  auto src = open_source(server.url(), oo);
  REQUIRE(src.ok());
  const auto start = Clock::now();
  std::vector<std::byte> dst(10);
  ReadRange r{1000, dst};
  Status st = (*src)->read(std::span<const ReadRange>(&r, 1));
  CHECK(st.code() == StatusCode::kNotSupported);
  CHECK(st.message().find(server.url()) != std::string::npos);
  CHECK(st.message().find("server ignores HTTP Range requests (answered 200 with the whole body") !=
        std::string::npos);
  CHECK(st.message().find("allow_full_download / --allow-full-download") != std::string::npos);
  const RemoteSourceStats s = stats_of(**src);
  CHECK(s.io.read_requests == 1);  // not retried: it would be refused again
  CHECK(s.io.bytes_read == 0);     // stopped at the end of the headers
  CHECK(s.range_refused == 1);
  CHECK(s.full_downloads == 0);
  CHECK(seconds_since(start) < 10);
  // What the server got into the socket before the client closed it: far from 50 MB.
  CHECK(server.sent() < (16u << 20));
  // Opening a Reader fails the same way, naming the URL.
  auto reader = Reader::open(server.url(), oo);
  REQUIRE(!reader.ok());
  CHECK(reader.status().code() == StatusCode::kNotSupported);
  CHECK(reader.status().message().find(server.url()) != std::string::npos);
}

TEST_CASE("allow_full_download: the object is downloaded once, and reads are served from it") {
  HostileServer server(whole_body_head(), std::string(65536, 'z'));
  OpenOptions oo;
  oo.remote.http.max_retries = 0;
  oo.remote.http.deadline_seconds = 20;
  oo.remote.http.allow_full_download = true;
  auto src = open_source(server.url(), oo);
  REQUIRE(src.ok());
  std::vector<std::byte> a(10), b(100);
  ReadRange ra{1000, a};
  REQUIRE((*src)->read(std::span<const ReadRange>(&ra, 1)).ok());
  CHECK(std::all_of(a.begin(), a.end(), [](std::byte x) { return x == std::byte{'z'}; }));
  CHECK(*(*src)->size() == kIgnoredSize);
  ReadRange rb{kIgnoredSize - 100, b};
  REQUIRE((*src)->read(std::span<const ReadRange>(&rb, 1)).ok());
  CHECK(std::all_of(b.begin(), b.end(), [](std::byte x) { return x == std::byte{'z'}; }));
  ReadRange past{kIgnoredSize - 5, b};
  CHECK((*src)->read(std::span<const ReadRange>(&past, 1)).is_io_error());  // past the end
  const RemoteSourceStats s = stats_of(**src);
  CHECK(s.full_downloads == 1);
  CHECK(s.io.read_requests == 2);  // the refused range request, then the one download
  CHECK(s.io.bytes_read == kIgnoredSize);
}

TEST_CASE("allow_full_download: an object larger than full_download_max_bytes is refused") {
  HostileServer server(whole_body_head(), std::string(65536, 'z'));
  OpenOptions oo;
  oo.remote.http.max_retries = 0;
  oo.remote.http.deadline_seconds = 20;
  oo.remote.http.allow_full_download = true;
  oo.remote.http.full_download_max_bytes = 1 << 20;
  auto src = open_source(server.url(), oo);
  REQUIRE(src.ok());
  std::vector<std::byte> a(10);
  ReadRange ra{0, a};
  Status st = (*src)->read(std::span<const ReadRange>(&ra, 1));
  CHECK(st.code() == StatusCode::kResourceExhausted);
  CHECK(st.message().find("full_download_max_bytes") != std::string::npos);
  CHECK(stats_of(**src).io.bytes_read == 0);  // refused from Content-Length, before the body
}

// ---- failures that retrying cannot fix fail at once (issue 49) --------------------------------

namespace {

// A loopback port nothing listens on: bound (so that no other test takes it meanwhile) but
// never listened on, so connecting to it is refused.
class RefusingPort {
 public:
  RefusingPort() { fd_ = remote_testing::bind_loopback(&port_, 0); }
  ~RefusingPort() { ::close(fd_); }
  std::string url(const char* host = "127.0.0.1") const {
    return std::string("http://") + host + ":" + std::to_string(port_) + "/x.jtree";
  }

 private:
  int fd_ = -1;
  int port_ = 0;
};

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("a connection refused on a loopback address fails at once, saying so once") {
  RefusingPort port;
  for (const char* host : {"127.0.0.1", "localhost"}) {
    CAPTURE(host);
    OpenOptions oo;  // the defaults: 8 retries, which used to take 7-12 s here
    const auto start = Clock::now();
    auto r = Reader::open(port.url(host), oo);
    const double took = seconds_since(start);
    REQUIRE_FALSE(r.ok());
    CHECK(took < 1.0);
    const std::string m = r.status().message();
    CHECK(r.status().code() == StatusCode::kIOError);
    CHECK(m.rfind(port.url(host), 0) == 0);  // names the URL first
    CHECK(count(m, "refused") == 1);
    CHECK(count(m, "not retried") == 1);
    CHECK(m.find("attempt") == std::string::npos);  // one attempt: no "gave up after N"
  }
}

TEST_CASE("an HTTP 404 with an HTML page: the message carries one short line of it") {
  const std::string page =
      "<!DOCTYPE HTML>\n<html lang=\"en\">\n    <head>\n        <meta charset=\"utf-8\">\n"
      "        <title>Error response</title>\n    </head>\n    <body>\n"
      "        <h1>Error response</h1>\n        <p>Error code: 404</p>\n"
      "        <p>Message: File not found.</p>\n    </body>\n</html>\n";
  HostileServer server("HTTP/1.1 404 File not found\r\nContent-Type: text/html\r\n"
                       "Content-Length: " + std::to_string(page.size()) +
                       "\r\nConnection: close\r\n\r\n" + page,
                       "");
  OpenOptions oo;
  const auto start = Clock::now();
  auto r = Reader::open(server.url(), oo);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().is_not_found());  // a 4xx: not retried
  CHECK(seconds_since(start) < 5);
  const std::string m = r.status().message();
  CHECK(m.find("HTTP 404: Error response") != std::string::npos);
  CHECK(m.find('<') == std::string::npos);
  CHECK(m.find('\n') == std::string::npos);
  CHECK(m.find("Error code") == std::string::npos);
}

TEST_CASE("https:// to a plain-HTTP port fails at once: the TLS handshake cannot succeed") {
  HostileServer server("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n"
                       "Connection: close\r\n\r\n",
                       "", /*at_once=*/true);
  std::string url = server.url();
  url.replace(0, 4, "https");  // the same port, spoken to in TLS
  OpenOptions oo;  // the defaults: 8 retries
  const auto start = Clock::now();
  auto r = Reader::open(url, oo);
  REQUIRE_FALSE(r.ok());
  CHECK(seconds_since(start) < 1.0);
  const std::string m = r.status().message();
  CHECK(m.find("TLS versions or ciphers") != std::string::npos);
  CHECK(count(m, "not retried") == 1);
  CHECK(m.find("attempt") == std::string::npos);
}
