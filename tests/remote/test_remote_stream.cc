// A remote load of raw chunks that go whole into place is read as one stream cut into requests
// of the fetch size, chunk ends ignored (issue 47): a whole-file load costs about its size over
// the fetch size in requests, not one more for each leaf's short last chunk; a chunk cut across
// two requests is still verified, a damaged one named by leaf and chunk.
#include <algorithm>
#include <cstdio>

#include "remote_test_util.h"

using namespace jtree;
using namespace jtree::remote_testing;

namespace {

constexpr size_t kLeaves = 12;
constexpr size_t kChunk = 64 * 1024;
constexpr size_t kLeafBytes = 5 * kChunk / 2;  // two whole chunks and a half one
constexpr uint64_t kFetch = kChunk;  // (as a remote load by default: 4 MiB chunks and fetches)

struct Leaves {
  std::vector<std::vector<std::byte>> data;
  Leaves() {
    for (size_t i = 0; i < kLeaves; ++i) data.push_back(pattern_bytes(kLeafBytes, 300 + i));
  }
  Tree tree() const {
    TreeBuilder b;
    b.dict();
    for (size_t i = 0; i < kLeaves; ++i) {
      b.key("w" + std::to_string(10 + i))
          .array(DType::kUInt8, {kLeafBytes}, ArrayView{data[i].data()});
    }
    b.end();
    return *std::move(b).finish();
  }
};

std::string saved(const Leaves& t, const std::string& stem) {
  WriteOptions wo;
  wo.codec = Codec::kRaw;
  wo.target_chunk_bytes = kChunk;
  const std::string file = std::to_string(run_id()) + "-" + stem + ".jtree";
  auto st = save(t.tree(), env("JTREE_TEST_WWW") + "/" + file, wo);
  REQUIRE_MESSAGE(st.ok(), st.status().to_string());
  REQUIRE(st->chunks == 3 * kLeaves);
  return file;
}

OpenOptions small_fetches() {
  RemoteOptions o = fast_options();
  o.http.fetch_bytes = kFetch;
  return open_with(o);
}

// Reads every leaf in one read_many; the requests it took.
uint64_t load_all(const Reader& r, std::vector<std::vector<std::byte>>& got, Status& st,
                  const ReadOptions& ro = {}) {
  got.assign(kLeaves, std::vector<std::byte>(kLeafBytes));
  std::vector<ReadRequest> reqs;
  for (size_t i = 0; i < kLeaves; ++i) {
    reqs.push_back({*r.find_leaf("w" + std::to_string(10 + i)), std::nullopt, got[i]});
  }
  const uint64_t before = r.io_stats().read_requests;
  st = r.read_many(reqs, ro);
  return r.io_stats().read_requests - before;
}

}  // namespace

TEST_CASE("remote whole raw load: about its size over the fetch size in requests") {
  JTREE_NEED_SERVER("JTREE_TEST_HTTP");
  const Leaves t;
  const std::string file = saved(t, "stream");
  auto r = Reader::open(env("JTREE_TEST_HTTP") + "/" + file, small_fetches());
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  std::vector<std::vector<std::byte>> got;
  Status st;
  const uint64_t requests = load_all(**r, got, st);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  CHECK(got == t.data);
  // The chunks lie back to back: the stream's size over the fetch size, plus one for a gap
  // that would end a request early. Whole chunks per request would take 3 per leaf (a leaf's
  // half chunk and the next leaf's first do not fit one fetch together): 36.
  const uint64_t bound = (kLeaves * kLeafBytes + kFetch - 1) / kFetch + 1;
  MESSAGE("whole load: " << requests << " requests (bound " << bound << ")");
  CHECK(requests <= bound);
  // Without verification: the same requests, the same bytes.
  ReadOptions unverified;
  unverified.verify_checksums = false;
  CHECK(load_all(**r, got, st, unverified) <= bound);
  REQUIRE(st.ok());
  CHECK(got == t.data);
}

TEST_CASE("remote whole raw load: a damaged chunk cut across requests is named") {
  JTREE_NEED_SERVER("JTREE_TEST_HTTP");
  const Leaves t;
  const std::string file = saved(t, "stream-damaged");
  // The chunks lie back to back (in the writer's order): the stream's requests are cut at
  // every kFetch bytes from the first. Damage the last byte of a chunk that spans a cut (it
  // lands in the second of its two requests).
  const std::string path = env("JTREE_TEST_WWW") + "/" + file;
  uint32_t hit_leaf = 0;
  uint64_t hit_local = 0;
  {
    auto local = Reader::open(path);
    REQUIRE(local.ok());
    const Reader& lr = **local;
    // Leaf i is "w{10 + i}"; its chunks' first global number.
    std::vector<uint64_t> first(kLeaves);
    std::vector<std::pair<uint64_t, uint64_t>> by_offset;  // (offset, i * 3 + local)
    for (size_t i = 0; i < kLeaves; ++i) {
      first[i] = lr.leaf(*lr.find_leaf("w" + std::to_string(10 + i))).first_chunk;
      for (uint64_t c = 0; c < 3; ++c) {
        by_offset.emplace_back(lr.chunk(first[i] + c).file_offset, i * 3 + c);
      }
    }
    std::sort(by_offset.begin(), by_offset.end());
    const uint64_t base = by_offset[0].first;
    uint64_t end = base;
    bool found = false;
    for (const auto& [offset, which] : by_offset) {
      const ChunkInfo c = lr.chunk(first[which / 3] + which % 3);
      REQUIRE(offset == end);
      end = offset + c.stored_size;
      if (!found && (offset - base) / kFetch != (end - 1 - base) / kFetch) {
        found = true;
        hit_leaf = static_cast<uint32_t>(which / 3);
        hit_local = which % 3;
      }
    }
    REQUIRE(found);
    const ChunkInfo c = lr.chunk(first[hit_leaf] + hit_local);
    std::FILE* f = std::fopen(path.c_str(), "r+b");
    REQUIRE(f != nullptr);
    std::fseek(f, static_cast<long>(c.file_offset + c.stored_size - 1), SEEK_SET);
    std::fputc(0x5a ^ static_cast<int>(t.data[hit_leaf][hit_local * kChunk + c.stored_size - 1]), f);
    std::fclose(f);
  }
  auto r = Reader::open(env("JTREE_TEST_HTTP") + "/" + file, small_fetches());
  REQUIRE(r.ok());
  std::vector<std::vector<std::byte>> got;
  Status st;
  load_all(**r, got, st);
  REQUIRE_FALSE(st.ok());
  CHECK(st.is_corruption());
  const std::string where =
      "leaf w" + std::to_string(10 + hit_leaf) + ": chunk " + std::to_string(hit_local);
  CHECK_MESSAGE(st.to_string().find(where) != std::string::npos, st.to_string() << " / " << where);
  // Unverified, the damaged byte comes back as stored; the other leaves are intact.
  ReadOptions unverified;
  unverified.verify_checksums = false;
  load_all(**r, got, st, unverified);
  REQUIRE(st.ok());
  for (size_t i = 0; i < kLeaves; ++i) CHECK((got[i] == t.data[i]) == (i != hit_leaf));
}
