// compact: a new file without dead bytes, same tree, same data.
#include <doctest/doctest.h>

#include "test_util.h"

using namespace jtree;
using namespace jtree::testing;

TEST_CASE("compact drops replaced data and keeps the current generation") {
  TempDir dir;
  const std::string path = dir.file("c.jtree");
  auto big = random_bytes(2 << 20, 1);
  auto keep = random_bytes(1 << 20, 2);
  TreeBuilder b;
  b.dict();
  b.key("big").array(DType::kUInt8, {big.size()}, ArrayView{big.data()});
  b.key("keep").array(DType::kUInt8, {keep.size()}, ArrayView{keep.data()});
  b.end();
  REQUIRE(save(std::move(*std::move(b).finish()), path).ok());
  // Replace big by a small array.
  std::vector<std::byte> small(100, std::byte{7});
  {
    auto r = *Reader::open(path);
    TreeBuilder u;
    Leaf reuse = Leaf::reused(*r->find_leaf("keep"));
    u.dict().key("big").array(DType::kUInt8, {100}, ArrayView{small.data()}).key("keep").leaf(reuse).end();
    REQUIRE(append(path, std::move(*std::move(u).finish())).ok());
  }
  const auto before = std::filesystem::file_size(path);
  auto out = compact(path, dir.file("out.jtree"));
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  CHECK(std::filesystem::file_size(path) == before);  // the source is untouched
  CHECK(out->file_size < before - big.size() / 2);
  auto r = *Reader::open(dir.file("out.jtree"));
  CHECK(r->info().generation == 0);
  std::vector<std::byte> got(keep.size());
  REQUIRE(r->read(*r->find_leaf("keep"), got).ok());
  CHECK(got == keep);
  CHECK(*r->read_bytes(*r->find_leaf("big")) == std::string(100, '\7'));
  auto rep = *r->verify();
  CHECK(rep.ok());
  CHECK(rep.dead_bytes < 4096);  // alignment padding only
  // In place.
  REQUIRE(compact(path).ok());
  CHECK(std::filesystem::file_size(path) == out->file_size);
  CHECK((*Reader::open(path))->info().generation == 0);
}

TEST_CASE("compact refuses a damaged file and leaves it as it was") {
  TempDir dir;
  const std::string path = dir.file("d.jtree");
  auto data = random_bytes(1 << 20, 3);
  TreeBuilder b;
  LeafOptions raw;
  raw.codec = Codec::kRaw;
  b.dict().key("x").array(DType::kUInt8, {data.size()}, ArrayView{data.data()}, raw).end();
  REQUIRE(save(std::move(*std::move(b).finish()), path).ok());
  auto bytes = read_file(path);
  bytes[bytes.size() / 2] ^= std::byte{1};  // inside the chunk data
  write_file(path, bytes);
  auto st = compact(path);
  CHECK(st.status().is_corruption());
  CHECK(read_file(path) == bytes);
  CHECK(dir.entries().size() == 1);  // no temporary file left
}
