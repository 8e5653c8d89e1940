// The conditions an S3 sink puts on its commit, against a scripted S3 server on a loopback
// socket of the test's own (no servers to start): an append's PutObject or
// CompleteMultipartUpload carries "If-Match: <the ETag it copied from>", a save that must not
// replace anything carries "If-None-Match: *", and the server's 412 becomes the same Aborted
// error as the append guard's (naming the URL), with the multipart upload aborted. Whether a
// real store honours the headers is checked against Ceph RGW in test_s3.cc.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "io/remote/s3_etag.h"
#include "jtree/jtree.h"
#include "loopback_socket.h"

using namespace jtree;

namespace {

struct Request {
  std::string method;
  std::string target;  // path and query
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;

  const std::string* header(std::string_view name) const {
    for (const auto& [n, v] : headers) {
      if (n == name) return &v;
    }
    return nullptr;
  }
  bool has_query(std::string_view q) const {
    const size_t at = target.find('?');
    return at != std::string::npos && target.find(q, at) != std::string::npos;
  }
};

using Handler = std::function<std::string(const Request&)>;

// Serves HTTP/1.1 requests on 127.0.0.1, one per connection ("Connection: close"), answering
// each with `handler`'s full response text, and records them.
class ScriptedServer {
 public:
  explicit ScriptedServer(Handler handler) : handler_(std::move(handler)) {
    listen_fd_ = remote_testing::bind_loopback(&port_, 16);
    thread_ = std::thread([this] { serve(); });
  }
  ~ScriptedServer() {
    stop_ = true;
    thread_.join();
    ::close(listen_fd_);
  }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<Request> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  void serve() {
    pollfd p{listen_fd_, POLLIN, 0};
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!stop_ && std::chrono::steady_clock::now() < give_up) {
      if (::poll(&p, 1, 50) <= 0) continue;
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      answer(fd);
      ::close(fd);
    }
  }

  void answer(int fd) {
    timeval tv{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string in;
    char buf[65536];
    size_t head_end;
    while ((head_end = in.find("\r\n\r\n")) == std::string::npos) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return;
      in.append(buf, static_cast<size_t>(n));
    }
    Request r;
    const std::string head = in.substr(0, head_end);
    size_t line_end = head.find("\r\n");
    const std::string first = head.substr(0, line_end);
    r.method = first.substr(0, first.find(' '));
    r.target = first.substr(r.method.size() + 1, first.rfind(' ') - r.method.size() - 1);
    size_t content_length = 0;
    while (line_end != std::string::npos && line_end < head.size()) {
      const size_t start = line_end + 2;
      line_end = head.find("\r\n", start);
      const std::string line = head.substr(start, line_end == std::string::npos
                                                      ? std::string::npos
                                                      : line_end - start);
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = line.substr(0, colon);
      std::transform(name.begin(), name.end(), name.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      size_t v = colon + 1;
      while (v < line.size() && line[v] == ' ') ++v;
      r.headers.emplace_back(name, line.substr(v));
      if (name == "content-length") content_length = std::stoul(line.substr(v));
    }
    r.body = in.substr(head_end + 4);
    while (r.body.size() < content_length) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return;
      r.body.append(buf, static_cast<size_t>(n));
    }
    const std::string out = handler_(r);
    {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.push_back(std::move(r));
    }
    if (out.empty()) return;  // the request was handled, its reply is lost
    size_t done = 0;
    while (done < out.size()) {
      const ssize_t n = ::send(fd, out.data() + done, out.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return;
      done += static_cast<size_t>(n);
    }
  }

  Handler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<Request> requests_;
};

std::string response(int status, const std::string& reason, const std::string& body,
                     const std::vector<std::string>& headers = {}) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\n";
  for (const std::string& h : headers) out += h + "\r\n";
  out += "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
  return out + body;
}

const std::string kPreconditionFailed =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>PreconditionFailed</Code>"
    "<Message>At least one of the pre-conditions you specified did not hold</Message></Error>";

