// The Reader's in-place accessors (num_nodes, node, leaf, children, path, find, metadata, chunk)
// read the header without building a Tree: they must give exactly what tree() gives, for big
// trees decoded in parallel ranges too, from many threads at once.
#include <atomic>
#include <cmath>
#include <thread>

#include <doctest/doctest.h>

#include "test_util.h"

using namespace jtree;
using namespace jtree::testing;

namespace {

void check_same_leaf(const Leaf& a, const Leaf& b) {
  CHECK(a.kind == b.kind);
  CHECK(a.flags == b.flags);
  CHECK(a.dtype == b.dtype);
  CHECK(a.storage == b.storage);
  CHECK(a.filter == b.filter);
  CHECK(a.codec == b.codec);
  CHECK(a.level == b.level);
  CHECK(a.shape == b.shape);
  CHECK(a.chunk_shape == b.chunk_shape);
  CHECK(a.inline_data == b.inline_data);
  CHECK(a.type_name == b.type_name);
  CHECK(a.big_int == b.big_int);
  CHECK(a.int_value == b.int_value);
  CHECK(a.bool_value == b.bool_value);
  CHECK((a.real == b.real || (std::isnan(a.real) && std::isnan(b.real))));
  CHECK((a.imag == b.imag || (std::isnan(a.imag) && std::isnan(b.imag))));
  CHECK(a.first_chunk == b.first_chunk);
}

// Every accessor against the Tree that tree() builds from the same header.
void check_accessors(const Reader& r) {
  const Tree& t = r.tree();
  REQUIRE(r.num_nodes() == t.nodes.size());
  REQUIRE(r.num_leaves() == t.leaves.size());
  CHECK(r.metadata() == t.metadata);
  for (uint32_t i = 0; i < r.num_nodes(); ++i) {
    CAPTURE(i);
    const NodeView a = r.node(i), b = t.nodes[i].view();
    CHECK(a.key == b.key);
    CHECK(a.kind == b.kind);
    CHECK(a.num_children == b.num_children);
    CHECK(a.leaf == b.leaf);
    CHECK(a.type_name == b.type_name);
    CHECK(a.aux_data == b.aux_data);
    CHECK(r.subtree_end(i) == t.subtree_end(i));
    CHECK(r.parent(i) == t.parent(i));
    CHECK(r.children(i) == t.children(i));
    const std::string p = r.path(i);
    CHECK(p == t.path(i));
    // (find() scans a container's children: a sample of the nodes of a big tree.)
    if (i % (1 + r.num_nodes() / 500) == 0) {
      auto found = r.find(p);
      REQUIRE(found.ok());
      CHECK(*found == *t.find(p));
    }
  }
  for (uint32_t l = 0; l < r.num_leaves(); ++l) {
    CAPTURE(l);
    check_same_leaf(r.leaf(l), t.leaves[l]);
    check_same_leaf(r.decode_leaf(l), t.leaves[l]);
    CHECK(&r.leaf(l) == &r.leaf(l));  // decoded once, kept
    CHECK(r.leaf_path(l) == t.leaf_path(l));
  }
  // Reader::chunk finds each chunk's leaf among the chunked leaves: the raw sizes of a leaf's
  // chunks add up to the leaf.
  for (uint32_t l = 0; l < t.leaves.size(); ++l) {
    const Leaf& leaf = t.leaves[l];
    if (leaf.storage != Storage::kChunked || is_4bit(leaf.dtype)) continue;
    uint64_t raw = 0;
    for (uint64_t k = 0; k < Tree::chunk_count(leaf); ++k) raw += r.chunk(leaf.first_chunk + k).raw_size;
    CHECK(raw == leaf.memory_bytes());
  }
  auto missing = r.find("no/such/key");
  CHECK(missing.status().is_not_found());
  CHECK(missing.status().message().find(r.name()) != std::string::npos);
}

}  // namespace

