#include "io/remote/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "io/remote/content_range.h"
#include "jtree/writer.h"
#include "util/guarded.h"

namespace jtree::remote {
namespace {

// What a hostile or broken server can make the client keep or receive (http_client.h).
constexpr size_t kErrorBodyBytes = kMaxErrorBodyBytes;
constexpr size_t kHeaderBytes = kMaxResponseHeaderBytes;
constexpr size_t kHeaderCount = kMaxResponseHeaders;
// libcurl's receive buffer: larger than the 16 KiB default, so that fast (loopback, LAN)
// transfers cost fewer callbacks and system calls per byte.
constexpr long kReceiveBufferBytes = 512 * 1024;
constexpr long kUploadBufferBytes = 512 * 1024;
// Idle connections kept for reuse.
constexpr long kMaxIdleConnections = 64;
// How often the loop looks for stalled transfers while some are running.
constexpr int kStallCheckMs = 100;

using Clock = std::chrono::steady_clock;

struct EasyDeleter {
  void operator()(CURL* e) const { curl_easy_cleanup(e); }
};
using UniqueEasy = std::unique_ptr<CURL, EasyDeleter>;
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
using UniqueSlist = std::unique_ptr<curl_slist, SlistDeleter>;

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' ||
                        s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

// One attempt in flight. Lives on the caller's stack; the loop thread uses it until it sets
// `done` (under `mu`) and never touches it afterwards.
struct Transfer {
  const HttpRequest* request = nullptr;
  const Transport* transport = nullptr;
  ResponseHandler* handler = nullptr;
  double timeout_seconds = 0;
  Attempt attempt;
  CURL* easy = nullptr;  // owned by the loop's pool
  UniqueSlist headers;
  char errbuf[CURL_ERROR_SIZE] = {};
  bool head_delivered = false;  // the handler's on_head ran (or the status was refused)
  bool accepted = false;
  bool satisfied = false;
  bool stalled = false;
  bool error_body_full = false;  // an unaccepted body reached kErrorBodyBytes: stopped there
  size_t header_bytes = 0;       // every header line of the attempt (1xx and redirects too)
  size_t upload_pos = 0;
  Clock::time_point last_progress;  // the last byte sent or received (loop thread only)

  std::mutex mu;
  std::condition_variable cv;
  bool done = false;

