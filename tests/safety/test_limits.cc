// Parser limits (issue "Limits", spec/FORMAT.md section 13): a legitimate file with a million
// leaves opens with the default limits; files whose well-formed, correctly hashed metadata
// declare hostile sizes are refused before the allocation those sizes ask for; each limit,
// lowered per open, refuses the file that exceeds it with a message naming the limit.
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "alloc_watch.h"
#include "file_map.h"
#include "format/index_codec.h"
#include "format/layout.h"
#include "test_util.h"
#include "write/metadata_writer.h"

using namespace jtree;
using namespace jtree::safety;
using jtree::testing::read_file;
using jtree::testing::TempDir;

namespace {

// A complete file around `tree` (its leaves' specs and inline data as given, nothing checked)
// and `index`, written with the library's own metadata writers: a forger's file whose hashes
// are all right.
std::vector<std::byte> forge(const Tree& tree, const format::IndexData& index = {}) {
  TempDir dir;
  const std::string path = dir.file("forged.jtree");
  auto sink = create_file_sink(path, SinkOptions{true, false, {}});
  REQUIRE(sink.ok());
  auto header = header_bytes(tree, "forger");
  REQUIRE_MESSAGE(header.ok(), header.status().to_string());
  format::VersionInfo v;
  REQUIRE(write_head(**sink, *header, v).ok());
  GenerationInfo g;
  g.header_offset = format::kPreambleSize;
  g.header = *header;
  g.version = v;
  REQUIRE(write_tail(**sink, index, g).ok());
  REQUIRE((*sink)->commit().ok());
  return read_file(path);
}

Node node(NodeKind kind, uint32_t children = 0, uint32_t leaf = 0) {
  Node n;
  n.kind = kind;
  n.num_children = children;
  n.leaf = leaf;
  return n;
}

Leaf array_leaf(DType dtype, Shape shape, Storage storage) {
  Leaf l;
  l.kind = LeafKind::kArray;
  l.dtype = dtype;
  l.shape = std::move(shape);
  l.storage = storage;
  return l;
}

// A list holding one leaf.
Tree one_leaf(Leaf l) {
  Tree t;
  t.nodes = {node(NodeKind::kList, 1), node(NodeKind::kLeaf, 0, 0)};
  t.leaves = {std::move(l)};
  return t;
}

struct Refusal {
  Status status;
  size_t largest_allocation = 0;
};

Refusal open_watched(std::vector<std::byte> bytes, const OpenOptions& oo = {}) {
  auto source = memory_source(std::move(bytes), "forged");
  AllocWatch watch;
  auto r = Reader::open(source, oo);
  return {r.status(), watch.largest()};
}

// The file must be refused as hostile (Corruption) or over a limit (ResourceExhausted), with
// a message containing `text`, and no single allocation may exceed `max_alloc` bytes.
void check_refused(const char* what, std::vector<std::byte> bytes, const std::string& text,
                   size_t max_alloc = 1 << 20, const OpenOptions& oo = {}) {
  const std::string name = what;
  CAPTURE(name);
  const size_t size = bytes.size();
  const Refusal r = open_watched(std::move(bytes), oo);
  CHECK_MESSAGE((r.status.is_corruption() || r.status.code() == StatusCode::kResourceExhausted),
                r.status.to_string());
  CHECK_MESSAGE(r.status.message().find(text) != std::string::npos, r.status.to_string());
  CHECK_MESSAGE(r.largest_allocation <= max_alloc,
                "allocated " << r.largest_allocation << " bytes for a file of " << size);
}

}  // namespace

