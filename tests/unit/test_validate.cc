// Semantic validation: structures a hostile header could declare are refused.
#include <doctest/doctest.h>

#include "format/validate.h"

using namespace jtree;
using namespace jtree::format;

namespace {

Tree one_leaf(Leaf l) {
  Tree t;
  Node root;
  root.kind = NodeKind::kDict;
  root.num_children = 1;
  Node n;
  n.kind = NodeKind::kLeaf;
  n.key = Key::string("x");
  t.nodes = {root, n};
  t.leaves = {std::move(l)};
  REQUIRE(t.finalize().ok());
  return t;
}

Leaf chunked(Shape shape, Shape chunk, DType d = DType::kFloat32) {
  Leaf l;
  l.kind = LeafKind::kArray;
  l.dtype = d;
  l.shape = std::move(shape);
  l.storage = Storage::kChunked;
  l.chunk_shape = std::move(chunk);
  l.codec = Codec::kZstd;
  l.filter = Filter::kShuffle;
  return l;
}

Status check(Leaf l, Limits limits = {}) {
  Tree t = one_leaf(std::move(l));
  return validate_leaves(t, limits).status();
}

}  // namespace

TEST_CASE("structure errors found by finalize") {
  Tree t;
  Node root;
  root.kind = NodeKind::kDict;
  root.num_children = 2;
  Node a;
  a.kind = NodeKind::kNone;
  a.key = Key::string("k");
  Node b = a;
  t.nodes = {root, a, b};
  CHECK(t.finalize().message().find("duplicate keys") != std::string::npos);
  t.nodes[2].key = Key::integer(1);
  CHECK(t.finalize().ok());
  t.nodes[2].key = Key{};  // a dict child without a key
  CHECK_FALSE(t.finalize().ok());
  t.nodes[0].num_children = 5;  // claims more children than follow
  CHECK_FALSE(t.finalize().ok());
  t.nodes[0].num_children = 1;  // nodes left after the root's subtree
  t.nodes[2].key = Key::string("z");
  CHECK_FALSE(t.finalize().ok());
  // Orphan leaf: a payload nobody refers to is a hidden payload.
  Tree o = one_leaf(chunked({4}, {4}));
  o.leaves.push_back(o.leaves[0]);
  CHECK(o.finalize().message().find("not referenced") != std::string::npos);
  // Depth limit.
  Tree deep;
  for (int i = 0; i < 100; ++i) {
    Node n;
    n.kind = NodeKind::kList;
    n.num_children = 1;
    deep.nodes.push_back(n);
  }
  deep.nodes.push_back(Node{});
  CHECK(deep.finalize(1000).ok());
  CHECK_FALSE(deep.finalize(50).ok());
}

TEST_CASE("leaf spec errors") {
  CHECK(check(chunked({100, 10}, {10, 10})).ok());
  CHECK_FALSE(check(chunked({100, 10}, {10})).ok());         // rank mismatch
  CHECK_FALSE(check(chunked({100, 10}, {0, 10})).ok());      // zero chunk dim
  CHECK_FALSE(check(chunked({100, 10}, {200, 10})).ok());    // chunk beyond the extent
  CHECK_FALSE(check(chunked({0, 10}, {1, 10})).ok());        // empty array as chunks
  Leaf bad_filter = chunked({100}, {10}, DType::kInt4);
  CHECK_FALSE(check(bad_filter).ok());
  Leaf fs = chunked({100}, {10}, DType::kInt32);
  fs.filter = Filter::kFloatSplit;
  CHECK_FALSE(check(fs).ok());
  // Inline sizes must match dtype x shape exactly.
  Leaf in;
  in.kind = LeafKind::kArray;
  in.dtype = DType::kInt16;
  in.shape = {3};
  in.storage = Storage::kInline;
  in.inline_data = std::string(6, 'x');
  CHECK(check(in).ok());
  in.inline_data = std::string(7, 'x');
  CHECK(check(in).message().find("inline data is 7 bytes") != std::string::npos);
  // Scalars carry no hidden payload.
  Leaf s;
  s.kind = LeafKind::kInt;
  s.inline_data = "hidden";
  CHECK_FALSE(check(s).ok());
  // Huge shapes are refused without overflow.
  CHECK_FALSE(check(chunked({1ull << 40, 1ull << 40}, {1, 1})).ok());
  // Chunk size limit.
  Limits lim;
  lim.max_chunk_bytes = 1000;
  CHECK(check(chunked({1000}, {1000}), lim).code() == StatusCode::kResourceExhausted);
  // Text payloads are 1-d uint8.
  Leaf str;
  str.kind = LeafKind::kStr;
  str.dtype = DType::kInt32;
  str.shape = {1};
  str.storage = Storage::kInline;
  str.inline_data = "abcd";
  CHECK_FALSE(check(str).ok());
}