  // Decides, once per attempt, whether the handler takes this response.
  bool deliver_head() {
    if (head_delivered) return accepted;
    head_delivered = true;
    accepted = handler->accepts(attempt.head.status);
    if (accepted) {
      attempt.handler_called = true;
      attempt.handler_status = handler->on_head(attempt.head);
      if (!attempt.handler_status.ok()) return false;
    }
    return accepted;
  }
};

// libcurl's callbacks (on_header, on_write) run inside libcurl's C code, which an exception
// must not unwind through (it would end the process). One thrown by a callback's body (a
// std::bad_alloc growing a header list or a handler's buffer) ends the attempt with its Status
// as the handler's error instead (util/guarded.h).
template <class Body>
size_t unthrowing(Transfer* t, Body&& body) noexcept {
  Result<size_t> n = guarded([&]() -> Result<size_t> { return body(); });
  if (n.ok()) return *n;
  t->attempt.handler_status = n.status();
  return 0;  // stops the transfer
}

size_t header_line(Transfer* t, char* buffer, size_t n) {
  t->last_progress = Clock::now();
  const std::string_view line(buffer, n);
  // Bounded: an endless header (or endless 1xx responses) ends the attempt. (libcurl has its
  // own limits, which differ between versions: this one holds whichever libcurl runs.)
  t->header_bytes += n;
  if (t->header_bytes > kHeaderBytes) {
    t->attempt.handler_status = Status::resource_exhausted(
        "the response headers exceed " + std::to_string(kHeaderBytes) + " bytes");
    return 0;  // stops the transfer
  }
  if (line.substr(0, 5) == "HTTP/") {
    // A new response (after a 100 Continue or a redirect): forget the previous headers.
    t->attempt.head.headers.clear();
    t->attempt.head.status = 0;
    const size_t sp = line.find(' ');
    if (sp != std::string_view::npos) {
      const std::string_view code = trim(line.substr(sp + 1, 3));
      if (auto v = parse_decimal(code)) t->attempt.head.status = static_cast<long>(*v);
    }
    return n;
  }
  if (trim(line).empty()) {
    // The end of a response's headers. The final response's head goes to the handler now,
    // before any body byte arrives, so that a handler refusing it (a 200 with the whole
    // object to a range request) stops the transfer without receiving any of its body.
    // Not for 1xx answers, nor for redirects that libcurl is about to follow.
    const long status = t->attempt.head.status;
    const bool followed = t->transport->follow_redirects && status >= 300 && status < 400 &&
                          t->attempt.head.find("location") != nullptr;
    if (status >= 200 && !followed) {
      t->deliver_head();
      if (!t->attempt.handler_status.ok()) return 0;  // stops the transfer
    }
    return n;
  }
  const size_t colon = line.find(':');
  // Bounded: a hostile server cannot make the list grow without limit.
  if (colon != std::string_view::npos && t->attempt.head.headers.size() < kHeaderCount) {
    t->attempt.head.headers.emplace_back(lower(trim(line.substr(0, colon))),
                                         std::string(trim(line.substr(colon + 1))));
  }
  return n;
}

size_t on_header(char* buffer, size_t size, size_t nitems, void* userp) {
  auto* t = static_cast<Transfer*>(userp);
  return unthrowing(t, [&] { return header_line(t, buffer, size * nitems); });
}

size_t body_bytes(Transfer* t, char* ptr, size_t n) {
  t->last_progress = Clock::now();
  t->attempt.body_bytes += n;
  if (!t->head_delivered) {
    const bool take = t->deliver_head();
    if (!t->attempt.handler_status.ok()) return 0;  // stops the transfer
    if (!take) t->attempt.error_body.reserve(std::min<size_t>(kErrorBodyBytes, n));
  }
  if (!t->accepted) {
    // Kept up to kErrorBodyBytes, and not downloaded beyond: a server that sends an endless
    // error body costs one buffer, not the time to receive it.
    const size_t room = kErrorBodyBytes - std::min(kErrorBodyBytes, t->attempt.error_body.size());
    t->attempt.error_body.append(ptr, std::min(room, n));
    if (n > room) {
      t->error_body_full = true;
      return 0;  // stops the transfer (finish() does not count it as a failure)
    }
    return n;
  }
  t->attempt.handler_status =
      t->handler->on_body({reinterpret_cast<const std::byte*>(ptr), n});
  if (!t->attempt.handler_status.ok()) return 0;
  if (t->handler->satisfied()) {
    t->satisfied = true;
    return 0;  // stop here: the rest is not needed
  }
  return n;
}

size_t on_write(char* ptr, size_t size, size_t nmemb, void* userp) {
  auto* t = static_cast<Transfer*>(userp);
  return unthrowing(t, [&] { return body_bytes(t, ptr, size * nmemb); });
}

size_t on_read(char* buffer, size_t size, size_t nitems, void* userp) {
  auto* t = static_cast<Transfer*>(userp);
  const auto body = t->request->body;
  const size_t n = std::min(size * nitems, body.size() - t->upload_pos);
  if (n > 0) std::memcpy(buffer, body.data() + t->upload_pos, n);
  t->last_progress = Clock::now();
  t->upload_pos += n;
  t->attempt.sent_bytes += n;
  return n;
}

// libcurl rewinds an upload it must send again (a reused connection that turned out closed).
int on_seek(void* userp, curl_off_t offset, int origin) {
  auto* t = static_cast<Transfer*>(userp);
  if (origin != SEEK_SET || offset < 0 ||
      static_cast<uint64_t>(offset) > t->request->body.size()) {
    return CURL_SEEKFUNC_CANTSEEK;
  }
  t->upload_pos = static_cast<size_t>(offset);
  return CURL_SEEKFUNC_OK;
}

}  // namespace

const std::string* ResponseHead::find(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k == name) return &v;
  }
  return nullptr;
}

std::optional<uint64_t> ResponseHead::content_length() const {
  const std::string* v = find("content-length");
  if (v == nullptr) return std::nullopt;
  return parse_decimal(*v);
}

// One libcurl multi handle and the thread that drives it.
struct EventLoop {
  CURLM* multi = nullptr;
  CURLSH* share = nullptr;
  std::mutex mu;
  std::vector<Transfer*> pending;  // submitted, not yet added to the multi handle
  std::vector<UniqueEasy> idle;    // loop thread only
  std::vector<Transfer*> active;   // added to the multi handle (loop thread only)
  std::string user_agent;

