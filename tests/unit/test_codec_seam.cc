// A codec added from outside the library, as a new codec would be (rle_test_codec.h: one class
// and its registration): saved, opened, read, sliced and verified through the public API with
// no other change to the library; and an id nobody registered is still refused, on save and
// when a header is read, with the same messages as before the seam.
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "format/header_codec.h"
#include "rle_test_codec.h"
#include "test_util.h"

using namespace jtree;
using namespace jtree::testing;

namespace {

// int32 values below 256 (Shuffle: three planes of zeros, which run-length code well).
std::vector<std::byte> small_ints(size_t n) {
  std::vector<std::byte> b(n * 4);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t v = static_cast<uint32_t>((i * 37) % 251);
    std::memcpy(b.data() + 4 * i, &v, 4);
  }
  return b;
}

}  // namespace

TEST_CASE("a registered codec: save, open, read, slice and verify through the library") {
  const RleTestCodec& rle = rle_test_codec();
  TempDir dir;
  const std::vector<std::byte> data = small_ints(64 * 100);
  TreeBuilder b;
  b.dict();
  LeafOptions lo;
  lo.codec = kRleTestCodec;
  lo.filter = Filter::kShuffle;
  lo.chunk_shape = {16, 100};
  b.key("w").array(DType::kInt32, {64, 100}, ArrayView{data.data()}, lo);
  b.end();
  auto tree = std::move(b).finish();
  REQUIRE(tree.ok());
  const size_t before = rle.encoded();
  auto saved = save(std::move(*tree), dir.file("rle.jtree"));
  REQUIRE_MESSAGE(saved.ok(), saved.status().to_string());
  CHECK(rle.encoded() - before == 4 * 4);  // 4 chunks of 4 planes each

  auto r = Reader::open(dir.file("rle.jtree"));
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  const Leaf& leaf = (*r)->tree().leaves[0];
  CHECK(leaf.codec == kRleTestCodec);
  CHECK(codec_name(leaf.codec) == "rle-test");
  CHECK(leaf.filter == Filter::kShuffle);
  for (uint64_t c = 0; c < 4; ++c) CHECK((*r)->chunk(c).encoding == ChunkEncoding::kPlanes);

  std::vector<std::byte> back(data.size());
  Status st = (*r)->read(0, back);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  CHECK(back == data);
  // A box across two chunks.
  std::vector<std::byte> part(10 * 5 * 4);
  st = (*r)->read_box(0, Box{{12, 3}, {22, 8}}, part);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  for (size_t i = 0; i < 10; ++i) {
    CHECK(std::memcmp(part.data() + i * 20, data.data() + ((12 + i) * 100 + 3) * 4, 20) == 0);
  }
  auto report = (*r)->verify();
  REQUIRE(report.ok());
  CHECK(report->ok());
  CHECK(report->chunks_checked == 4);
}

TEST_CASE("codec ids nobody registered: refused on save and in a header, as before") {
  rle_test_codec();
  TempDir dir;
  const std::vector<std::byte> data = small_ints(20000);
  for (const Codec unknown : {static_cast<Codec>(7), static_cast<Codec>(201)}) {
    CAPTURE(static_cast<int>(unknown));
    TreeBuilder b;
    b.dict();
    LeafOptions lo;
    lo.codec = unknown;
    b.key("w").array(DType::kInt32, {20000}, ArrayView{data.data()}, lo);
    b.end();
    auto tree = std::move(b).finish();
    REQUIRE(tree.ok());
    auto saved = save(std::move(*tree), dir.file("unknown.jtree"));
    CHECK(saved.status().code() == StatusCode::kInvalidArgument);
    CHECK(saved.status().to_string().find("unknown codec " +
                                         std::to_string(static_cast<int>(unknown))) !=
          std::string::npos);
    CHECK(!std::filesystem::exists(dir.file("unknown.jtree")));
  }

  // A header naming the registered codec decodes; the same header naming an unregistered id
  // is Corruption "leaf 0: unknown codec N".
  TreeBuilder b;
  b.dict();
  LeafOptions lo;
  lo.codec = kRleTestCodec;
  lo.filter = Filter::kShuffle;
  b.key("w").array(DType::kInt32, {20000}, ArrayView{data.data()}, lo);
  b.end();
  auto tree = std::move(b).finish();
  REQUIRE(tree.ok());
  REQUIRE(save(std::move(*tree), dir.file("rle.jtree")).ok());
  auto r = Reader::open(dir.file("rle.jtree"));
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  Tree t = (*r)->tree();
  REQUIRE(t.leaves[0].storage == Storage::kChunked);
  CHECK(t.leaves[0].codec == kRleTestCodec);
  auto bytes = format::encode_header(t, "test");
  REQUIRE(bytes.ok());
  CHECK(format::decode_header(*bytes, Limits{}, nullptr).ok());
  for (const int id : {2, 7, 201, 255}) {
    CAPTURE(id);
    t.leaves[0].codec = static_cast<Codec>(id);
    bytes = format::encode_header(t, "test");
    REQUIRE(bytes.ok());
    auto decoded = format::decode_header(*bytes, Limits{}, nullptr);
    CHECK(decoded.status().code() == StatusCode::kCorruption);
    CHECK(decoded.status().to_string().find("leaf 0: unknown codec " + std::to_string(id)) !=
          std::string::npos);
  }
}