TEST_CASE("a legitimate file of 1,000,000 leaves opens with the default limits") {
  constexpr uint32_t kLeaves = 1000000;
  TempDir dir;
  const std::string path = dir.file("million.jtree");
  const auto t0 = std::chrono::steady_clock::now();
  {
    // Scalars and tiny arrays (inline), in a dict of lists: what a big optimizer state's
    // structure looks like, without its data.
    const int32_t small[2] = {7, -7};
    TreeBuilder b;
    b.dict();
    for (uint32_t k = 0; k < kLeaves / 1000; ++k) {
      b.key("layer" + std::to_string(k)).list();
      for (uint32_t i = 0; i < 1000; ++i) {
        if (i % 2) {
          b.int_value(static_cast<int64_t>(k) * 1000 + i);
        } else {
          b.array(DType::kInt32, {2}, ArrayView{small});
        }
      }
      b.end();
    }
    b.end();
    auto tree = std::move(b).finish();
    REQUIRE(tree.ok());
    auto st = save(std::move(*tree), path);
    REQUIRE_MESSAGE(st.ok(), st.status().to_string());
  }
  const auto t1 = std::chrono::steady_clock::now();
  auto r = Reader::open(path);
  const auto t2 = std::chrono::steady_clock::now();
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  const Tree& t = (*r)->tree();
  CHECK(t.leaves.size() == kLeaves);
  CHECK(t.leaves[*(*r)->find_leaf("layer999/999")].int_value == 999999);
  std::vector<std::byte> got(8);
  REQUIRE((*r)->read(*(*r)->find_leaf("layer500/0"), got).ok());
  CHECK(std::memcmp(got.data(), std::array<int32_t, 2>{7, -7}.data(), 8) == 0);
  MESSAGE("1,000,000 leaves: header " << (*r)->info().header_size << " bytes, save "
                                      << std::chrono::duration<double>(t1 - t0).count() << " s, open "
                                      << std::chrono::duration<double>(t2 - t1).count() << " s");

  const auto bytes = read_file(path);
  const uint64_t header_size = (*r)->info().header_size;
  {
    // An open keeps the header and reads the tree from it in place: its largest allocation is
    // the header's buffer. Building the whole Tree afterwards allocates the leaf array, larger
    // than the header (which also shows that the watch sees allocations).
    auto source = memory_source(bytes);
    AllocWatch watch;
    auto opened = Reader::open(source);
    REQUIRE(opened.ok());
    CHECK(watch.largest() >= header_size);
    CHECK(watch.largest() <= header_size + (1 << 20));
    CHECK((*opened)->tree().leaves.size() == kLeaves);
    CHECK(watch.largest() > header_size + (1 << 20));
  }
  // One leaf over a lowered limit is refused from the flatbuffer's vector length, before the
  // tree is built: nothing larger than the header itself is allocated.
  OpenOptions oo;
  oo.limits.max_leaves = kLeaves - 1;
  check_refused("max_leaves", bytes, "over the limit of 999999", header_size + (1 << 20), oo);
}

