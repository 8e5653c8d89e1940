// A rank's part of a model (jtree/shard.h): names, rules, boxes, experts, errors.
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

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
