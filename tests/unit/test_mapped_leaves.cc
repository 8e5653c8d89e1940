// Reader::mapped_leaf / map_leaves: leaves saved without compression lie in the file as their
// array (chunks back to back in grid order) and come back as views of the file's copy-on-write
// mapping: the right bytes, checksums verified, private writes, alive after the Reader and
// after the file is replaced; everything else is refused (empty) and read as before.
#include <doctest/doctest.h>

#include <cstring>

#include "format/chunk_grid.h"
#include "test_util.h"

using namespace jtree;
using namespace jtree::testing;

namespace {

struct Saved {
  std::string path;
  std::vector<std::vector<std::byte>> data;  // per leaf, C order
};

struct Spec {
  DType dtype;
  Shape shape;
  Shape chunk;  // empty: default
  Codec codec = Codec::kRaw;
  bool zeros = false;  // contents all zero (compressible) instead of random
};

uint64_t elements_of(const Shape& s) {
  uint64_t n = 1;
  for (auto e : s) n *= e;
  return n;
}

// Saves leaves "l0", "l1"... of `specs` (random contents) to `path`.
Saved save_leaves(const std::string& path, const std::vector<Spec>& specs, uint64_t seed = 1) {
  Saved out{path, {}};
  TreeBuilder b;
  b.dict();
  for (size_t i = 0; i < specs.size(); ++i) {
    out.data.push_back(random_array(specs[i].dtype, elements_of(specs[i].shape), seed + i));
    if (specs[i].zeros) std::fill(out.data.back().begin(), out.data.back().end(), std::byte{0});
    LeafOptions lo;
    lo.codec = specs[i].codec;
    lo.chunk_shape = specs[i].chunk;
    b.key("l" + std::to_string(i)).array(specs[i].dtype, specs[i].shape,
                                          ArrayView{out.data.back().data()}, lo);
  }
  b.end();
  auto tree = std::move(b).finish();
  REQUIRE(tree.ok());
  WriteOptions wo;
  wo.inline_threshold = 16;
  wo.target_chunk_bytes = 1000;  // many chunks, most not a multiple of the 64-byte alignment
  auto st = save(std::move(*tree), path, wo);
  REQUIRE_MESSAGE(st.ok(), st.status().to_string());
  return out;
}

std::shared_ptr<Reader> open_or_die(const std::string& path) {
  auto r = Reader::open(path);
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  return *r;
}

std::vector<uint32_t> all_leaves(const Reader& r) {
  std::vector<uint32_t> v(r.num_leaves());
  for (uint32_t i = 0; i < v.size(); ++i) v[i] = *r.find_leaf("l" + std::to_string(i));
  return v;
}

bool same(std::span<const std::byte> a, const std::vector<std::byte>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

}  // namespace

TEST_CASE("raw leaves map whole: back to back in grid order, the right bytes") {
  TempDir dir;
  const std::vector<Spec> specs = {
      {DType::kFloat32, {33, 17}, {}},        // rows of 68 bytes: chunks not 64-aligned
      {DType::kBFloat16, {1000}, {}},
      {DType::kInt8, {5, 6, 7}, {1, 3, 7}},   // cut along dimension 1 inside single rows
      {DType::kFloat64, {2, 3, 4, 5}, {1, 1, 2, 5}},
      {DType::kUInt16, {300}, {300}},         // one chunk
      {DType::kComplex64, {40, 3}, {}},
  };
  const Saved s = save_leaves(dir.file("raw.jtree"), specs);
  auto r = open_or_die(s.path);
  const auto leaves = all_leaves(*r);
  auto mapped = r->map_leaves(leaves);
  REQUIRE_MESSAGE(mapped.ok(), mapped.status().to_string());
  for (size_t i = 0; i < specs.size(); ++i) {
    CAPTURE(i);
    const Leaf& l = r->leaf(leaves[i]);
    REQUIRE(l.storage == Storage::kChunked);
    REQUIRE((*mapped)[i]);
    CHECK(same((*mapped)[i].bytes, s.data[i]));
    // Aligned for every dtype and for DMA (the writer aligns the first chunk to 64).
    const ChunkInfo first = r->chunk(l.first_chunk);
    CHECK(first.file_offset % 64 == 0);
    CHECK(reinterpret_cast<uintptr_t>((*mapped)[i].bytes.data()) % 64 == 0);
    uint64_t next = first.file_offset;
    for (uint64_t k = 0; k < Tree::chunk_count(l); ++k) {
      const ChunkInfo c = r->chunk(l.first_chunk + k);
      CHECK(c.file_offset == next);
      next += c.stored_size;
    }
    // mapped_leaf() of one leaf gives the same bytes, in a mapping of its own (each call maps
    // anew, so that a write into one call's view is never seen by another call).
    auto one = r->mapped_leaf(leaves[i]);
    REQUIRE(one.ok());
    CHECK(same(one->bytes, s.data[i]));
    CHECK(one->bytes.data() != (*mapped)[i].bytes.data());
  }
  CHECK(Tree::chunk_count(r->leaf(leaves[0])) > 1);
  CHECK(Tree::chunk_count(r->leaf(leaves[2])) > 1);
}

TEST_CASE("a strided source is gathered into the same back-to-back layout") {
  TempDir dir;
  // A transposed view: every chunk is gathered into a reused buffer.
  const uint64_t rows = 50, cols = 30;
  std::vector<float> base(rows * cols);
  for (size_t i = 0; i < base.size(); ++i) base[i] = static_cast<float>(i) * 0.5f;
  TreeBuilder b;
  b.dict();
  LeafOptions lo;
  lo.codec = Codec::kRaw;
  const std::vector<int64_t> strides = {4, static_cast<int64_t>(cols * 4)};  // (cols, rows) view
  b.key("t").array(DType::kFloat32, {cols, rows}, ArrayView{base.data(), strides}, lo);
  b.end();
  auto tree = std::move(b).finish();
  REQUIRE(tree.ok());
  WriteOptions wo;
  wo.target_chunk_bytes = 256;
  REQUIRE(save(std::move(*tree), dir.file("t.jtree"), wo).ok());
  auto r = open_or_die(dir.file("t.jtree"));
  auto m = r->mapped_leaf(*r->find_leaf("t"));
  REQUIRE(m.ok());
  REQUIRE(*m);
  CHECK(Tree::chunk_count(r->leaf(*r->find_leaf("t"))) > 1);
  std::vector<float> got(cols * rows);
  std::memcpy(got.data(), m->bytes.data(), m->bytes.size());
  for (uint64_t c = 0; c < cols; ++c) {
    for (uint64_t rr = 0; rr < rows; ++rr) CHECK(got[c * rows + rr] == base[rr * cols + c]);
  }
}

TEST_CASE("leaves that are not stored as their array are not mapped") {
  TempDir dir;
  std::vector<Spec> specs = {
      {DType::kFloat32, {33, 17}, {5, 4}},               // a grid cutting two dimensions
      {DType::kInt4, {1000}, {}},                        // packed two per byte in the file
      {DType::kUInt8, {8}, {}},                          // inline in the header
      {DType::kUInt8, {4000}, {}, Codec::kZstd, true},   // compressed (zeros: it shrinks)
  };
  Saved s = save_leaves(dir.file("mixed.jtree"), specs);
  auto r = open_or_die(s.path);
  const auto leaves = all_leaves(*r);
  CHECK(r->leaf(leaves[2]).storage == Storage::kInline);
  CHECK(r->chunk(r->leaf(leaves[3]).first_chunk).encoding == ChunkEncoding::kPlanes);
  auto mapped = r->map_leaves(leaves);
  REQUIRE(mapped.ok());
  for (size_t i = 0; i < leaves.size(); ++i) {
    CAPTURE(i);
    CHECK_FALSE((*mapped)[i]);
    CHECK((*mapped)[i].bytes.empty());
  }
  // No mapping at all: use_mmap off, or a Source that is not a local file.
  OpenOptions no_map;
  no_map.use_mmap = false;
  const Saved raw = save_leaves(dir.file("raw.jtree"), {{DType::kFloat32, {100}, {}}});
  auto unmapped = Reader::open(raw.path, no_map);
  REQUIRE(unmapped.ok());
  auto m = (*unmapped)->mapped_leaf(0);
  REQUIRE(m.ok());
  CHECK_FALSE(*m);
  auto in_memory = Reader::open(memory_source(read_file(raw.path), "mem.jtree"));
  REQUIRE(in_memory.ok());
  auto m2 = (*in_memory)->mapped_leaf(0);
  REQUIRE(m2.ok());
  CHECK_FALSE(*m2);
  // A leaf number out of range is the caller's error.
  auto bad = (*in_memory)->mapped_leaf(7);
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK(bad.status().message().find("leaf number 7 out of range") != std::string::npos);
}

TEST_CASE("mapped bytes are private, outlive the Reader and a replaced file") {
  TempDir dir;
  const Saved s = save_leaves(dir.file("w.jtree"), {{DType::kFloat32, {64, 64}, {}}});
  const auto on_disk = read_file(s.path);
  MappedLeaf m;
  {
    auto r = open_or_die(s.path);
    auto got = r->mapped_leaf(0);
    REQUIRE(got.ok());
    REQUIRE(*got);
    m = std::move(*got);
  }  // the Reader (and its Source, its descriptor) is gone; the mapping stays
  CHECK(same(m.bytes, s.data[0]));
  // Writes change this process's copy only.
  std::memset(m.bytes.data(), 0x5a, 4096);
  CHECK(m.bytes[0] == std::byte{0x5a});
  CHECK(read_file(s.path) == on_disk);
  auto again = open_or_die(s.path)->mapped_leaf(0);
  REQUIRE(again.ok());
  CHECK(same(again->bytes, s.data[0]));
  // A new save to the same path writes a new file and renames it: the old mapping still holds
  // the old bytes.
  MappedLeaf before = std::move(*again);
  save_leaves(s.path, {{DType::kFloat32, {64, 64}, {}}}, 99);
  CHECK(same(before.bytes, s.data[0]));
  auto after = open_or_die(s.path)->mapped_leaf(0);
  REQUIRE(after.ok());
  CHECK_FALSE(same(after->bytes, s.data[0]));
}

TEST_CASE("each call maps anew: a write into one call's leaf is not seen by the next call") {
  TempDir dir;
  const Saved s = save_leaves(dir.file("w.jtree"), {{DType::kFloat32, {64, 64}, {}},
                                                    {DType::kInt16, {300, 40}, {}}});
  auto r = open_or_die(s.path);
  const uint32_t both[] = {0, 1};
  auto first = r->map_leaves(both);
  REQUIRE(first.ok());
  REQUIRE((*first)[0]);
  REQUIRE((*first)[1]);
  std::memset((*first)[0].bytes.data(), 0x5a, (*first)[0].bytes.size());
  // The same Reader, later calls: verified (no false Corruption) and the file's bytes.
  auto again = r->map_leaves(both);
  REQUIRE(again.ok());
  CHECK(same((*again)[0].bytes, s.data[0]));
  CHECK(same((*again)[1].bytes, s.data[1]));
  auto one = r->mapped_leaf(0);
  REQUIRE(one.ok());
  CHECK(same(one->bytes, s.data[0]));
  CHECK((*first)[0].bytes[0] == std::byte{0x5a});  // the first call's view keeps its write
}

TEST_CASE("a damaged chunk of a mapped leaf is Corruption naming it; verify off maps it as is") {
  TempDir dir;
  const Saved s = save_leaves(dir.file("d.jtree"), {{DType::kUInt8, {100, 50}, {}},
                                                   {DType::kUInt8, {100, 50}, {}}});
  uint64_t victim = 0;
  {
    auto r = open_or_die(s.path);
    const Leaf& l = r->leaf(1);
    REQUIRE(Tree::chunk_count(l) > 2);
    victim = r->chunk(l.first_chunk + 2).file_offset + 3;
  }
  auto bytes = read_file(s.path);
  bytes[victim] ^= std::byte{0x01};
  write_file(s.path, bytes);
  auto r = open_or_die(s.path);
  const std::vector<uint32_t> both = {0, 1};
  auto m = r->map_leaves(both);
  REQUIRE_FALSE(m.ok());
  CHECK(m.status().code() == StatusCode::kCorruption);
  CHECK(m.status().message().find("leaf l1: chunk 2: checksum mismatch") != std::string::npos);
  ReadOptions unchecked;
  unchecked.verify_checksums = false;
  auto raw = r->map_leaves(both, unchecked);
  REQUIRE(raw.ok());
  REQUIRE((*raw)[1]);
  CHECK_FALSE(same((*raw)[1].bytes, s.data[1]));  // what the file holds, damage included
  CHECK(same((*raw)[0].bytes, s.data[0]));
}

TEST_CASE("compact keeps raw leaves stored as their array") {
  TempDir dir;
  const Saved s = save_leaves(dir.file("c.jtree"), {{DType::kFloat32, {33, 17}, {}},
                                                   {DType::kInt16, {5, 6, 7}, {1, 3, 7}},
                                                   {DType::kUInt8, {3000}, {}}});
  auto st = compact(s.path, dir.file("out.jtree"));
  REQUIRE_MESSAGE(st.ok(), st.status().to_string());
  auto r = open_or_die(dir.file("out.jtree"));
  const auto leaves = all_leaves(*r);
  auto mapped = r->map_leaves(leaves);
  REQUIRE_MESSAGE(mapped.ok(), mapped.status().to_string());
  for (size_t i = 0; i < leaves.size(); ++i) {
    CAPTURE(i);
    REQUIRE(Tree::chunk_count(r->leaf(leaves[i])) > 1);
    REQUIRE((*mapped)[i]);
    CHECK(same((*mapped)[i].bytes, s.data[i]));
  }
  auto report = r->verify();
  REQUIRE(report.ok());
  CHECK(report->ok());
}

namespace {

// The elements of `box` of a C-order array of `shape` (`item` bytes each), gathered from
// `base` (the leaf's first byte) at the array's strides, in C order.
std::vector<std::byte> gather_box(const std::byte* base, const Shape& shape, const Box& box,
                                  uint64_t item) {
  std::vector<std::byte> out;
  const size_t rank = shape.size();
  for (size_t d = 0; d < rank; ++d) {
    if (box.begin[d] == box.end[d]) return out;
  }
  Shape g = box.begin;
  while (true) {
    uint64_t off = 0, stride = item;
    for (size_t d = rank; d-- > 0;) {
      off += g[d] * stride;
      stride *= shape[d];
    }
    out.insert(out.end(), base + off, base + off + item);
    size_t d = rank;
    while (d > 0 && ++g[d - 1] == box.end[d - 1]) {
      g[d - 1] = box.begin[d - 1];
      --d;
    }
    if (d == 0) return out;
  }
}

// The box's elements as mapped_box() gives them: from `m.bytes.data()` at the leaf's strides.
std::vector<std::byte> box_elements(const MappedLeaf& m, const Shape& shape, const Box& box,
                                    uint64_t item) {
  // (bytes.data() is the box's first element: gather from a base moved back by its offset.)
  uint64_t first = 0, stride = item;
  for (size_t d = shape.size(); d-- > 0;) {
    first += box.begin[d] * stride;
    stride *= shape[d];
  }
  return gather_box(m.bytes.data() - first, shape, box, item);
}

}  // namespace

TEST_CASE("mapped_box views a box in place, verifying only the chunks it overlaps") {
  TempDir dir;
  // 100 rows of 50 bytes in chunks of 20 rows (target 1000 bytes): 5 chunks.
  const Saved s = save_leaves(dir.file("b.jtree"), {{DType::kUInt8, {100, 50}, {}}});
  auto r = open_or_die(s.path);
  const Leaf& l = r->leaf(0);
  REQUIRE(l.chunk_shape == Shape{20, 50});
  REQUIRE(Tree::chunk_count(l) == 5);
  auto whole = r->mapped_leaf(0);
  REQUIRE(whole.ok());
  REQUIRE(*whole);
  struct Case {
    Box box;
    uint64_t chunks;
  };
  const std::vector<Case> cases = {
      {{{3, 0}, {10, 50}}, 1},     // rows inside one chunk
      {{{15, 0}, {25, 50}}, 2},    // across one chunk boundary
      {{{15, 7}, {45, 9}}, 3},     // columns 7-8 of rows over three chunks: a strided box
      {{{40, 0}, {60, 50}}, 1},    // exactly one chunk
      {{{0, 0}, {100, 50}}, 5},    // the whole leaf
  };
  for (const Case& c : cases) {
    CAPTURE(c.box.begin[0]);
    CAPTURE(c.box.end[0]);
    auto m = r->mapped_box(0, c.box);
    REQUIRE_MESSAGE(m.ok(), m.status().to_string());
    REQUIRE(*m);
    // From the box's first element up to its last.
    const uint64_t first = c.box.begin[0] * 50 + c.box.begin[1];
    const uint64_t last = (c.box.end[0] - 1) * 50 + c.box.end[1] - 1;
    CHECK(m->bytes.size() == last + 1 - first);
    CHECK(box_elements(*m, l.shape, c.box, 1) ==
          gather_box(s.data[0].data(), l.shape, c.box, 1));
    // The overlapped chunks are what the grid says.
    Shape lo, hi;
    format::ChunkGrid::of(l).overlapping(c.box, lo, hi);
    CHECK(hi[0] - lo[0] == c.chunks);
  }
}

TEST_CASE("mapped_box over a grid cut inside rows, of every item size") {
  TempDir dir;
  const Saved s = save_leaves(dir.file("g.jtree"), {{DType::kInt16, {5, 6, 7}, {1, 3, 7}},
                                                   {DType::kFloat64, {2, 3, 4, 5}, {1, 1, 2, 5}},
                                                   {DType::kBFloat16, {1000}, {}}});
  auto r = open_or_die(s.path);
  const std::vector<std::pair<uint32_t, Box>> boxes = {
      {0, {{1, 2, 0}, {3, 4, 7}}},  // chunks (1,0),(1,1),(2,0),(2,1): not a contiguous run
      {0, {{4, 5, 6}, {5, 6, 7}}},  // the last element
      {1, {{1, 0, 1, 2}, {2, 3, 4, 3}}},
      {2, {{123}, {789}}},
  };
  for (const auto& [i, box] : boxes) {
    CAPTURE(i);
    const uint32_t leaf = *r->find_leaf("l" + std::to_string(i));
    const Leaf& l = r->leaf(leaf);
    const uint64_t item = dtype_info(l.dtype)->item_size;
    auto m = r->mapped_box(leaf, box);
    REQUIRE_MESSAGE(m.ok(), m.status().to_string());
    REQUIRE(*m);
    CHECK(reinterpret_cast<uintptr_t>(m->bytes.data()) % item == 0);
    CHECK(box_elements(*m, l.shape, box, item) == gather_box(s.data[i].data(), l.shape, box, item));
  }
}

TEST_CASE("mapped_box: a damaged chunk inside the box is Corruption, one outside is not read") {
  TempDir dir;
  const Saved s = save_leaves(dir.file("d.jtree"), {{DType::kUInt8, {100, 50}, {}}});
  uint64_t victim = 0;
  {
    auto r = open_or_die(s.path);
    REQUIRE(Tree::chunk_count(r->leaf(0)) == 5);
    victim = r->chunk(r->leaf(0).first_chunk + 2).file_offset + 3;  // chunk 2: rows 40-59
  }
  auto bytes = read_file(s.path);
  bytes[victim] ^= std::byte{0x01};
  write_file(s.path, bytes);
  auto r = open_or_die(s.path);
  const Shape shape = r->leaf(0).shape;
  // Boxes that do not overlap chunk 2 verify and read right.
  for (const Box& box : {Box{{0, 0}, {40, 50}}, Box{{60, 3}, {100, 4}}, Box{{39, 0}, {40, 50}}}) {
    auto m = r->mapped_box(0, box);
    REQUIRE_MESSAGE(m.ok(), m.status().to_string());
    CHECK(box_elements(*m, shape, box, 1) == gather_box(s.data[0].data(), shape, box, 1));
  }
  // A box that overlaps it, even by one element far from the damaged byte, fails naming it.
  for (const Box& box : {Box{{30, 0}, {41, 50}}, Box{{59, 49}, {60, 50}}}) {
    auto m = r->mapped_box(0, box);
    REQUIRE_FALSE(m.ok());
    CHECK(m.status().code() == StatusCode::kCorruption);
    CHECK(m.status().message().find("leaf l0: chunk 2: checksum mismatch") != std::string::npos);
  }
  // verify off: the bytes as the file holds them, damage included.
  ReadOptions unchecked;
  unchecked.verify_checksums = false;
  const Box all{{0, 0}, {100, 50}};
  auto raw = r->mapped_box(0, all, unchecked);
  REQUIRE(raw.ok());
  REQUIRE(*raw);
  CHECK(raw->bytes.size() == 5000);
  CHECK_FALSE(same(raw->bytes, s.data[0]));
  CHECK(raw->bytes[40 * 50 + 3] == (s.data[0][40 * 50 + 3] ^ std::byte{0x01}));
}

TEST_CASE("mapped_box: empty boxes, bad boxes and leaves that do not map") {
  TempDir dir;
  const Saved s = save_leaves(dir.file("e.jtree"),
                              {{DType::kFloat32, {33, 17}, {}},
                               {DType::kUInt8, {4000}, {}, Codec::kZstd, true}});
  auto r = open_or_die(s.path);
  auto empty = r->mapped_box(0, Box{{5, 3}, {5, 17}});
  REQUIRE(empty.ok());
  CHECK(*empty);  // the leaf maps: nothing to view
  CHECK(empty->bytes.empty());
  // A compressed leaf does not map: empty, for read_box to decode instead.
  auto packed = r->mapped_box(1, Box{{0}, {10}});
  REQUIRE(packed.ok());
  CHECK_FALSE(*packed);
  auto wrong_rank = r->mapped_box(0, Box{{0}, {1}});
  CHECK(wrong_rank.status().code() == StatusCode::kInvalidArgument);
  CHECK(wrong_rank.status().message().find("slice of rank 1 for an array of rank 2") !=
        std::string::npos);
  auto outside = r->mapped_box(0, Box{{0, 0}, {34, 17}});
  CHECK(outside.status().code() == StatusCode::kInvalidArgument);
  CHECK(outside.status().message().find("leaf l0: slice [0:34] out of bounds for dimension 0") !=
        std::string::npos);
  CHECK(r->mapped_box(9, Box{}).status().code() == StatusCode::kInvalidArgument);
  // No mapping (use_mmap off): empty.
  OpenOptions no_map;
  no_map.use_mmap = false;
  auto unmapped = Reader::open(s.path, no_map);
  REQUIRE(unmapped.ok());
  auto m = (*unmapped)->mapped_box(0, Box{{0, 0}, {1, 17}});
  REQUIRE(m.ok());
  CHECK_FALSE(*m);
}

TEST_CASE("a mapped box is private and outlives the Reader") {
  TempDir dir;
  const Saved s = save_leaves(dir.file("p.jtree"), {{DType::kFloat32, {64, 64}, {}}});
  const auto on_disk = read_file(s.path);
  MappedLeaf m;
  {
    auto got = open_or_die(s.path)->mapped_box(0, Box{{10, 0}, {20, 64}});
    REQUIRE(got.ok());
    REQUIRE(*got);
    m = std::move(*got);
  }
  CHECK(std::equal(m.bytes.begin(), m.bytes.end(), s.data[0].begin() + 10 * 64 * 4));
  std::memset(m.bytes.data(), 0x5a, m.bytes.size());
  CHECK(read_file(s.path) == on_disk);
  // Each box is a mapping of its own: writing into one (or into the whole mapped leaf) changes
  // no other, and later boxes of the same Reader still verify and hold the file's bytes.
  auto r = open_or_die(s.path);
  auto whole = r->mapped_leaf(0);
  auto a = r->mapped_box(0, Box{{0, 0}, {30, 64}});
  REQUIRE((whole.ok() && a.ok() && *whole && *a));
  std::memset(whole->bytes.data(), 0x11, whole->bytes.size());
  std::memset(a->bytes.data(), 0x22, a->bytes.size());
  auto b = r->mapped_box(0, Box{{5, 0}, {25, 64}});
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  CHECK(std::equal(b->bytes.begin(), b->bytes.end(), s.data[0].begin() + 5 * 64 * 4));
  CHECK(a->bytes[0] == std::byte{0x22});
  CHECK(whole->bytes[0] == std::byte{0x11});
  CHECK(read_file(s.path) == on_disk);
}

TEST_CASE("mapped_chunk views a box that is exactly one raw chunk of a tiled grid") {
  TempDir dir;
  // Column tiles (a grid cut along the last dimension): mapped_box cannot map the leaf.
  const Saved s = save_leaves(dir.file("t.jtree"), {{DType::kFloat32, {12, 20}, {6, 5}},
                                                   {DType::kUInt8, {4000}, {}, Codec::kZstd,
                                                    true}});
  auto r = open_or_die(s.path);
  const Leaf& l = r->leaf(0);
  auto not_whole = r->mapped_box(0, Box{{0, 5}, {6, 10}});
  REQUIRE(not_whole.ok());
  REQUIRE_FALSE(*not_whole);
  for (const Box& box : {Box{{0, 5}, {6, 10}}, Box{{6, 15}, {12, 20}}, Box{{0, 0}, {6, 5}}}) {
    CAPTURE(box.begin[1]);
    auto m = r->mapped_chunk(0, box);
    REQUIRE_MESSAGE(m.ok(), m.status().to_string());
    REQUIRE(*m);
    // The box's own C-order array: its elements back to back.
    CHECK(m->bytes.size() == box.num_elements() * 4);
    const auto want = gather_box(s.data[0].data(), l.shape, box, 4);
    CHECK(std::memcmp(m->bytes.data(), want.data(), want.size()) == 0);
  }
  // Part of a chunk, two chunks, a compressed leaf: nothing mapped (read instead).
  for (const Box& box : {Box{{0, 5}, {3, 10}}, Box{{0, 5}, {12, 10}}, Box{{0, 0}, {6, 10}}}) {
    auto m = r->mapped_chunk(0, box);
    REQUIRE(m.ok());
    CHECK_FALSE(*m);
  }
  auto packed = r->mapped_chunk(1, Box{{0}, {4000}});
  REQUIRE(packed.ok());
  CHECK_FALSE(*packed);
  CHECK(r->mapped_chunk(0, Box{{0, 0}, {13, 5}}).status().code() ==
        StatusCode::kInvalidArgument);
  // A damaged chunk is Corruption naming the leaf; unverified it maps.
  const uint64_t victim = r->chunk(l.first_chunk + 1).file_offset + 2;  // tile (0, 1)
  auto bytes = read_file(s.path);
  bytes[victim] ^= std::byte{0x10};
  write_file(s.path, bytes);
  auto damaged = open_or_die(s.path);
  auto bad = damaged->mapped_chunk(0, Box{{0, 5}, {6, 10}});
  REQUIRE(bad.status().code() == StatusCode::kCorruption);
  CHECK(bad.status().message().find("l0") != std::string::npos);
  ReadOptions unverified;
  unverified.verify_checksums = false;
  auto m = damaged->mapped_chunk(0, Box{{0, 5}, {6, 10}}, unverified);
  REQUIRE(m.ok());
  CHECK(*m);
}
