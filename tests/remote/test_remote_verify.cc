// Reader::verify of a remote file fetches chunks as a load does (coalesced ranges, in
// parallel), not one request per chunk (issue 19): its request count is within a small factor
// of a full load's.
#include "remote_test_util.h"

using namespace jtree;
using namespace jtree::remote_testing;

namespace {

// 500 raw chunks of 4 KiB (the 1000-byte test leaves would be inline: chunks of their own
// size are asked for).
struct ManyChunks {
  std::vector<std::byte> data = pattern_bytes(500 * 4096, 91);
  Tree tree() const {
    TreeBuilder b;
    b.dict();
    b.key("w").array(DType::kUInt8, {data.size()}, ArrayView{data.data()});
    b.end();
    return *std::move(b).finish();
  }
};

struct Counts {
  uint64_t load = 0, verify = 0;
};

Counts count_requests(const std::string& url, const ManyChunks& t, const OpenOptions& oo) {
  Counts c;
  {
    auto r = Reader::open(url, oo);
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    const uint64_t opened = (*r)->io_stats().read_requests;
    std::vector<std::byte> got(t.data.size());
    REQUIRE((*r)->read(*(*r)->find_leaf("w"), got).ok());
    CHECK(got == t.data);
    c.load = (*r)->io_stats().read_requests - opened;
  }
  auto r = Reader::open(url, oo);
  REQUIRE(r.ok());
  const uint64_t opened = (*r)->io_stats().read_requests;
  auto rep = (*r)->verify();
  REQUIRE_MESSAGE(rep.ok(), rep.status().to_string());
  CHECK(rep->ok());
  CHECK(rep->chunks_checked == 500);
  c.verify = (*r)->io_stats().read_requests - opened;
  MESSAGE(url << ": full load " << c.load << " requests, verify " << c.verify);
  return c;
}

}  // namespace

TEST_CASE("remote verify: about as many requests as a full load (HTTP)") {
  JTREE_NEED_SERVER("JTREE_TEST_HTTP");
  const ManyChunks t;
  WriteOptions wo;
  wo.codec = Codec::kRaw;
  wo.target_chunk_bytes = 4096;
  const std::string file = std::to_string(run_id()) + "-verify-500.jtree";
  auto st = save(t.tree(), env("JTREE_TEST_WWW") + "/" + file, wo);
  REQUIRE_MESSAGE(st.ok(), st.status().to_string());
  REQUIRE(st->chunks == 500);
  const Counts c = count_requests(env("JTREE_TEST_HTTP") + "/" + file, t, open_with(fast_options()));
  CHECK(c.load >= 1);
  CHECK(c.verify <= 2 * c.load + 2);
  // A damaged chunk is still found, named by leaf and chunk.
  {
    std::FILE* f = std::fopen((env("JTREE_TEST_WWW") + "/" + file).c_str(), "r+b");
    REQUIRE(f != nullptr);
    auto r = Reader::open(env("JTREE_TEST_WWW") + "/" + file);
    REQUIRE(r.ok());
    const uint64_t at = (*r)->chunk(137).file_offset + 5;
    std::fseek(f, static_cast<long>(at), SEEK_SET);
    std::fputc(0x5a ^ static_cast<int>(t.data[137 * 4096 + 5]), f);
    std::fclose(f);
  }
  auto r = Reader::open(env("JTREE_TEST_HTTP") + "/" + file, open_with(fast_options()));
  REQUIRE(r.ok());
  auto rep = (*r)->verify();
  REQUIRE(rep.ok());
  REQUIRE(rep->problems.size() == 1);
  CHECK(rep->problems[0].where == "leaf w chunk 137");
  CHECK(rep->problems[0].status.is_corruption());
}

TEST_CASE("remote verify: about as many requests as a full load (S3)") {
  JTREE_NEED_SERVER("JTREE_TEST_S3_ENDPOINT");
  const ManyChunks t;
  const std::string b = unique_bucket("jtree-verify");
  make_bucket(b);
  WriteOptions wo;
  wo.codec = Codec::kRaw;
  wo.target_chunk_bytes = 4096;
  wo.remote = s3_options();
  const std::string url = "s3://" + b + "/verify-500.jtree";
  auto st = save(t.tree(), url, wo);
  REQUIRE_MESSAGE(st.ok(), st.status().to_string());
  REQUIRE(st->chunks == 500);
  const Counts c = count_requests(url, t, open_with(s3_options()));
  CHECK(c.verify <= 2 * c.load + 2);
}
