// Loads into device memory from remote files (nginx over HTTP, Ceph RGW over S3), through the
// host-memory stand-in copy engine (lib/src/cuda/host_copy_engine.h): the same staging
// pipeline a GPU load runs, its reads being ranged GETs. O_DIRECT does not apply to them: Auto
// reads everything through Reader::read_many and says why; On refuses, naming the URL.
#include "cuda/host_copy_engine.h"
#include "jtree/device.h"
#include "remote_test_util.h"

using namespace jtree;
using namespace jtree::remote_testing;

namespace {

struct Case {
  const char* what;
  Codec codec;
};

// Loads every leaf of `t` (whole) and the middle of the first one from `url` into host
// "device" memory through 4 staging buffers of 256 KiB, and checks the bytes.
void load_and_check(const std::string& url, const OpenOptions& oo, const TestTree& t) {
  auto r = Reader::open(url, oo);
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  std::vector<DeviceRequest> reqs;
  std::vector<std::vector<std::byte>> dst, want;
  for (size_t i = 0; i < t.data.size(); ++i) {
    auto leaf = (*r)->find_leaf("w" + std::to_string(i));
    REQUIRE(leaf.ok());
    want.push_back(t.data[i]);
    dst.emplace_back(t.data[i].size());
    reqs.push_back({*leaf, std::nullopt, dst.back().data(), dst.back().size()});
  }
  const uint64_t n = t.data[0].size();
  const Box middle{{n / 3}, {2 * n / 3 + 1}};
  want.emplace_back(t.data[0].begin() + static_cast<std::ptrdiff_t>(n / 3),
                    t.data[0].begin() + static_cast<std::ptrdiff_t>(2 * n / 3 + 1));
  dst.emplace_back(want.back().size());
  reqs.push_back({*(*r)->find_leaf("w0"), middle, dst.back().data(), dst.back().size()});
  for (size_t i = 0; i < reqs.size(); ++i) reqs[i].dst = dst[i].data();  // (after the moves)

  staging::HostCopyEngine engine;
  DeviceOptions o;
  o.staging_bytes = 1 << 20;
  o.staging_buffers = 4;
  DeviceStats stats;
  o.stats = &stats;
  Status st = read_many_staged(**r, reqs, engine, o);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  for (size_t i = 0; i < reqs.size(); ++i) {
    CAPTURE(i);
    CHECK(dst[i] == want[i]);
  }
  uint64_t total = 0;
  for (const auto& d : dst) total += d.size();
  CHECK(stats.direct_bytes == 0);
  CHECK(stats.buffered_bytes == total);
  CHECK(stats.direct_io_note.find("not a local file") != std::string::npos);
  const auto es = engine.stats();
  CHECK(es.bytes_copied == total);
  CHECK(es.misuses == 0);
  CHECK(es.peak_pinned_bytes <= o.staging_bytes);

  // direct_io On cannot be honoured for a remote file: refused before anything is read.
  o.direct_io = DirectIo::kOn;
  st = read_many_staged(**r, reqs, engine, o);
  CHECK(st.is_not_supported());
  CHECK(st.message().find(url) != std::string::npos);
  CHECK(st.message().find("not a local file") != std::string::npos);
}

}  // namespace

TEST_CASE("device: a load from HTTP through the staging pipeline is bit-exact") {
  JTREE_NEED_SERVER("JTREE_TEST_HTTP");
  const TestTree t = TestTree::make(5, 700000, 31);
  for (const Case c : {Case{"raw", Codec::kRaw}, Case{"zstd", Codec::kZstd}}) {
    CAPTURE(c.what);
    WriteOptions wo;
    wo.codec = c.codec;
    wo.target_chunk_bytes = 64 << 10;  // many chunks per staging buffer, and across buffers
    const std::string name = serve_tree(t, std::string("device_") + c.what + ".jtree", wo);
    load_and_check(env("JTREE_TEST_HTTP") + "/" + name, open_with(fast_options()), t);
  }
}

TEST_CASE("device: a load from S3 through the staging pipeline is bit-exact") {
  JTREE_NEED_SERVER("JTREE_TEST_S3_ENDPOINT");
  const TestTree t = TestTree::make(4, 600000, 41);
  const std::string bucket = unique_bucket("jtree-device");
  make_bucket(bucket);
  WriteOptions wo;
  wo.codec = Codec::kRaw;
  wo.target_chunk_bytes = 96 << 10;
  wo.remote = s3_options();
  const std::string url = "s3://" + bucket + "/model.jtree";
  auto saved = save(t.tree(), url, wo);
  REQUIRE_MESSAGE(saved.ok(), saved.status().to_string());
  load_and_check(url, open_with(s3_options()), t);
}