TEST_CASE("the in-place accessors equal tree() on every kind of node and leaf") {
  TempDir dir;
  const std::string path = dir.file("kinds.jtree");
  std::vector<float> w(1000);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i) * 0.5f;
  std::vector<int8_t> small(5, 7);
  TreeBuilder b;
  uint32_t tied = 0;
  b.dict();
  b.key("params").dict();
  LeafOptions chunked;
  chunked.chunk_shape = {10, 25};
  b.key("w").array(DType::kFloat32, {40, 25}, ArrayView{w.data()}, chunked);
  b.key("small").array(DType::kInt8, {5}, ArrayView{small.data()});
  b.end();
  b.key("list").list();
  b.int_value(-3).float_value(2.5).bool_value(true).complex_value(1, -1).str("text").bytes("raw");
  b.none();
  b.end();
  b.key("nt").named_tuple("Point");
  b.key("x").int_value(1);
  b.key("y/slash").int_value(2);
  b.end();
  b.key("custom").custom("my.Type", "aux bytes");
  b.int_value(5);
  b.end();
  b.key(int64_t{7}).str("int key");
  b.key("empty").dict().end();
  Leaf big;
  big.kind = LeafKind::kInt;
  big.big_int = std::string("\x01\x02\x03\x04\x05\x06\x07\x08\x09", 9);
  b.key("big").leaf(big, &tied);
  b.key("tied").tied(tied);
  b.metadata("note", "value");
  b.end();
  auto tree = std::move(b).finish();
  REQUIRE_MESSAGE(tree.ok(), tree.status().to_string());
  WriteOptions wo;
  wo.sync = false;
  REQUIRE(save(std::move(*tree), path, wo).ok());
  auto r = Reader::open(path);
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  check_accessors(**r);
  // Reads through the accessors' leaves give the data.
  auto leaf = (*r)->find_leaf("params/w");
  REQUIRE(leaf.ok());
  std::vector<float> back(1000);
  REQUIRE((*r)->read(*leaf, std::as_writable_bytes(std::span(back))).ok());
  CHECK(back == w);
  CHECK((*r)->find_leaf("list").status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("a tree of many leaves: parallel ranges, chunk numbering and threads agree") {
  // Over 16,384 entries per kind: the open checks nodes and leaves in parallel ranges, and the
  // chunk numbers of later ranges start after those of earlier ones.
  TempDir dir;
  const std::string path = dir.file("many.jtree");
  const int n = 40000;
  std::vector<float> data(64);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i);
  TreeBuilder b;
  b.dict();
  LeafOptions chunked;
  chunked.codec = Codec::kRaw;
  chunked.chunk_shape = {32};
  for (int i = 0; i < n; ++i) {
    const std::string k = "k" + std::to_string(i);
    if (i % 1000 == 0) b.key(k).array(DType::kFloat32, {64}, ArrayView{data.data()}, chunked);
    else if (i % 3 == 0) b.key(k).array(DType::kFloat32, {16}, ArrayView{data.data()});
    else b.key(k).int_value(i);
  }
  b.end();
  auto tree = std::move(b).finish();
  REQUIRE(tree.ok());
  WriteOptions wo;
  wo.sync = false;
  wo.inline_threshold = 128;  // the 64-float leaves chunked, the 16-float ones inline
  REQUIRE(save(std::move(*tree), path, wo).ok());
  auto r = Reader::open(path);
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  const Reader& reader = **r;
  CHECK(reader.num_leaves() == n);
  CHECK(reader.info().num_chunks == 2 * (n / 1000));

  // Many threads decoding the same leaves at once get one Leaf each.
  std::vector<const Leaf*> first(reader.num_leaves());
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (uint32_t k = 0; k < reader.num_leaves(); ++k) {
        const uint32_t l = (k * 7919u + static_cast<uint32_t>(t) * 104729u) % reader.num_leaves();
        const Leaf* p = &reader.leaf(l);
        if (p != &reader.leaf(l)) ++mismatches;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(mismatches == 0);

  check_accessors(reader);
  auto last = reader.find_leaf("k39000");
  REQUIRE(last.ok());
  std::vector<float> back(64);
  REQUIRE(reader.read(*last, std::as_writable_bytes(std::span(back))).ok());
  CHECK(back == data);
  CHECK(reader.leaf(*last).first_chunk == 2 * 39);
}
