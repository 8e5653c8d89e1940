// A rank's part of a model (jtree/shard.h): names, rules, boxes, experts, errors.
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "format/chunk_grid.h"
#include "jtree/jtree.h"
#include "test_util.h"

using namespace jtree;
using namespace jtree::testing;

namespace {

struct Named {
  std::string key;  // one dict key (a flat dotted name) or a '/' path of nested dicts
  Shape shape;
};

// Saves a flat dict of float32 leaves (zeros) under `leaves`' keys, plus a str leaf "config".
std::shared_ptr<Reader> save_flat(const TempDir& dir, const std::vector<Named>& leaves) {
  static std::vector<std::vector<std::byte>> keep;
  TreeBuilder b;
  b.dict();
  for (const Named& n : leaves) {
    uint64_t count = 1;
    for (auto d : n.shape) count *= d;
    keep.emplace_back(count * 4);
    b.key(n.key).array(DType::kFloat32, n.shape, ArrayView{keep.back().data()});
  }
  b.key("config").str("{}");
  b.end();
  REQUIRE(save(std::move(*std::move(b).finish()), dir.file("m.jtree")).ok());
  return *Reader::open(dir.file("m.jtree"));
}

// leaf key path -> part, for the checks below.
std::map<std::string, ShardPart> by_path(const Reader& r, const std::vector<ShardPart>& parts) {
  std::map<std::string, ShardPart> out;
  for (const ShardPart& p : parts) out[r.leaf_path(p.leaf)] = p;
  return out;
}

Box box(std::vector<uint64_t> b, std::vector<uint64_t> e) { return Box{std::move(b), std::move(e)}; }

void check_box(const ShardPart& p, const Box& want) {
  REQUIRE(p.box.has_value());
  CHECK(p.box->begin == want.begin);
  CHECK(p.box->end == want.end);
}

const std::vector<Named> kLlama = {
    {"model.embed_tokens.weight", {10, 8}},
    {"model.layers.0.self_attn.q_proj.weight", {8, 8}},
    {"model.layers.0.self_attn.k_proj.weight", {4, 8}},
    {"model.layers.0.self_attn.o_proj.weight", {8, 8}},
    {"model.layers.0.mlp.down_proj.weight", {8, 16}},
    {"model.layers.0.input_layernorm.weight", {8}},
    {"lm_head.weight", {10, 8}},
};

}  // namespace

TEST_CASE("names split at '/' and '.'; patterns match dotted suffixes") {
  CHECK(shard_name({"model", "layers.0.q_proj.weight"}) ==
        std::vector<std::string>{"model", "layers", "0", "q_proj", "weight"});
  const auto name = shard_name({"model.layers.12.self_attn.q_proj.weight"});
  CHECK(split_pattern_matches("q_proj.weight", name));
  CHECK(split_pattern_matches("*_proj.weight", name));
  CHECK(split_pattern_matches("layers.*.self_attn.q_proj.weight", name));
  CHECK_FALSE(split_pattern_matches("q_proj.bias", name));
  CHECK_FALSE(split_pattern_matches("proj.weight", name));  // whole components only
  CHECK_FALSE(split_pattern_matches("a.model.layers.12.self_attn.q_proj.weight", name));
  CHECK(parse_split_kind("row").value() == SplitKind::kRow);
  CHECK(parse_split_kind("diagonal").status().is_invalid_argument());
  CHECK(std::string(split_kind_name(SplitKind::kVocab)) == "vocab");
}

TEST_CASE("the default rules split a Llama state dict by column, row and vocabulary") {
  TempDir dir;
  auto r = save_flat(dir, kLlama);
  auto parts = plan_shard(*r, {1, 2, false, {}});
  REQUIRE(parts.ok());
  CHECK(parts->size() == kLlama.size());  // array leaves only: not "config"
  auto p = by_path(*r, *parts);
  check_box(p["model.embed_tokens.weight"], box({5, 0}, {10, 8}));
  CHECK(p["model.embed_tokens.weight"].kind == SplitKind::kVocab);
  check_box(p["model.layers.0.self_attn.q_proj.weight"], box({4, 0}, {8, 8}));
  check_box(p["model.layers.0.self_attn.k_proj.weight"], box({2, 0}, {4, 8}));
  check_box(p["model.layers.0.self_attn.o_proj.weight"], box({0, 4}, {8, 8}));
  check_box(p["model.layers.0.mlp.down_proj.weight"], box({0, 8}, {8, 16}));
  CHECK(p["model.layers.0.mlp.down_proj.weight"].kind == SplitKind::kRow);
  CHECK_FALSE(p["model.layers.0.input_layernorm.weight"].box.has_value());
  CHECK(p["model.layers.0.input_layernorm.weight"].kind == SplitKind::kReplicated);
  check_box(p["lm_head.weight"], box({5, 0}, {10, 8}));
  for (const auto& [path, part] : p) CHECK(part.load);
}