  EventLoop() {
    multi = curl_multi_init();
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, kMaxIdleConnections);
    curl_multi_setopt(multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
    // TLS sessions and DNS answers shared by all easy handles. Only the loop thread uses
    // them, so no locking callbacks are needed.
    share = curl_share_init();
    curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    user_agent = "jtree/" + std::string(version_string());
    std::thread([this] { loop(); }).detach();
  }

  void submit(Transfer* t) {
    {
      std::lock_guard<std::mutex> lock(mu);
      pending.push_back(t);
    }
    curl_multi_wakeup(multi);
  }

  CURL* take_easy() {
    if (idle.empty()) return curl_easy_init();
    CURL* e = idle.back().release();
    idle.pop_back();
    return e;
  }

  void configure(Transfer* t) {
    CURL* e = t->easy;
    const HttpRequest& r = *t->request;
    const Transport& tr = *t->transport;
    curl_easy_setopt(e, CURLOPT_PRIVATE, t);
    curl_easy_setopt(e, CURLOPT_SHARE, share);
    curl_easy_setopt(e, CURLOPT_URL, r.url.c_str());
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->errbuf);
    curl_easy_setopt(e, CURLOPT_USERAGENT, user_agent.c_str());
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, kReceiveBufferBytes);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, t);
    // A proxy's answer to CONNECT is not the response: keep it out of the header callback.
    curl_easy_setopt(e, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS,
                     static_cast<long>(std::max(1.0, std::ceil(t->timeout_seconds * 1000))));
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(std::max(1.0, std::ceil(std::min(
                                                         tr.connect_timeout_seconds,
                                                         t->timeout_seconds) * 1000))));
    // Stalls are detected by the loop (check_stalls), not with CURLOPT_LOW_SPEED_*: libcurl
    // averages the speed over a window of several seconds, so a transfer that got some bytes
    // and then stopped would be noticed only seconds after the configured time.
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION,
                     tr.http2 ? CURL_HTTP_VERSION_2TLS : CURL_HTTP_VERSION_1_1);
    // Wait for an HTTP/2 connection being set up rather than opening a second one.
    curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
    if (tr.follow_redirects) {
      curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
      curl_easy_setopt(e, CURLOPT_MAXREDIRS, 5L);
      curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    }
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, tr.verify_tls ? 1L : 0L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, tr.verify_tls ? 2L : 0L);
    // The environment is read per transfer, not once per process: a program (or a Python
    // user through os.environ) may point at its CA bundle after the first request.
    std::string ca_file = tr.ca_file, ca_path = tr.ca_path;
    if (ca_file.empty()) ca_file = env_or_empty("CURL_CA_BUNDLE");
    if (ca_file.empty()) ca_file = env_or_empty("SSL_CERT_FILE");
    if (ca_path.empty()) ca_path = env_or_empty("SSL_CERT_DIR");
    if (!ca_file.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, ca_file.c_str());
    if (!ca_path.empty()) curl_easy_setopt(e, CURLOPT_CAPATH, ca_path.c_str());

    const bool has_body = r.method == "PUT" || r.method == "POST";
    if (r.method == "HEAD") {
      curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else if (r.method == "PUT") {
      curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(r.body.size()));
    } else if (r.method == "POST") {
      curl_easy_setopt(e, CURLOPT_POST, 1L);
      curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body.size()));
    } else if (r.method != "GET") {
      curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r.method.c_str());
    }
    if (has_body) {
      curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
      curl_easy_setopt(e, CURLOPT_READDATA, t);
      curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, on_seek);
      curl_easy_setopt(e, CURLOPT_SEEKDATA, t);
      curl_easy_setopt(e, CURLOPT_UPLOAD_BUFFERSIZE, kUploadBufferBytes);
    }
    curl_slist* list = nullptr;
    for (const std::string& h : r.headers) list = curl_slist_append(list, h.c_str());
    // No "Expect: 100-continue" round trip before bodies; no Content-Type for POSTs unless
    // the caller set one.
    if (has_body) list = curl_slist_append(list, "Expect:");
    const bool typed = std::any_of(r.headers.begin(), r.headers.end(), [](const std::string& h) {
      return lower(h.substr(0, 13)) == "content-type:";
    });
    if (r.method == "POST" && !typed) list = curl_slist_append(list, "Content-Type:");
    t->headers.reset(list);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, list);
  }

  // Abandons transfers that sent and received nothing for their stall timeout.
  void check_stalls() {
    const Clock::time_point now = Clock::now();
    for (size_t i = 0; i < active.size();) {
      Transfer* t = active[i];
      const double quiet = std::chrono::duration<double>(now - t->last_progress).count();
      if (quiet > t->transport->stall_timeout_seconds) {
        t->stalled = true;
        char msg[96];
        std::snprintf(msg, sizeof msg, "stalled: nothing received for %.1f s (%llu bytes so far)",
                      quiet, static_cast<unsigned long long>(t->attempt.body_bytes));
        std::strncpy(t->errbuf, msg, sizeof t->errbuf - 1);
        finish(t, CURLE_OPERATION_TIMEDOUT);  // removes it from `active`
      } else {
        ++i;
      }
    }
  }

  void finish(Transfer* t, CURLcode code) {
    active.erase(std::find(active.begin(), active.end(), t));
    CURL* e = t->easy;
    long connects = 0;
    curl_easy_getinfo(e, CURLINFO_NUM_CONNECTS, &connects);
    long version = 0;
    curl_easy_getinfo(e, CURLINFO_HTTP_VERSION, &version);
    Attempt& a = t->attempt;
    a.new_connections = connects;
    a.head.http_version = version == CURL_HTTP_VERSION_2_0 ? 2 : 1;
    if (code == CURLE_WRITE_ERROR && (t->satisfied || t->error_body_full)) code = CURLE_OK;
    if (code == CURLE_OK && !t->head_delivered) t->deliver_head();  // bodiless responses
    if (code == CURLE_WRITE_ERROR && !a.handler_status.ok()) code = CURLE_OK;  // handler's error
    a.curl_code = static_cast<int>(code);
    if (code != CURLE_OK) {
      a.curl_error = t->errbuf[0] != '\0' ? std::string(t->errbuf) : curl_easy_strerror(code);
      curl_easy_getinfo(e, CURLINFO_OS_ERRNO, &a.os_errno);  // (ECONNREFUSED: retry.h)
    }
    curl_multi_remove_handle(multi, e);
    curl_easy_reset(e);
    idle.emplace_back(e);
    std::lock_guard<std::mutex> lock(t->mu);
    t->done = true;
    t->cv.notify_one();  // under the lock: the caller may destroy *t as soon as it wakes
  }

  [[noreturn]] void loop() {
    std::vector<Transfer*> batch;
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu);
        batch.swap(pending);
      }
      for (Transfer* t : batch) {
        t->easy = take_easy();
        configure(t);
        t->last_progress = Clock::now();
        active.push_back(t);
        if (curl_multi_add_handle(multi, t->easy) != CURLM_OK) finish(t, CURLE_FAILED_INIT);
      }
      batch.clear();
      int running = 0;
      curl_multi_perform(multi, &running);
      int left = 0;
      while (CURLMsg* m = curl_multi_info_read(multi, &left)) {
        if (m->msg != CURLMSG_DONE) continue;
        Transfer* t = nullptr;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, reinterpret_cast<char**>(&t));
        finish(t, m->data.result);
      }
      check_stalls();
      curl_multi_poll(multi, nullptr, 0, active.empty() ? 1000 : kStallCheckMs, nullptr);
    }
  }
};

struct HttpClient::Impl {
  std::vector<std::unique_ptr<EventLoop>> loops;
  std::atomic<size_t> next{0};
};

HttpClient::HttpClient() : impl_(new Impl()) {
  const char* n = std::getenv("JTREE_HTTP_LOOPS");
  const int loops = n ? std::max(1, std::atoi(n)) : 1;
  for (int i = 0; i < loops; ++i) impl_->loops.push_back(std::make_unique<EventLoop>());
}

HttpClient& HttpClient::shared() {
  // Never destroyed: a detached loop thread serves it until the process ends.
  static HttpClient* client = [] {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return new HttpClient();
  }();
  return *client;
}

Attempt HttpClient::perform(const HttpRequest& request, const Transport& transport,
                            ResponseHandler& handler, double timeout_seconds) {
  Transfer t;
  t.request = &request;
  t.transport = &transport;
  t.handler = &handler;
  t.timeout_seconds = timeout_seconds;
  impl_->loops[impl_->next.fetch_add(1, std::memory_order_relaxed) % impl_->loops.size()]
      ->submit(&t);
  std::unique_lock<std::mutex> lock(t.mu);
  t.cv.wait(lock, [&] { return t.done; });
  return std::move(t.attempt);
}

}  // namespace jtree::remote