// An S3 store holding one object `data` with ETag `etag` (range GETs; HEAD: with_head_size),
// whose commits (PutObject without copy source, CompleteMultipartUpload) fail with 412, as
// when another writer replaced the object after this one planned, unless they carry
// "If-Match: <accept_if_match>" (when not empty).
Handler store(const std::string& data, const std::string& etag,
              const std::string& accept_if_match = {}) {
  return [data, etag, accept_if_match](const Request& r) -> std::string {
    const std::string* range = r.header("range");
    if (r.method == "GET" && range != nullptr) {
      const size_t eq = range->find('='), dash = range->find('-');
      const uint64_t first = std::stoull(range->substr(eq + 1, dash - eq - 1));
      const uint64_t last = std::min<uint64_t>(std::stoull(range->substr(dash + 1)),
                                               data.size() - 1);
      return response(206, "Partial Content", data.substr(first, last - first + 1),
                      {"ETag: " + etag, "Content-Range: bytes " + std::to_string(first) + "-" +
                                            std::to_string(last) + "/" +
                                            std::to_string(data.size())});
    }
    if (r.method == "POST" && r.has_query("uploads")) {
      return response(200, "OK",
                      "<InitiateMultipartUploadResult><Bucket>bkt</Bucket><Key>obj</Key>"
                      "<UploadId>up-1</UploadId></InitiateMultipartUploadResult>");
    }
    if (r.method == "PUT" && r.header("x-amz-copy-source") != nullptr) {
      return response(200, "OK",
                      "<CopyPartResult><ETag>\"copied\"</ETag></CopyPartResult>");
    }
    if (r.method == "PUT" && r.has_query("partNumber")) {
      return response(200, "OK", "", {"ETag: \"part\""});
    }
    if (r.method == "DELETE" && r.has_query("uploadId")) return response(204, "No Content", "");
    if (r.method == "GET") return response(404, "Not Found", "");
    const std::string* if_match = r.header("if-match");
    if (!accept_if_match.empty() && if_match != nullptr && *if_match == accept_if_match) {
      if (r.method == "PUT") return response(200, "OK", "", {"ETag: \"new\""});
      return response(200, "OK",
                      "<CompleteMultipartUploadResult><ETag>\"new-2\"</ETag>"
                      "</CompleteMultipartUploadResult>");
    }
    // PutObject or CompleteMultipartUpload: the object changed.
    return response(412, "Precondition Failed", kPreconditionFailed,
                    {"Content-Type: application/xml"});
  };
}

RemoteOptions options_for(const ScriptedServer& server) {
  RemoteOptions o;
  o.s3.endpoint = server.endpoint();
  o.s3.access_key_id = "AKIDEXAMPLE";
  o.s3.secret_access_key = "secret";
  o.s3.region = "us-east-1";
  o.s3.addressing = S3Addressing::kPath;
  o.http.max_retries = 0;
  o.http.deadline_seconds = 20;
  o.s3.part_size = 5u << 20;
  o.s3.upload_concurrency = 1;
  return o;
}

// The HEAD answer needs the object's size as Content-Length without a body: built by hand.
// The first HEAD (the append's copy) sees `etag`, later ones `later_etag` (a different value:
// another writer replaced the object; the same: it did not).
Handler with_head_size(Handler h, size_t size, const std::string& etag,
                       const std::string& later_etag) {
  auto heads = std::make_shared<int>(0);  // the server answers one request at a time
  return [h, size, etag, later_etag, heads](const Request& r) {
    if (r.method == "HEAD") {
      return "HTTP/1.1 200 OK\r\nETag: " + ((*heads)++ == 0 ? etag : later_etag) +
             "\r\nContent-Length: " + std::to_string(size) + "\r\nConnection: close\r\n\r\n";
    }
    return h(r);
  };
}

bool is_commit(const Request& r) {
  return (r.method == "PUT" && r.header("x-amz-copy-source") == nullptr &&
          !r.has_query("partNumber")) ||
         (r.method == "POST" && r.has_query("uploadId"));
}