TEST_CASE("vocabulary rows split in blocks of ceil(n / world); the last ranks' may be empty") {
  TempDir dir;
  auto r = save_flat(dir, {{"wte.weight", {10, 4}}});
  std::vector<Box> got;
  for (uint32_t rank = 0; rank < 4; ++rank) {
    auto parts = plan_shard(*r, {rank, 4, false, {}});
    REQUIRE(parts.ok());
    got.push_back(*(*parts)[0].box);
  }
  CHECK(got[0].begin[0] == 0);
  CHECK(got[0].end[0] == 3);
  CHECK(got[2].begin[0] == 6);
  CHECK(got[3].begin[0] == 9);
  CHECK(got[3].end[0] == 10);
}

TEST_CASE("nested key paths have the same names as flat ones; custom rules come first") {
  TempDir dir;
  static std::vector<std::byte> bytes(8 * 6 * 4);
  TreeBuilder b;
  b.dict().key("params").dict().key("attn").dict();
  b.key("kernel").array(DType::kFloat32, {8, 6}, ArrayView{bytes.data()});
  b.key("out").array(DType::kFloat32, {6, 8}, ArrayView{bytes.data()});
  b.end().end().end();
  REQUIRE(save(std::move(*std::move(b).finish()), dir.file("n.jtree")).ok());
  auto r = *Reader::open(dir.file("n.jtree"));
  // flax kernels are [in, out]: column-parallel splits dim 1, row-parallel dim 0.
  ShardSpec spec{0, 2, false, {{"attn.kernel", SplitKind::kColumn, 1},
                               {"attn.out", SplitKind::kRow, 0}}};
  auto parts = plan_shard(*r, spec);
  REQUIRE(parts.ok());
  auto p = by_path(*r, *parts);
  check_box(p["params/attn/kernel"], box({0, 0}, {8, 3}));
  check_box(p["params/attn/out"], box({0, 0}, {3, 8}));
}

TEST_CASE("expert parallelism: whole experts per rank, stacked experts by dimension 0") {
  TempDir dir;
  std::vector<Named> leaves;
  for (int e = 0; e < 4; ++e) {
    leaves.push_back({"model.layers.0.block_sparse_moe.experts." + std::to_string(e) + ".w1.weight",
                      {8, 4}});
  }
  leaves.push_back({"model.layers.1.mlp.experts.gate_up_proj", {6, 4, 8}});
  leaves.push_back({"model.layers.0.block_sparse_moe.gate.weight", {4, 4}});
  auto r = save_flat(dir, leaves);
  auto parts = plan_shard(*r, {1, 2, true, {}});
  REQUIRE(parts.ok());
  auto p = by_path(*r, *parts);
  CHECK_FALSE(p["model.layers.0.block_sparse_moe.experts.0.w1.weight"].load);
  CHECK_FALSE(p["model.layers.0.block_sparse_moe.experts.1.w1.weight"].load);
  CHECK(p["model.layers.0.block_sparse_moe.experts.2.w1.weight"].load);
  CHECK(p["model.layers.0.block_sparse_moe.experts.3.w1.weight"].load);
  CHECK_FALSE(p["model.layers.0.block_sparse_moe.experts.3.w1.weight"].box.has_value());
  CHECK(p["model.layers.0.block_sparse_moe.experts.3.w1.weight"].kind == SplitKind::kExperts);
  check_box(p["model.layers.1.mlp.experts.gate_up_proj"], box({3, 0, 0}, {6, 4, 8}));
  CHECK_FALSE(p["model.layers.0.block_sparse_moe.gate.weight"].box.has_value());
  // Without expert parallelism the experts' weights follow the rules (w1: column).
  auto tp = plan_shard(*r, {1, 2, false, {}});
  REQUIRE(tp.ok());
  auto q = by_path(*r, *tp);
  CHECK(q["model.layers.0.block_sparse_moe.experts.0.w1.weight"].load);
  check_box(q["model.layers.0.block_sparse_moe.experts.0.w1.weight"], box({4, 0}, {8, 4}));
}

