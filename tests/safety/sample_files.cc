// The sample files of sample_files.h. Small on purpose: the gauntlet visits every metadata
// byte of each, so a few hundred metadata bytes and a dozen chunks per file keep it quick.
#include "sample_files.h"

#include <doctest/doctest.h>

#include "jtree/jtree.h"
#include "test_util.h"

namespace jtree::safety {
namespace {

using jtree::testing::random_array;
using jtree::testing::read_file;
using jtree::testing::TempDir;

std::vector<std::byte> save_to_bytes(Tree tree, const WriteOptions& wo) {
  TempDir dir;
  const std::string path = dir.file("f.jtree");
  auto st = save(std::move(tree), path, wo);
  REQUIRE_MESSAGE(st.ok(), st.status().to_string());
  return read_file(path);
}

Tree finish(TreeBuilder& b) {
  auto t = std::move(b).finish();
  REQUIRE_MESSAGE(t.ok(), t.status().to_string());
  return std::move(*t);
}

// Several dtypes, each cut into 2-3 chunks, plus an inline array and scalars.
SampleFile dtypes(const char* name, Codec codec) {
  const auto f32 = random_array(DType::kFloat32, 24 * 16, 1);
  const auto bf16 = random_array(DType::kBFloat16, 300, 2);
  const auto i16 = random_array(DType::kInt16, 200, 3);
  const auto u4 = random_array(DType::kUInt4, 301, 4);  // odd: a half-used last byte
  const auto b8 = random_array(DType::kBool, 500, 5);
  const auto c64 = random_array(DType::kComplex64, 20, 6);
  const auto small = random_array(DType::kInt32, 5, 7);
  const std::vector<std::byte> zeros(1000);  // compresses well: zstd frames, not raw planes
  TreeBuilder b;
  b.dict();
  b.key("f32").array(DType::kFloat32, {24, 16}, ArrayView{f32.data()});
  b.key("bf16").array(DType::kBFloat16, {300}, ArrayView{bf16.data()});
  b.key("i16").array(DType::kInt16, {200}, ArrayView{i16.data()});
  b.key("u4").array(DType::kUInt4, {301}, ArrayView{u4.data()});
  b.key("bool").array(DType::kBool, {500}, ArrayView{b8.data()});
  b.key("c64").array(DType::kComplex64, {20}, ArrayView{c64.data()});
  b.key("zeros").array(DType::kUInt8, {1000}, ArrayView{zeros.data()});
  b.key("small").array(DType::kInt32, {5}, ArrayView{small.data()});
  b.key("step").int_value(1234);
  b.key("lr").float_value(0.5);
  b.key("note").str("hello");
  b.end();
  WriteOptions wo;
  wo.codec = codec;
  wo.target_chunk_bytes = 512;
  wo.inline_threshold = 64;
  wo.min_gain = 0;  // compress whatever shrinks at all: more zstd frames to damage
  return {name, save_to_bytes(finish(b), wo), {}};
}

// No chunk at all: every payload in the header; an index with no chunks and no segment.
SampleFile all_inline() {
  const auto f16 = random_array(DType::kFloat16, 10, 8);
  const auto i4 = random_array(DType::kInt4, 7, 9);
  TreeBuilder b;
  b.list();
  b.array(DType::kFloat16, {2, 5}, ArrayView{f16.data()});
  b.array(DType::kInt4, {7}, ArrayView{i4.data()});
  b.array(DType::kFloat32, {0, 3}, ArrayView{f16.data()});  // empty
  b.bytes(std::string("\x00\x01\x02", 3));
  b.none();
  b.end();
  return {"inline", save_to_bytes(finish(b), WriteOptions{}), {}};
}

// Every container kind, keys of both kinds, a tied leaf, user metadata.
SampleFile nested() {
  const auto w = random_array(DType::kFloat64, 100, 10);
  const auto e = random_array(DType::kFloat8E4M3FN, 700, 11);
  TreeBuilder b;
  b.ordered_dict();
  b.key("params").dict();
  uint32_t w_id = 0;
  {
    Leaf l;
    l.kind = LeafKind::kArray;
    l.dtype = DType::kFloat64;
    l.shape = {10, 10};
    l.storage = Storage::kChunked;
    auto in = std::make_shared<LeafInput>();
    in->source = ArrayView{w.data()};
    l.input = std::move(in);
    b.key("w").leaf(std::move(l), &w_id);
  }
  b.key("emb").array(DType::kFloat8E4M3FN, {7, 100}, ArrayView{e.data()});
  b.end();
  b.key("tied").tied(w_id);
  b.key("pair").named_tuple("Pair").key("first").bool_value(true).key("second").complex_value(1, -2).end();
  b.key("custom").custom("my.Node", std::string("aux\0data", 8)).int_value(-5).none().end();
  b.key("tuple").tuple().int_value(1).list().float_value(2.5).end().end();
  b.end();
  b.metadata("framework", "test");
  b.metadata("", std::string(3, '\xff'));
  WriteOptions wo;
  wo.target_chunk_bytes = 256;
  wo.level = 3;
  return {"nested", save_to_bytes(finish(b), wo), {}};
}

// Generation 0, then an append that keeps "a", changes "b", replaces "c" and adds "d".
SampleFile appended() {
  TempDir dir;
  const std::string path = dir.file("a.jtree");
  const auto a = random_array(DType::kFloat32, 256, 12);
  const auto c0 = random_array(DType::kUInt8, 600, 13);
  const auto c1 = random_array(DType::kInt64, 90, 14);
  WriteOptions wo;
  wo.target_chunk_bytes = 512;
  wo.inline_threshold = 0;
  {
    TreeBuilder b;
    b.dict();
    b.key("a").array(DType::kFloat32, {256}, ArrayView{a.data()});
    b.key("b").int_value(1);
    b.key("c").array(DType::kUInt8, {600}, ArrayView{c0.data()});
    b.end();
    REQUIRE(save(finish(b), path, wo).ok());
  }
  SampleFile f{"appended", {}, read_file(path)};
  {
    auto r = Reader::open(path);
    REQUIRE(r.ok());
    TreeBuilder b;
    b.dict();
    b.key("a").leaf(Leaf::reused(*(*r)->find_leaf("a")));
    b.key("b").int_value(2);
    b.key("c").array(DType::kInt64, {90}, ArrayView{c1.data()});
    b.key("d").str("new in generation 1");
    b.end();
    auto st = append(path, finish(b), wo);
    REQUIRE_MESSAGE(st.ok(), st.status().to_string());
  }
  f.bytes = read_file(path);
  return f;
}

// Two processes' segments committed into one file: two segments, chunks from both.
SampleFile multihost() {
  TempDir dir;
  const std::string path = dir.file("m.jtree");
  const auto x = random_array(DType::kFloat32, 8 * 16, 15);
  const auto r = random_array(DType::kInt8, 100, 16);
  WriteOptions wo;
  wo.target_chunk_bytes = 128;
  wo.inline_threshold = 0;
  for (uint32_t k = 0; k < 2; ++k) {
    TreeBuilder b;
    b.dict();
    Leaf l;
    l.kind = LeafKind::kArray;
    l.dtype = DType::kFloat32;
    l.shape = {8, 16};
    l.storage = Storage::kChunked;
    auto in = std::make_shared<LeafInput>();
    in->shard_shape = {4, 16};
    in->shards.emplace();
    in->shards->push_back({Box{{4ull * k, 0}, {4ull * k + 4, 16}},
                           ArrayView{x.data() + k * 4 * 16 * 4}});
    l.input = std::move(in);
    b.key("x").leaf(std::move(l));
    Leaf rl;
    rl.kind = LeafKind::kArray;
    rl.dtype = DType::kInt8;
    rl.shape = {100};
    rl.storage = Storage::kChunked;
    auto rin = std::make_shared<LeafInput>();
    if (k == 0) rin->source = ArrayView{r.data()};
    else rin->shards.emplace();
    rl.input = std::move(rin);
    b.key("r").leaf(std::move(rl));
    b.end();
    auto st = save_segment(finish(b), path, {k, 2, 99}, wo);
    REQUIRE_MESSAGE(st.ok(), st.status().to_string());
  }
  auto st = commit_segments(path, 2);
  REQUIRE_MESSAGE(st.ok(), st.status().to_string());
  return {"multihost", read_file(path), {}};
}

}  // namespace

std::vector<SampleFile> sample_files() {
  std::vector<SampleFile> out;
  out.push_back(dtypes("zstd", Codec::kZstd));
  out.push_back(dtypes("raw", Codec::kRaw));
  out.push_back(all_inline());
  out.push_back(nested());
  out.push_back(appended());
  out.push_back(multihost());
  return out;
}

}  // namespace jtree::safety