TEST_CASE("rectilinear chunk grids: hostile bounds are Corruption") {
  auto rect = [](Shape shape, Shape bounds) {
    Leaf l = chunked(std::move(shape), {});
    l.chunk_bounds = std::move(bounds);
    return l;
  };
  Tree ok = one_leaf(rect({10, 7}, {3, 10, 2, 7}));
  auto n = validate_leaves(ok, {});
  REQUIRE(n.ok());
  CHECK(*n == 4);
  CHECK(leaf_min_read_version(ok.leaves[0]) == 2);
  CHECK(leaf_min_read_version(chunked({10}, {5})) == 1);
  auto corrupt = [&](Leaf l) { return check(std::move(l)).code() == StatusCode::kCorruption; };
  CHECK(corrupt(rect({10, 7}, {3, 3, 10, 7})));      // not strictly increasing
  CHECK(corrupt(rect({10, 7}, {5, 3, 10, 7})));      // decreasing
  CHECK(corrupt(rect({10, 7}, {3, 10})));            // dimension 1 missing
  CHECK(corrupt(rect({10, 7}, {3, 10, 2, 7, 9})));   // values left over
  CHECK(corrupt(rect({10, 7}, {3, 11, 2, 7})));      // past the extent
  CHECK(corrupt(rect({10, 7}, {0, 10, 7})));         // an empty first chunk
  CHECK(corrupt(rect({10, 7}, {3, 9, 2, 7})));       // dimension 0 never reaches 10: runs on
  CHECK(corrupt(rect({0, 7}, {7})));                 // empty array
  CHECK(corrupt(rect({}, {1})));                     // rank 0 with bounds
  Leaf both = rect({10}, {4, 10});
  both.chunk_shape = {5};
  CHECK(corrupt(both));                              // a shape and bounds
  Leaf inl = rect({10}, {10});
  inl.storage = Storage::kInline;
  inl.codec = Codec::kRaw;
  inl.filter = Filter::kNone;
  inl.inline_data = std::string(40, 'x');
  CHECK(corrupt(inl));                               // bounds on an inline leaf
  // The largest chunk counts against the chunk limit, not the first one.
  Limits lim;
  lim.max_chunk_bytes = 400;
  CHECK(check(rect({1000}, {10, 1000}), lim).code() == StatusCode::kResourceExhausted);
  CHECK(check(rect({1000}, {900, 1000}), lim).code() == StatusCode::kResourceExhausted);
  CHECK(check(rect({1000}, {100, 200, 300, 400, 500, 600, 700, 800, 900, 1000}), lim).ok());
  // A huge grid is refused without overflow (a count over 2^64).
  Shape big;
  for (uint64_t d = 0; d < 5; ++d) {
    for (uint64_t e = 1; e <= 20000; ++e) big.push_back(e);
  }
  CHECK_FALSE(check(rect({20000, 20000, 20000, 20000, 20000}, big)).ok());
}