TEST_CASE("shard plans refuse what cannot be split, naming the file and the leaf") {
  TempDir dir;
  auto r = save_flat(dir, {{"x.q_proj.weight", {6, 4}}, {"norm.weight", {4}}});
  auto uneven = plan_shard(*r, {0, 4, false, {}});
  REQUIRE(uneven.status().is_invalid_argument());
  CHECK(uneven.status().message().find("x.q_proj.weight") != std::string::npos);
  CHECK(uneven.status().message().find("m.jtree") != std::string::npos);
  CHECK(uneven.status().message().find("divide evenly") != std::string::npos);
  CHECK(plan_shard(*r, {2, 2, false, {}}).status().is_invalid_argument());
  CHECK(plan_shard(*r, {0, 0, false, {}}).status().is_invalid_argument());
  auto rank = plan_shard(*r, {0, 2, false, {{"norm.weight", SplitKind::kRow, -1}}});
  REQUIRE(rank.status().is_invalid_argument());
  CHECK(rank.status().message().find("rank 1") != std::string::npos);
  CHECK(plan_shard(*r, {0, 2, false, {{"", SplitKind::kRow, -1}}}).status().is_invalid_argument());
  // world 1: every leaf whole.
  auto one = plan_shard(*r, {0, 1, false, {}});
  REQUIRE(one.ok());
  for (const ShardPart& p : *one) CHECK_FALSE(p.box.has_value());
}

TEST_CASE("a rank's boxes read in one read_many match the whole leaves' rows and columns") {
  TempDir dir;
  const Shape qs{8, 6}, os{6, 8};
  auto q = random_array(DType::kFloat32, 48, 1), o = random_array(DType::kFloat32, 48, 2);
  TreeBuilder b;
  b.dict();
  LeafOptions lo;
  lo.chunk_shape = {3, 6};  // chunks that the rank's boxes cut through
  b.key("l.q_proj.weight").array(DType::kFloat32, qs, ArrayView{q.data()}, lo);
  b.key("l.o_proj.weight").array(DType::kFloat32, os, ArrayView{o.data()}, lo);
  b.end();
  REQUIRE(save(std::move(*std::move(b).finish()), dir.file("r.jtree")).ok());
  auto r = *Reader::open(dir.file("r.jtree"));
  auto parts = plan_shard(*r, {1, 2, false, {}});
  REQUIRE(parts.ok());
  std::vector<std::vector<std::byte>> out;
  std::vector<ReadRequest> reqs;
  for (const ShardPart& p : *parts) {
    out.emplace_back(p.box->num_elements() * 4);
    reqs.push_back({p.leaf, p.box, out.back()});
  }
  REQUIRE(r->read_many(reqs).ok());
  // (Compared as bytes: random floats may be NaN.)
  for (size_t i = 0; i < 4; ++i) {  // rows 4..8 of q
    CHECK(std::memcmp(out[0].data() + i * 24, q.data() + (4 + i) * 24, 24) == 0);
  }
  for (size_t i = 0; i < 6; ++i) {  // columns 4..8 of o
    CHECK(std::memcmp(out[1].data() + i * 16, o.data() + i * 32 + 16, 16) == 0);
  }
}

TEST_CASE("shard_layout_boxes gives every rank's box from a key path and a shape") {
  const ShardSpec four{0, 4, false, {}};
  auto q = shard_layout_boxes("model/layers/0/self_attn.q_proj.weight", {8, 6}, four);
  REQUIRE(q.ok());
  REQUIRE(q->size() == 4);
  for (uint32_t rank = 0; rank < 4; ++rank) {
    CHECK((*q)[rank].begin == Shape{2 * rank, 0});
    CHECK((*q)[rank].end == Shape{2 * rank + 2, 6});
  }
  auto o = shard_layout_boxes("l.o_proj.weight", {6, 8}, four);
  REQUIRE(o.ok());
  CHECK((*o)[3].begin == Shape{0, 6});
  CHECK((*o)[3].end == Shape{6, 8});
  // Replicated leaves, one expert's tensor and a world of one: no boxes.
  CHECK(shard_layout_boxes("norm.weight", {8}, four)->empty());
  CHECK(shard_layout_boxes("l.q_proj.weight", {8, 6}, {0, 1, false, {}})->empty());
  CHECK(shard_layout_boxes("moe.experts.3.w1.weight", {8, 6}, {0, 4, true, {}})->empty());
  auto stacked = shard_layout_boxes("moe.experts.w1", {6, 4, 4}, {0, 4, true, {}});
  REQUIRE(stacked.ok());
  CHECK(stacked->at(2).begin == Shape{4, 0, 0});  // ceil(6 / 4) = 2 experts per rank
  CHECK(stacked->at(3).begin == Shape{6, 0, 0});  // (the last rank's block is empty)
  // The rank in the spec does not matter; what cannot be split is named.
  CHECK(shard_layout_boxes("l.q_proj.weight", {8, 6}, {3, 4, false, {}})->size() == 4);
  auto uneven = shard_layout_boxes("l.q_proj.weight", {6, 6}, four);
  REQUIRE(uneven.status().is_invalid_argument());
  CHECK(uneven.status().message().find("l.q_proj.weight") != std::string::npos);
  CHECK(uneven.status().message().find("divide evenly") != std::string::npos);
  CHECK(shard_layout_boxes("x", {8}, {0, 0, false, {}}).status().is_invalid_argument());
}