TEST_CASE("hostile sizes in well-formed, correctly hashed metadata are refused before allocation") {
  Tree base = one_leaf(array_leaf(DType::kUInt8, {4}, Storage::kInline));
  base.leaves[0].inline_data = "abcd";
  const auto valid = forge(base);
  REQUIRE(Reader::open(memory_source(valid)).ok());  // the forger's files are sound otherwise
  auto m = Reader::open(memory_source(valid));
  const FileMap map = map_file(**m, valid);

  SUBCASE("footer: header and index sizes") {
    for (uint64_t size : {uint64_t{1} << 29, uint64_t{1} << 40, ~uint64_t{0} - 7}) {
      for (uint64_t field : {uint64_t{32}, uint64_t{8}}) {  // header_size, index_size
        auto bytes = valid;
        store_le64(std::span(bytes).subspan(map.footer_offset), field, size);
        if (field == 32) store_le64(bytes, 40, size);  // generation 0: the preamble agrees
        rehash(bytes, map, Region::kFooter);
        check_refused("footer size", std::move(bytes), field == 32 ? "header" : "index");
      }
    }
  }
  SUBCASE("an inline leaf declaring 2^36 elements") {
    Tree t = one_leaf(array_leaf(DType::kUInt8, {uint64_t{1} << 36}, Storage::kInline));
    t.leaves[0].inline_data = "x";
    check_refused("inline", forge(t), "");
  }
  SUBCASE("element counts that overflow 64 bits") {
    Tree t = one_leaf(array_leaf(DType::kFloat64, {uint64_t{1} << 40, uint64_t{1} << 40},
                                 Storage::kInline));
    check_refused("overflow", forge(t), "");
  }
  SUBCASE("a chunk grid of 2^40 chunks") {
    Leaf l = array_leaf(DType::kUInt8, {uint64_t{1} << 40}, Storage::kChunked);
    l.chunk_shape = {1};
    check_refused("grid", forge(one_leaf(l)), "");
  }
  SUBCASE("one chunk of a TiB") {
    Leaf l = array_leaf(DType::kUInt8, {uint64_t{1} << 40}, Storage::kChunked);
    l.chunk_shape = {uint64_t{1} << 40};
    check_refused("chunk", forge(one_leaf(l)), "");
  }
  SUBCASE("rank 1000") {
    check_refused("rank", forge(one_leaf(array_leaf(DType::kUInt8, Shape(1000, 1), Storage::kInline))),
                  "rank");
  }
  SUBCASE("a container claiming 2^32 - 1 children") {
    Tree t = base;
    t.nodes[0].num_children = UINT32_MAX;
    check_refused("children", forge(t), "");
  }
  SUBCASE("a leaf reference out of range") {
    Tree t = base;
    t.nodes[1].leaf = UINT32_MAX;
    check_refused("leaf ref", forge(t), "");
  }
  SUBCASE("nesting 100,000 deep") {
    // Recursion on such a tree would overflow the stack; the depth limit (512) stops it.
    Tree t;
    for (int i = 0; i < 100000; ++i) t.nodes.push_back(node(NodeKind::kList, 1));
    t.nodes.push_back(node(NodeKind::kNone));
    check_refused("depth", forge(t), "deeper than 512", 16 << 20);
  }
  SUBCASE("a key of 2 MiB") {
    Tree t;
    t.nodes = {node(NodeKind::kDict, 1), node(NodeKind::kNone)};
    t.nodes[1].key = Key::string(std::string(2 << 20, 'k'));
    check_refused("key", forge(t), "limit", 8 << 20);
  }
  SUBCASE("an index claiming chunks the tree does not have") {
    format::IndexData index;
    index.chunks.resize(100000);  // 3.2 MB of entries for a tree with no chunked leaf
    check_refused("chunks", forge(base, index), "", 8 << 20);
  }
}

