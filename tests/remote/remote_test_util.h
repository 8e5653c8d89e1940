// Helpers of the tests against real servers (started by tests/remote/servers.sh; their
// addresses come in JTREE_TEST_* environment variables). Without them a test says so and
// passes, so that the whole C++ suite also runs where no server was started.
#pragma once

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "io/remote/remote_source.h"
#include "io/remote/s3_client.h"
#include "jtree/jtree.h"

namespace jtree::remote_testing {

/// The variable's value, or "" when unset.
inline std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

/// Skips the rest of a test case, loudly, when `var` is not set; fails it instead under
/// JTREE_TEST_REQUIRE_ALL=1 (scripts/test_remote.sh sets it), so that CI never passes by
/// skipping.
#define JTREE_NEED_SERVER(var)                                                               \
  do {                                                                                       \
    if (::jtree::remote_testing::env(var).empty()) {                                         \
      if (::jtree::remote_testing::env("JTREE_TEST_REQUIRE_ALL") == "1") {                   \
        FAIL("!!! " var " is not set, and JTREE_TEST_REQUIRE_ALL=1 forbids skipping");       \
      }                                                                                      \
      MESSAGE("!!! SKIPPED: " var " is not set (scripts/test_remote.sh starts the servers)"); \
      return;                                                                                \
    }                                                                                        \
  } while (0)

/// Options for tests: quick retries, short deadlines, stalls noticed in a second.
inline RemoteOptions fast_options() {
  RemoteOptions o;
  o.http.max_retries = 8;
  o.http.backoff_initial_seconds = 0.01;
  o.http.backoff_max_seconds = 0.2;
  o.http.deadline_seconds = 30;
  o.http.stall_timeout_seconds = 1;
  o.http.connect_timeout_seconds = 5;
  o.http.ca_file = env("JTREE_TEST_CA");
  return o;
}

/// OpenOptions with these remote settings.
inline OpenOptions open_with(const RemoteOptions& o) {
  OpenOptions oo;
  oo.remote = o;
  return oo;
}

/// Deterministic bytes.
inline std::vector<std::byte> pattern_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t x = g();
    for (size_t k = 0; k < 8 && i + k < n; ++k) v[i + k] = static_cast<std::byte>(x >> (8 * k));
  }
  return v;
}

/// A test tree: `leaves` uint8 arrays of `bytes` each ("w0", "w1"...), plus a string.
struct TestTree {
  std::vector<std::vector<std::byte>> data;
  Tree tree() const {
    TreeBuilder b;
    b.dict();
    for (size_t i = 0; i < data.size(); ++i) {
      b.key("w" + std::to_string(i)).array(DType::kUInt8, {data[i].size()}, ArrayView{data[i].data()});
    }
    b.key("note").str("remote test tree");
    b.end();
    return *std::move(b).finish();
  }
  static TestTree make(int leaves, size_t bytes, uint64_t seed) {
    TestTree t;
    for (int i = 0; i < leaves; ++i) t.data.push_back(pattern_bytes(bytes, seed + i));
    return t;
  }
};

/// Reads every leaf of `t` through `r` and checks them bit for bit.
inline void check_tree(const Reader& r, const TestTree& t, const ReadOptions& ro = {}) {
  for (size_t i = 0; i < t.data.size(); ++i) {
    auto leaf = r.find_leaf("w" + std::to_string(i));
    REQUIRE(leaf.ok());
    std::vector<std::byte> got(t.data[i].size());
    Status st = r.read(*leaf, got, ro);
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    CHECK(got == t.data[i]);
  }
}

/// A number unique to this run of the tests: names built with it never meet the state a
/// previous run left in the servers (the fault proxy counts attempts per path).
inline uint64_t run_id() {
  static const uint64_t id = std::random_device{}() % 1000000;
  return id;
}

/// Saves `t` under the nginx document root; returns its name there (`stem` made unique to
/// this run).
inline std::string serve_tree(const TestTree& t, const std::string& stem,
                              const WriteOptions& wo = {}) {
  const std::string name = std::to_string(run_id()) + "-" + stem;
  const std::string path = env("JTREE_TEST_WWW") + "/" + name;
  auto st = save(t.tree(), path, wo);
  REQUIRE_MESSAGE(st.ok(), st.status().to_string());
  return name;
}

/// The detailed counters of a remote Source.
inline remote::RemoteSourceStats details(const Source& s) {
  auto* rs = dynamic_cast<const remote::RemoteSource*>(&s);
  REQUIRE(rs != nullptr);
  return rs->detailed_stats();
}

inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// ---- S3 ------------------------------------------------------------------------------------

/// Options for the test S3 server (path-style endpoint, test credentials).
inline RemoteOptions s3_options() {
  RemoteOptions o = fast_options();
  o.s3.endpoint = env("JTREE_TEST_S3_ENDPOINT");
  o.s3.access_key_id = env("JTREE_TEST_S3_KEY");
  o.s3.secret_access_key = env("JTREE_TEST_S3_SECRET");
  o.s3.region = "us-east-1";
  o.s3.part_size = 5u << 20;
  return o;
}

/// Creates a bucket (PUT /bucket); an existing one is fine.
inline void make_bucket(const std::string& bucket, const RemoteOptions& o = s3_options()) {
  auto config = remote::resolve_s3_config(o, remote::Environment::process());
  REQUIRE(config.ok());
  remote::Transport transport;
  remote::CallStats stats;
  remote::CallSpec spec;
  spec.name = "s3://" + bucket;
  spec.what = "CreateBucket";
  spec.transport = &transport;
  spec.options = &o.http;
  spec.stats = &stats;
  spec.build = [&](remote::HttpRequest& req) {
    req.method = "PUT";
    remote::prepare_s3_request(*config, bucket, "", {}, "", req, std::time(nullptr));
    return Status::success();
  };
  remote::BufferHandler h;
  auto head = remote::call(spec, h);
  // 409 BucketAlreadyOwnedByYou (or Exists) is fine.
  if (!head.ok()) REQUIRE_MESSAGE(head.status().message().find("409") != std::string::npos,
                                  head.status().to_string());
}

/// A bucket name unique to this run of the tests.
inline std::string unique_bucket(const std::string& stem) {
  return stem + "-" + std::to_string(run_id());
}

}  // namespace jtree::remote_testing