namespace {

// Whether every chunk of leaf `leaf` that overlaps `b` lies inside it.
bool whole_chunks(const Reader& r, uint32_t leaf, const Box& b) {
  const format::ChunkGrid grid = format::ChunkGrid::of(r.leaf(leaf));
  for (uint64_t c = 0; c < grid.count(); ++c) {
    const Box cb = grid.box(c);
    bool overlaps = true, inside = true;
    for (size_t d = 0; d < cb.begin.size(); ++d) {
      overlaps = overlaps && cb.begin[d] < b.end[d] && b.begin[d] < cb.end[d];
      inside = inside && b.begin[d] <= cb.begin[d] && cb.end[d] <= b.end[d];
    }
    if (overlaps && !inside) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("a file saved with a shard layout gives each rank of the world and its divisors whole "
          "chunks") {
  TempDir dir;
  const std::vector<Named> model = {
      {"model.embed_tokens.weight", {40, 16}},
      {"model.layers.0.self_attn.q_proj.weight", {16, 16}},
      {"model.layers.0.self_attn.o_proj.weight", {16, 16}},
      {"model.layers.0.mlp.down_proj.weight", {16, 48}},
      {"model.layers.0.input_layernorm.weight", {16}},
  };
  std::vector<std::vector<std::byte>> data;
  TreeBuilder b;
  b.dict();
  uint64_t seed = 1;
  for (const Named& n : model) {
    const uint64_t count = n.shape.size() == 1 ? n.shape[0] : n.shape[0] * n.shape[1];
    data.push_back(random_array(DType::kFloat32, count, seed++));
    b.key(n.key).array(DType::kFloat32, n.shape, ArrayView{data.back().data()});
  }
  b.end();
  WriteOptions o;
  o.target_chunk_bytes = 256;  // row slabs of 4 rows of 16 floats without a layout
  o.inline_threshold = 0;
  o.shard_layout = ShardSpec{0, 4, false, {}};
  REQUIRE(save(std::move(*std::move(b).finish()), dir.file("s.jtree"), o).ok());
  auto r = *Reader::open(dir.file("s.jtree"));
  for (uint32_t world : {1u, 2u, 4u}) {
    for (uint32_t rank = 0; rank < world; ++rank) {
      auto parts = plan_shard(*r, {rank, world, false, {}});
      REQUIRE(parts.ok());
      for (const ShardPart& p : *parts) {
        const Box want = p.box ? *p.box : Box::all(r->leaf(p.leaf).shape);
        INFO(r->leaf_path(p.leaf) << " rank " << rank << " of " << world);
        CHECK(whole_chunks(*r, p.leaf, want));
        std::vector<std::byte> out(want.num_elements() * 4);
        const std::vector<ReadRequest> req = {{p.leaf, p.box, out}};
        REQUIRE(r->read_many(req).ok());
        const auto& src = data[p.leaf];
        const Shape& shape = r->leaf(p.leaf).shape;
        if (shape.size() == 1) {
          CHECK(std::memcmp(out.data(), src.data(), out.size()) == 0);
          continue;
        }
        const uint64_t row_bytes = (want.end[1] - want.begin[1]) * 4;
        for (uint64_t i = want.begin[0]; i < want.end[0]; ++i) {  // (bytes: NaNs compare)
          CHECK(std::memcmp(out.data() + (i - want.begin[0]) * row_bytes,
                            src.data() + (i * shape[1] + want.begin[1]) * 4, row_bytes) == 0);
        }
      }
    }
  }
  // Without a layout, the down projection's rank part cuts through row-slab chunks.
  auto plain = save_flat(dir, {{"model.layers.0.mlp.down_proj.weight", {16, 48}}});
  auto part = plan_shard(*plain, {1, 4, false, {}});
  REQUIRE(part.ok());
  CHECK_FALSE(whole_chunks(*plain, part->at(0).leaf, *part->at(0).box));
}

TEST_CASE("a shard layout that a leaf cannot take fails the save, naming the leaf") {
  TempDir dir;
  auto data = random_array(DType::kFloat32, 36, 1);
  TreeBuilder b;
  b.dict();
  b.key("l.q_proj.weight").array(DType::kFloat32, {6, 6}, ArrayView{data.data()});
  b.end();
  WriteOptions o;
  o.inline_threshold = 0;
  o.shard_layout = ShardSpec{0, 4, false, {}};
  auto st = save(std::move(*std::move(b).finish()), dir.file("u.jtree"), o);
  REQUIRE(st.status().is_invalid_argument());
  CHECK(st.status().message().find("l.q_proj.weight") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir.file("u.jtree")));
  WriteOptions zero;
  zero.shard_layout = ShardSpec{0, 0, false, {}};
  CHECK(zero.check().is_invalid_argument());
}