TEST_CASE("each limit, lowered per open, refuses the file over it and names the limit") {
  // 3 leaves, 5 nodes, depth 2, rank 2, chunks of 4 KiB, keys of up to 5 bytes (the limit on
  // strings covers keys, type names and metadata keys, not the writer's name).
  TempDir dir;
  const std::string path = dir.file("f.jtree");
  const auto data = jtree::testing::random_bytes(64 * 64 * 4, 1);
  {
    TreeBuilder b;
    b.dict();
    b.key("w").array(DType::kFloat32, {64, 64}, ArrayView{data.data()});
    b.key("inner").list().int_value(1).str(std::string(1000, 's')).end();
    b.end();
    WriteOptions wo;
    wo.target_chunk_bytes = 4096;
    wo.inline_threshold = 500;  // the string is chunked: read_bytes allocates for it
    REQUIRE(save(std::move(*std::move(b).finish()), path, wo).ok());
  }
  const auto bytes = read_file(path);
  auto r = Reader::open(memory_source(bytes));
  REQUIRE(r.ok());
  const FileInfo info = (*r)->info();

  // Each limit at exactly what the file needs (it opens), then one below (refused).
  struct Case {
    const char* name;
    void (*set)(Limits&, uint64_t);
    uint64_t need;
    std::string text;
  };
  const Case cases[] = {
      {"max_header_bytes", [](Limits& l, uint64_t v) { l.max_header_bytes = v; }, info.header_size,
       "over the limit"},
      {"max_index_bytes", [](Limits& l, uint64_t v) { l.max_index_bytes = v; }, info.index_size,
       "over the limit"},
      {"max_nodes", [](Limits& l, uint64_t v) { l.max_nodes = v; }, 5, "limit of 4"},
      {"max_leaves", [](Limits& l, uint64_t v) { l.max_leaves = v; }, 3, "limit of 2"},
      {"max_depth", [](Limits& l, uint64_t v) { l.max_depth = static_cast<uint32_t>(v); }, 2,
       "deeper than 1"},
      {"max_rank", [](Limits& l, uint64_t v) { l.max_rank = static_cast<uint32_t>(v); }, 2,
       "rank 2"},
      {"max_chunk_bytes", [](Limits& l, uint64_t v) { l.max_chunk_bytes = v; }, 4096, "4095"},
      {"max_string_bytes", [](Limits& l, uint64_t v) { l.max_string_bytes = v; },
       5, "limit"},
  };
  for (const Case& c : cases) {
    const std::string name = c.name;
    CAPTURE(name);
    OpenOptions at;
    c.set(at.limits, c.need);
    auto opened = Reader::open(memory_source(bytes), at);
    CHECK_MESSAGE(opened.ok(), opened.status().to_string());
    OpenOptions below;
    c.set(below.limits, c.need - 1);
    check_refused(c.name, bytes, c.text, bytes.size() + (1 << 20), below);
  }

  // The allocation limits apply to reads that allocate for the caller.
  OpenOptions oo;
  oo.limits.max_leaf_bytes = 999;
  auto small = Reader::open(memory_source(bytes), oo);
  REQUIRE(small.ok());
  const uint32_t s = *(*small)->find_leaf("inner/1");
  auto got = (*small)->read_bytes(s);
  CHECK(got.status().code() == StatusCode::kResourceExhausted);
  CHECK(got.status().message().find("999") != std::string::npos);
  oo.limits.max_leaf_bytes = 1000;
  oo.limits.max_total_bytes = 1999;
  auto total = Reader::open(memory_source(bytes), oo);
  REQUIRE(total.ok());
  CHECK((*total)->read_bytes(s).ok());  // exactly at the per-leaf limit
  // The total is per call (MemoryBudget), not per Reader: calls with their own budgets never
  // run out; calls sharing one through ReadOptions::memory_budget count together.
  CHECK((*total)->read_bytes(s).ok());
  MemoryBudget budget(oo.limits);
  ReadOptions shared;
  shared.memory_budget = &budget;
  CHECK((*total)->read_bytes(s, shared).ok());
  CHECK(budget.reserved() == 1000);
  auto over = (*total)->read_bytes(s, shared);
  CHECK(over.status().code() == StatusCode::kResourceExhausted);
  CHECK(over.status().message().find("max_total_bytes") != std::string::npos);
  CHECK(over.status().message().find("inner/1") != std::string::npos);
  CHECK(budget.reserved() == 1000);  // a refused reservation takes nothing
}

TEST_CASE("MemoryBudget: per reservation and in total, concurrent reservations never overshoot") {
  MemoryBudget b(100, 1000);
  CHECK(b.reserve(100, "x").ok());
  auto big = b.reserve(101, "f.jtree: leaf w");
  CHECK(big.code() == StatusCode::kResourceExhausted);
  CHECK(big.message().rfind("f.jtree: leaf w: needs 101 bytes", 0) == 0);
  CHECK(big.message().find("max_leaf_bytes") != std::string::npos);
  CHECK(b.reserved() == 100);
  CHECK(b.reserve(101, "").message().rfind("needs 101 bytes, over the limit of 100", 0) == 0);
  std::vector<std::thread> threads;
  std::atomic<int> granted{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) granted += b.reserve(10, "x").ok() ? 1 : 0;
    });
  }
  for (auto& t : threads) t.join();
  CHECK(granted == 90);  // (1000 - 100) / 10
  CHECK(b.reserved() == 1000);
  CHECK(b.reserve(0, "x").ok());
  CHECK(b.reserve(1, "x").code() == StatusCode::kResourceExhausted);
  MemoryBudget unlimited(UINT64_MAX, UINT64_MAX);
  CHECK(unlimited.reserve(UINT64_MAX, "x").ok());
  CHECK(unlimited.reserve(1, "x").code() == StatusCode::kResourceExhausted);
}