const Request* find(const std::vector<Request>& rs, const std::function<bool(const Request&)>& f) {
  for (const Request& r : rs) {
    if (f(r)) return &r;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("s3 append: the commit carries If-Match; a 412 is the append guard's Aborted") {
  const std::string etag = "\"etag-planned\"";
  const std::string url = "s3://bkt/obj.jtree";
  // Below one part (a single PutObject on commit) and above (UploadPartCopy + complete).
  for (size_t size : {size_t{1000}, size_t{(5u << 20) + 1000}}) {
    CAPTURE(size);
    std::string data(size, 'x');
    ScriptedServer server(with_head_size(store(data, etag), size, etag, "\"other\""));
    SinkOptions so;
    so.remote = options_for(server);
    auto sink = open_append_sink(url, size, so, etag);
    REQUIRE_MESSAGE(sink.ok(), sink.status().to_string());
    const std::string more = "new generation";
    REQUIRE((*sink)->append(std::as_bytes(std::span(more))).ok());
    const Status st = (*sink)->commit();
    CHECK(st.code() == StatusCode::kAborted);
    CHECK(st.message().rfind(url + ": the file changed since this append was planned", 0) == 0);
    CHECK(st.message().find("nothing written") != std::string::npos);
    CHECK(st.message().find("412") != std::string::npos);
    const std::vector<Request> rs = server.requests();
    const bool multipart = size > (5u << 20);
    const Request* commit = find(rs, [&](const Request& r) {
      return multipart ? r.method == "POST" && r.has_query("uploadId")
                       : r.method == "PUT" && r.header("x-amz-copy-source") == nullptr &&
                             !r.has_query("partNumber");
    });
    REQUIRE(commit != nullptr);
    REQUIRE(commit->header("if-match") != nullptr);
    CHECK(*commit->header("if-match") == etag);
    CHECK(commit->header("if-none-match") == nullptr);
    // The header is signed like the others.
    REQUIRE(commit->header("authorization") != nullptr);
    CHECK(commit->header("authorization")->find("if-match") != std::string::npos);
    // The object did change (a HEAD after the 412 shows another ETag): no second try.
    CHECK(std::count_if(rs.begin(), rs.end(), is_commit) == 1);
    if (multipart) {
      // The copy was pinned to the same version, and the refused upload was aborted after.
      const Request* copy = find(rs, [](const Request& r) {
        return r.header("x-amz-copy-source") != nullptr;
      });
      REQUIRE(copy != nullptr);
      CHECK(*copy->header("x-amz-copy-source-if-match") == etag);
      CHECK(rs.back().method == "DELETE");
      CHECK(rs.back().has_query("uploadId=up-1"));
    }
  }
}

TEST_CASE("s3 append: with no planned ETag, the commit is pinned to the version copied") {
  const std::string etag = "\"etag-seen\"";
  std::string data(1000, 'y');
  ScriptedServer server(with_head_size(store(data, etag), data.size(), etag, "\"other\""));
  SinkOptions so;
  so.remote = options_for(server);
  auto sink = open_append_sink("s3://bkt/obj.jtree", data.size(), so, "");
  REQUIRE_MESSAGE(sink.ok(), sink.status().to_string());
  CHECK((*sink)->commit().code() == StatusCode::kAborted);
  const std::vector<Request> rs = server.requests();
  const Request* commit = find(rs, is_commit);
  REQUIRE(commit != nullptr);
  REQUIRE(commit->header("if-match") != nullptr);
  CHECK(*commit->header("if-match") == etag);
}

TEST_CASE("s3 append: a store that wants the bare ETag (Ceph RGW) gets it once the quoted one fails") {
  const std::string etag = "\"etag-unchanged\"";
  for (size_t size : {size_t{1000}, size_t{(5u << 20) + 1000}}) {
    CAPTURE(size);
    std::string data(size, 'w');
    // 412 for the quoted form; the object is unchanged (HEAD: same ETag); the bare one passes.
    ScriptedServer server(
        with_head_size(store(data, etag, "etag-unchanged"), size, etag, etag));
    SinkOptions so;
    so.remote = options_for(server);
    auto sink = open_append_sink("s3://bkt/obj.jtree", size, so, etag);
    REQUIRE_MESSAGE(sink.ok(), sink.status().to_string());
    const std::string more = "more";
    REQUIRE((*sink)->append(std::as_bytes(std::span(more))).ok());
    const Status st = (*sink)->commit();
    CHECK_MESSAGE(st.ok(), st.to_string());
    std::vector<Request> commits;
    for (const Request& r : server.requests()) {
      if (is_commit(r)) commits.push_back(r);
    }
    REQUIRE(commits.size() == 2);
    CHECK(*commits[0].header("if-match") == etag);
    CHECK(*commits[1].header("if-match") == "etag-unchanged");
  }
}

TEST_CASE("s3 save without overwrite: the commit carries If-None-Match; a 412 is AlreadyExists") {
  for (size_t size : {size_t{1000}, size_t{(5u << 20) + 1000}}) {
    CAPTURE(size);
    // Absent at the start (HEAD 404), then created by someone else before the commit.
    ScriptedServer server([inner = store("", "\"x\"")](const Request& r) {
      if (r.method == "HEAD") {
        return std::string("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: "
                           "close\r\n\r\n");
      }
      return inner(r);
    });
    SinkOptions so;
    so.remote = options_for(server);
    so.overwrite = false;
    auto sink = create_sink("s3://bkt/new.jtree", so);
    REQUIRE_MESSAGE(sink.ok(), sink.status().to_string());
    std::string body(size, 'z');
    REQUIRE((*sink)->append(std::as_bytes(std::span(body))).ok());
    const Status st = (*sink)->commit();
    CHECK(st.code() == StatusCode::kAlreadyExists);
    CHECK(st.message().rfind("s3://bkt/new.jtree: the object exists", 0) == 0);
    const std::vector<Request> rs = server.requests();
    const Request* commit = find(rs, [](const Request& r) {
      return (r.method == "PUT" && !r.has_query("partNumber")) ||
             (r.method == "POST" && r.has_query("uploadId"));
    });
    REQUIRE(commit != nullptr);
    REQUIRE(commit->header("if-none-match") != nullptr);
    CHECK(*commit->header("if-none-match") == "*");
    CHECK(commit->header("if-match") == nullptr);
    if (size > (5u << 20)) CHECK(rs.back().method == "DELETE");
  }
}

TEST_CASE("s3 save with overwrite (the default): no condition on the commit") {
  ScriptedServer server([](const Request& r) {
    return response(200, "OK", "", {"ETag: \"new\""});
  });
  SinkOptions so;
  so.remote = options_for(server);
  auto sink = create_sink("s3://bkt/any.jtree", so);
  REQUIRE(sink.ok());
  const std::string body = "small";
  REQUIRE((*sink)->append(std::as_bytes(std::span(body))).ok());
  const Status st = (*sink)->commit();
  CHECK_MESSAGE(st.ok(), st.to_string());
  const std::vector<Request> rs = server.requests();
  REQUIRE(!rs.empty());
  CHECK(rs.front().method == "PUT");
  CHECK(rs.front().header("if-match") == nullptr);
  CHECK(rs.front().header("if-none-match") == nullptr);
}

TEST_CASE("s3 ETags a write makes: MD5 of the body, and MD5 of the parts' MD5s for multipart") {
  using remote::multipart_etag;
  using remote::put_object_etag;
  using remote::same_etag;
  const std::string abc = "abc";
  CHECK(put_object_etag(std::as_bytes(std::span(abc))) == "\"900150983cd24fb0d6963f7d28e17f72\"");
  CHECK(put_object_etag({}) == "\"d41d8cd98f00b204e9800998ecf8427e\"");
  // Parts "a" and "b" (their ETags as UploadPart returns them, quoted or not).
  CHECK(multipart_etag({{1, "\"0cc175b9c0f1b6a831c399e269772661\""},
                        {2, "92eb5ffee6ae2fec3ad71c777531578f"}}) ==
        "\"96e024ba2074fe77e8e965ba43a704be-2\"");
  // A part whose ETag is not an MD5 (SSE-KMS): nothing to predict.
  CHECK(!multipart_etag({{1, "\"0cc175b9c0f1b6a831c399e269772661\""}, {2, "\"kms-etag\""}}));
  CHECK(same_etag("\"x-2\"", "x-2"));
  CHECK(!same_etag("\"x-2\"", "\"x-3\""));
}

namespace {

// An S3 store that makes the object on the first commit but loses its reply (the connection
// closes unanswered), then refuses the HTTP layer's retry of that commit with 412 (its
// condition no longer holds: the object now exists, with the new ETag). HEAD: absent before
// the commit, then the new object, or (`other_writer`) an object of the same size that
// another writer made.
struct LostReplyStore {
  std::mutex mu;
  std::vector<std::string> part_md5;  // hex, by part number - 1
  std::string committed_etag;         // quoted; empty until the first commit
  uint64_t committed_size = 0;
  int commits = 0;
  bool other_writer = false;

  static std::string md5_hex(const std::string& data) {
    return remote::put_object_etag(std::as_bytes(std::span(data))).substr(1, 32);
  }

  std::string operator()(const Request& r) {
    std::lock_guard<std::mutex> lock(mu);
    if (r.method == "HEAD") {
      if (commits == 0) {
        return "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      }
      const std::string etag = other_writer ? std::string("\"someone-else\"") : committed_etag;
      return "HTTP/1.1 200 OK\r\nETag: " + etag + "\r\nContent-Length: " +
             std::to_string(committed_size) + "\r\nConnection: close\r\n\r\n";
    }
    if (r.method == "POST" && r.has_query("uploads")) {
      return response(200, "OK",
                      "<InitiateMultipartUploadResult><Bucket>bkt</Bucket><Key>obj</Key>"
                      "<UploadId>up-1</UploadId></InitiateMultipartUploadResult>");
    }
    if (r.method == "PUT" && r.has_query("partNumber")) {
      const size_t at = r.target.find("partNumber=") + 11;
      const size_t n = std::stoul(r.target.substr(at));
      if (part_md5.size() < n) part_md5.resize(n);
      part_md5[n - 1] = md5_hex(r.body);
      return response(200, "OK", "", {"ETag: \"" + part_md5[n - 1] + "\""});
    }
    if (r.method == "DELETE") return response(204, "No Content", "");
    if (is_commit(r)) {
      if (++commits > 1) {
        return response(412, "Precondition Failed", kPreconditionFailed,
                        {"Content-Type: application/xml"});
      }
      if (r.method == "PUT") {
        committed_etag = "\"" + md5_hex(r.body) + "\"";
        committed_size = r.body.size();
      } else {
        std::vector<remote::UploadedPart> parts;
        for (size_t i = 0; i < part_md5.size(); ++i) {
          parts.push_back({static_cast<int>(i + 1), part_md5[i]});
        }
        committed_etag = *remote::multipart_etag(parts);
        committed_size = 0;  // set by the test: the body sizes are not kept
      }
      return "";  // made, reply lost
    }
    return response(404, "Not Found", "");
  }
};

}  // namespace

TEST_CASE("s3 save: a commit whose reply was lost and whose retry got 412 is a commit") {
  for (size_t size : {size_t{1000}, size_t{(5u << 20) + 1000}}) {
    for (bool other_writer : {false, true}) {
      CAPTURE(size);
      CAPTURE(other_writer);
      auto store = std::make_shared<LostReplyStore>();
      store->other_writer = other_writer;
      ScriptedServer server([store, size](const Request& r) {
        std::string out = (*store)(r);
        if (store->commits == 1 && store->committed_size == 0) store->committed_size = size;
        return out;
      });
      SinkOptions so;
      so.remote = options_for(server);
      so.remote.http.max_retries = 1;  // the lost reply is retried once
      so.remote.http.backoff_initial_seconds = 0.01;
      so.overwrite = false;
      auto sink = create_sink("s3://bkt/new.jtree", so);
      REQUIRE_MESSAGE(sink.ok(), sink.status().to_string());
      std::string body(size, 'q');
      REQUIRE((*sink)->append(std::as_bytes(std::span(body))).ok());
      const Status st = (*sink)->commit();
      const std::vector<Request> rs = server.requests();
      CHECK(std::count_if(rs.begin(), rs.end(), is_commit) == 2);
      if (other_writer) {
        // The object that exists is not the one this commit makes: the refusal stands.
        CHECK(st.code() == StatusCode::kAlreadyExists);
      } else {
        CHECK_MESSAGE(st.ok(), st.to_string());
        // Nothing aborted: the upload was completed.
        CHECK(std::none_of(rs.begin(), rs.end(),
                           [](const Request& r) { return r.method == "DELETE"; }));
      }
    }
  }
}