TEST_CASE("index checks: counts, bounds, overlap, encodings") {
  Tree t = one_leaf(chunked({100}, {50}));  // 2 chunks of 200 raw bytes
  REQUIRE(validate_leaves(t, Limits{}).ok());
  IndexData ix;
  ix.segments = {{1000, 500, 9}};
  ChunkRecord a{0, 200, 0, 0, 0, 0, 0};
  ChunkRecord b{200, 100, 0, 0, 1, 0, 0};
  ix.chunks = {a, b};
  Region meta[] = {{0, 128, "preamble"}, {128, 800, "header"}, {2000, 100, "index"},
                   {2100, 128, "footer"}};
  auto run = [&](const IndexData& x) {
    return validate_index(t, x, 2, 2228, meta, FileKind::kCheckpoint, 0);
  };
  CHECK(run(ix).ok());
  IndexData c = ix;
  c.chunks[1].offset = 150;  // overlaps chunk 0
  CHECK(run(c).message().find("overlap") != std::string::npos);
  c = ix;
  c.chunks[0].stored_size = 199;  // raw chunk of the wrong size
  CHECK_FALSE(run(c).ok());
  c = ix;
  c.chunks[1].offset = 450;  // beyond the segment
  CHECK_FALSE(run(c).ok());
  c = ix;
  c.chunks[1].encoding = 7;
  CHECK_FALSE(run(c).ok());
  c = ix;
  c.chunks[1].flags = kChunkAbsent;  // absent chunks only in segment files
  CHECK_FALSE(run(c).ok());
  c = ix;
  c.segments[0].file_offset = 900;  // overlaps the header
  CHECK_FALSE(run(c).ok());
  c = ix;
  c.segments[0].size = 5000;  // beyond the file
  CHECK_FALSE(run(c).ok());
  c = ix;
  c.chunks.pop_back();
  CHECK_FALSE(run(c).ok());
  c = ix;
  c.chunks[1].stored_size = 3;  // smaller than the plane table
  CHECK_FALSE(run(c).ok());
  c = ix;
  c.chunks[0].reserved = 1;
  CHECK_FALSE(run(c).ok());
  c = ix;
  c.chunks[1].segment = 3;
  CHECK_FALSE(run(c).ok());
}

TEST_CASE("index checks of many leaves: the first error in leaf order, distant overlaps") {
  // 10,000 leaves of one raw 8-byte chunk each: of two bad records the first leaf's is
  // reported, and chunks thousands of leaves apart that share bytes are found.
  constexpr uint32_t kLeaves = 10000;
  Tree t;
  Node root;
  root.kind = NodeKind::kDict;
  root.num_children = kLeaves;
  t.nodes.push_back(root);
  IndexData ix;
  for (uint32_t i = 0; i < kLeaves; ++i) {
    Node n;
    n.kind = NodeKind::kLeaf;
    n.key = Key::string("l" + std::to_string(i));
    n.leaf = i;
    t.nodes.push_back(n);
    Leaf l = chunked({2}, {2});
    l.codec = Codec::kRaw;
    l.filter = Filter::kNone;
    t.leaves.push_back(std::move(l));
    ix.chunks.push_back(ChunkRecord{8ull * i, 8, 0, 0, 0, 0, 0});
  }
  REQUIRE(t.finalize().ok());
  REQUIRE(validate_leaves(t, Limits{}).ok());
  const uint64_t data = 8ull * kLeaves;
  ix.segments = {{128, data, 9}};
  const uint64_t index_at = 128 + data;
  Region meta[] = {{0, 128, "preamble"}, {index_at, 100, "index"},
                   {index_at + 100, 128, "footer"}};
  auto run = [&](const IndexData& x) {
    return validate_index(t, x, kLeaves, index_at + 228, meta, FileKind::kCheckpoint, 0);
  };
  CHECK(run(ix).ok());
  IndexData c = ix;
  c.chunks[9000].stored_size = 7;  // (a later range)
  c.chunks[5000].stored_size = 9;
  Status st = run(c);
  CHECK(st.message().find("leaf l5000: chunk 0: raw chunk of 9 bytes") != std::string::npos);
  c = ix;
  c.chunks[9999].offset = 8;  // on leaf 1's bytes, thousands of leaves away
  CHECK(run(c).message().find("chunks overlap at file offset 136") != std::string::npos);

  // A segment file's absent chunks hold no bytes: they are skipped by the overlap check, in
  // every range, and do not hide an overlap of the stored chunks around them.
  auto run_segment = [&](const IndexData& x) {
    IndexData y = x;
    y.segment_info = SegmentInfo{};
    y.segment_info->process_count = 1;
    return validate_index(t, y, kLeaves, index_at + 228, meta, FileKind::kSegment, 0);
  };
  c = ix;
  // (Leaves 0 and 2047 end the first range of the checks, 2048 starts the second.)
  for (uint32_t i : {0u, 2047u, 2048u, 5000u, 9999u}) {
    c.chunks[i] = ChunkRecord{0, 0, 0, 0, 0, kChunkAbsent, 0};
  }
  CHECK(run_segment(c).ok());
  c.chunks[5001].offset = 8 * 4999;  // on leaf 4999's bytes, across the absent leaf 5000
  CHECK(run_segment(c).message().find("chunks overlap at file offset " +
                                      std::to_string(128 + 8 * 4999)) != std::string::npos);
}
