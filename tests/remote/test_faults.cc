// Loads through the fault-injecting proxy: dropped connections, 503/429, truncated bodies,
// stalls and mis-served suffix ranges. Transient faults must be retried to a bit-exact
// result; persistent ones must fail cleanly within the deadline, naming the URL.
#include "remote_test_util.h"

using namespace jtree;
using namespace jtree::remote_testing;

namespace {

// Loads the tree through the proxy with `faults`; returns the reader's counters.
remote::RemoteSourceStats load_through(const std::string& faults, const TestTree& t,
                                       const std::string& name, RemoteOptions o = fast_options()) {
  OpenOptions oo;
  oo.remote = o;
  auto r = Reader::open(env("JTREE_TEST_PROXY") + "/" + faults + "/" + name, oo);
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  check_tree(**r, t);
  return details(*(*r)->source());
}

}  // namespace

TEST_CASE("faults: every transient kind is retried to a bit-exact load") {
  JTREE_NEED_SERVER("JTREE_TEST_PROXY");
  const TestTree t = TestTree::make(4, 200000, 101);
  const std::string name = serve_tree(t, "faults.jtree");
  // Each request fails twice before it succeeds: 2 retries per request.
  for (const char* f : {"e503=2", "e429=2", "drop=2", "trunc=2", "reset=2", "stall=1"}) {
    CAPTURE(f);
    const auto d = load_through(f, t, name);
    // Open (2 requests) and 4 leaves: 6 requests, each retried.
    const uint64_t per_request = std::string(f) == "stall=1" ? 1 : 2;
    if (std::string(f) == "reset=2") {
      // libcurl itself retries once a reused connection that dies before any answer; such an
      // attempt does not reach jtree.
      CHECK(d.io.retries >= 6);
      CHECK(d.io.retries <= 6 * per_request);
    } else {
      CHECK(d.io.retries == 6 * per_request);
      CHECK(d.io.read_requests == 6 * (per_request + 1));
    }
  }
}

TEST_CASE("faults: a random mix of faults on 30% of attempts") {
  JTREE_NEED_SERVER("JTREE_TEST_PROXY");
  const TestTree t = TestTree::make(16, 100000, 111);
  WriteOptions wo;
  wo.target_chunk_bytes = 32 << 10;  // many chunks, many requests
  const std::string name = serve_tree(t, "faults_mix.jtree", wo);
  RemoteOptions o = fast_options();
  o.http.max_retries = 20;
  ReadOptions ro;
  ro.coalesce_gap = 0;
  ro.max_fetch_bytes = 32 << 10;
  OpenOptions oo;
  oo.remote = o;
  auto r = Reader::open(env("JTREE_TEST_PROXY") + "/rand=30/" + name, oo);
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  check_tree(**r, t, ro);
  const auto d = details(*(*r)->source());
  MESSAGE("requests " << d.io.read_requests << ", retries " << d.io.retries);
  CHECK(d.io.retries > 10);
}

TEST_CASE("faults: persistent 503s fail within the deadline, naming the URL and the cause") {
  JTREE_NEED_SERVER("JTREE_TEST_PROXY");
  const TestTree t = TestTree::make(1, 1000, 121);
  const std::string name = serve_tree(t, "faults_503.jtree");
  RemoteOptions o = fast_options();
  o.http.max_retries = 1000;
  o.http.deadline_seconds = 2;
  OpenOptions oo;
  oo.remote = o;
  const std::string url = env("JTREE_TEST_PROXY") + "/always503/" + name;
  const auto start = std::chrono::steady_clock::now();
  auto r = Reader::open(url, oo);
  const double took = seconds_since(start);
  REQUIRE_FALSE(r.ok());
  MESSAGE(r.status().to_string());
  CHECK(r.status().is_io_error());
  CHECK(r.status().message().find(url) != std::string::npos);
  CHECK(r.status().message().find("503") != std::string::npos);
  CHECK(r.status().message().find("gave up after") != std::string::npos);
  CHECK(took < 2 + 1);
  // With few retries allowed, it stops after them.
  o.http.max_retries = 2;
  o.http.deadline_seconds = 30;
  oo.remote = o;
  auto r2 = Reader::open(url, oo);
  REQUIRE_FALSE(r2.ok());
  CHECK(r2.status().message().find("after 3 attempts") != std::string::npos);
}

TEST_CASE("faults: a stalled server is abandoned, within the deadline") {
  JTREE_NEED_SERVER("JTREE_TEST_PROXY");
  const TestTree t = TestTree::make(1, 100000, 131);
  const std::string name = serve_tree(t, "faults_stall.jtree");
  RemoteOptions o = fast_options();
  o.http.stall_timeout_seconds = 1;
  o.http.deadline_seconds = 3.5;
  OpenOptions oo;
  oo.remote = o;
  const auto start = std::chrono::steady_clock::now();
  auto r = Reader::open(env("JTREE_TEST_PROXY") + "/alwaysstall/" + name, oo);
  const double took = seconds_since(start);
  REQUIRE_FALSE(r.ok());
  MESSAGE(r.status().to_string());
  CHECK(r.status().message().find("gave up after") != std::string::npos);
  CHECK(took < 3.5 + 1.5);
}

TEST_CASE("faults: dropped connections on every attempt fail cleanly too") {
  JTREE_NEED_SERVER("JTREE_TEST_PROXY");
  const TestTree t = TestTree::make(1, 100000, 141);
  const std::string name = serve_tree(t, "faults_drop.jtree");
  RemoteOptions o = fast_options();
  o.http.max_retries = 3;
  OpenOptions oo;
  oo.remote = o;
  auto r = Reader::open(env("JTREE_TEST_PROXY") + "/alwaysdrop/" + name, oo);
  REQUIRE_FALSE(r.ok());
  MESSAGE(r.status().to_string());
  CHECK(r.status().is_io_error());
  CHECK(r.status().message().find("after 4 attempts") != std::string::npos);
}

TEST_CASE("faults: a server that mis-serves suffix ranges costs one more request") {
  JTREE_NEED_SERVER("JTREE_TEST_PROXY");
  // Larger than the 256 KiB tail read: the wrong answer (the first bytes) does not contain
  // the tail.
  const TestTree t = TestTree::make(2, 300000, 151);
  const std::string name = serve_tree(t, "faults_suffix.jtree");
  const auto d = load_through("badsuffix", t, name);
  CHECK(d.suffix_fallbacks == 1);
  CHECK(d.io.retries == 0);
}
