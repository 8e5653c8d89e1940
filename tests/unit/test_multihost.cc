// Many processes, one file: segment saves and the commit that merges them.
#include <filesystem>

#include <doctest/doctest.h>

#include "format/chunk_grid.h"
#include "test_util.h"
#include "util/box_copy.h"

using namespace jtree;
using namespace jtree::testing;

namespace {

constexpr uint32_t kProcs = 4;

// The global arrays of the test save, and which part each process holds.
struct Global {
  std::vector<std::byte> a = random_array(DType::kFloat32, 64 * 48, 1);   // rows split 4 ways
  std::vector<std::byte> b = random_array(DType::kBFloat16, 32 * 40, 2);  // columns split 4 ways
  std::vector<std::byte> c = random_array(DType::kInt32, 16 * 16, 3);     // 2 x 2 blocks
  std::vector<std::byte> r = random_array(DType::kFloat64, 1000, 4);      // replicated
};

// A copy of the shard `box` of a C-order array (what a device would hold).
std::vector<std::byte> shard_of(const std::vector<std::byte>& full, const Shape& shape,
                                const Box& box, size_t item) {
  std::vector<std::byte> out(box.num_elements() * item);
  copy_region(full.data(), shape, box.begin, out.data(), box.shape(), Shape(shape.size(), 0),
              box.shape(), item);
  return out;
}

struct Process {
  std::vector<std::vector<std::byte>> buffers;  // the shards' data, kept alive for the save

  Leaf sharded(DType dtype, const Shape& shape, const Shape& shard_shape,
               const std::vector<std::byte>& full, const std::vector<Box>& boxes) {
    auto in = std::make_shared<LeafInput>();
    in->shard_shape = shard_shape;
    in->shards.emplace();
    const size_t item = dtype_info(dtype)->item_size;
    for (const Box& box : boxes) {
      buffers.push_back(shard_of(full, shape, box, item));
      in->shards->push_back({box, ArrayView{buffers.back().data()}});
    }
    Leaf l;
    l.kind = LeafKind::kArray;
    l.dtype = dtype;
    l.shape = shape;
    l.storage = Storage::kChunked;
    l.input = std::move(in);
    return l;
  }

  // The tree process k saves; `holds(k)` decides which shards it has.
  Tree tree(const Global& g, uint32_t k, const std::function<bool(uint32_t, uint32_t)>& holds) {
    TreeBuilder b;
    b.dict();
    std::vector<Box> a_boxes, b_boxes, c_boxes;
    for (uint32_t s = 0; s < 4; ++s) {
      if (holds(k, s)) {
        a_boxes.push_back({{16ull * s, 0}, {16ull * (s + 1), 48}});
        b_boxes.push_back({{0, 10ull * s}, {32, 10ull * (s + 1)}});
        c_boxes.push_back({{8ull * (s / 2), 8ull * (s % 2)}, {8ull * (s / 2 + 1), 8ull * (s % 2 + 1)}});
      }
    }
    b.key("a").leaf(sharded(DType::kFloat32, {64, 48}, {16, 48}, g.a, a_boxes));
    b.key("b").leaf(sharded(DType::kBFloat16, {32, 40}, {32, 10}, g.b, b_boxes));
    b.key("c").leaf(sharded(DType::kInt32, {16, 16}, {8, 8}, g.c, c_boxes));
    // Replicated: process 0 writes it; the others hold none of it.
    Leaf r;
    r.kind = LeafKind::kArray;
    r.dtype = DType::kFloat64;
    r.shape = {1000};
    r.storage = Storage::kChunked;
    auto in = std::make_shared<LeafInput>();
    if (k == 0) in->source = ArrayView{g.r.data()};
    else in->shards.emplace();
    r.input = std::move(in);
    b.key("r").leaf(r);
    b.key("step").int_value(42);
    b.key("name").str("multi");
    b.end();
    auto t = std::move(b).finish();
    REQUIRE(t.ok());
    return std::move(*t);
  }
};

WriteOptions small_chunks() {
  WriteOptions wo;
  wo.target_chunk_bytes = 1024;  // several chunks per shard
  wo.inline_threshold = 0;
  return wo;
}

bool owner_k(uint32_t k, uint32_t s) { return s == k; }

void save_all(const std::string& target, const Global& g, uint64_t save_id,
              const std::function<bool(uint32_t, uint32_t)>& holds = owner_k) {
  for (uint32_t k = 0; k < kProcs; ++k) {
    Process p;
    auto st = save_segment(p.tree(g, k, holds), target, {k, kProcs, save_id}, small_chunks());
    REQUIRE_MESSAGE(st.ok(), st.status().to_string());
  }
}

std::vector<std::byte> read_leaf(const Reader& r, const char* path) {
  const uint32_t l = *r.find_leaf(path);
  std::vector<std::byte> out(r.tree().leaves[l].memory_bytes());
  REQUIRE(r.read(l, out).ok());
  return out;
}

}  // namespace

TEST_CASE("four segments commit into one checkpoint that loads bit-exact") {
  TempDir dir;
  const std::string target = dir.file("ckpt.jtree");
  Global g;
  save_all(target, g, 77);
  CHECK(dir.entries().size() == kProcs);
  {  // A segment file is a valid file of its own; chunks of other processes are absent.
    auto seg = Reader::open(segment_path(target, 1, kProcs));
    REQUIRE(seg.ok());
    CHECK((*seg)->info().is_segment);
    CHECK((*seg)->info().process_index == 1);
    std::vector<std::byte> buf(64 * 48 * 4);
    CHECK((*seg)->read(*(*seg)->find_leaf("a"), buf).is_not_found());
    std::vector<std::byte> rows(16 * 48 * 4);
    CHECK((*seg)->read_box(*(*seg)->find_leaf("a"), {{16, 0}, {32, 48}}, rows).ok());
  }
  auto st = commit_segments(target, kProcs);
  REQUIRE_MESSAGE(st.ok(), st.status().to_string());
  CHECK(dir.entries() == std::vector<std::string>{"ckpt.jtree"});  // segments removed
  auto r = Reader::open(target);
  REQUIRE(r.ok());
  CHECK_FALSE((*r)->info().is_segment);
  CHECK((*r)->info().segments.size() == kProcs);
  CHECK(read_leaf(**r, "a") == g.a);
  CHECK(read_leaf(**r, "b") == g.b);
  CHECK(read_leaf(**r, "c") == g.c);
  CHECK(read_leaf(**r, "r") == g.r);
  CHECK((*r)->tree().leaves[*(*r)->find_leaf("step")].int_value == 42);
  auto rep = (*r)->verify();
  REQUIRE(rep.ok());
  CHECK(rep->ok());
  // Chunk grids follow the shards: every chunk of "b" lies in one 10-column shard.
  const Leaf& lb = (*r)->tree().leaves[*(*r)->find_leaf("b")];
  CHECK(10 % lb.chunk_shape[1] == 0);
}

TEST_CASE("the commit copies whole blocks: segment 0 with the checkpoint head, then the data") {
  TempDir dir;
  const std::string target = dir.file("ckpt.jtree");
  Global g;
  save_all(target, g, 78);
  std::vector<FileInfo> segs;
  for (uint32_t k = 0; k < kProcs; ++k) {
    segs.push_back((*Reader::open(segment_path(target, k, kProcs)))->info());
  }
  // Only segment 0 carries the checkpoint's head, between its own header and its data.
  const uint64_t h = segs[0].checkpoint_head_offset;
  CHECK(h % 64 == 0);
  CHECK(h >= segs[0].header_offset + segs[0].header_size);
  CHECK(segs[0].segments[0].file_offset >= h + 128 + segs[0].header_size);
  for (uint32_t k = 1; k < kProcs; ++k) CHECK(segs[k].checkpoint_head_offset == 0);
  const auto seg0 = read_file(segment_path(target, 0, kProcs));

  CommitOptions keep;
  keep.keep_segments = true;
  REQUIRE(commit_segments(target, kProcs, keep).ok());
  auto r = Reader::open(target);
  REQUIRE(r.ok());
  const FileInfo& out = (*r)->info();
  REQUIRE(out.segments.size() == kProcs);
  // The checkpoint starts with segment 0's block from its head on, byte for byte...
  const uint64_t d0 = segs[0].segments[0].file_offset;
  CHECK(out.segments[0].file_offset == d0 - h);
  const auto file = read_file(target);
  CHECK(std::equal(file.begin(), file.begin() + static_cast<ptrdiff_t>(d0 - h),
                   seg0.begin() + static_cast<ptrdiff_t>(h)));
  // ...and each next segment follows the previous one's data padded to 64 bytes: nothing
  // is written between blocks (on S3, each block is one server-side copy).
  for (uint32_t k = 1; k < kProcs; ++k) {
    const SegmentSpan& prev = out.segments[k - 1];
    CHECK(out.segments[k].file_offset == prev.file_offset + (prev.size + 63) / 64 * 64);
    CHECK(out.segments[k].salt == segs[k].segments[0].salt);
  }
  CHECK(read_leaf(**r, "a") == g.a);
  auto rep = (*r)->verify();
  REQUIRE(rep.ok());
  CHECK(rep->ok());
}

TEST_CASE("commit failures leave no target and say what is wrong") {
  TempDir dir;
  const std::string target = dir.file("ckpt.jtree");
  Global g;
  SUBCASE("a missing segment") {
    save_all(target, g, 1);
    std::filesystem::remove(segment_path(target, 2, kProcs));
    auto st = commit_segments(target, kProcs);
    CHECK(st.status().is_not_found());
    CHECK(st.status().message().find("segment 2 of 4") != std::string::npos);
  }
  SUBCASE("a shard written by two processes") {
    save_all(target, g, 1, [](uint32_t k, uint32_t s) { return s == k || (k == 3 && s == 0); });
    auto st = commit_segments(target, kProcs);
    CHECK(st.status().is_corruption());
    CHECK(st.status().message().find("is in segments 0 and 3") != std::string::npos);
  }
  SUBCASE("a shard written by nobody") {
    save_all(target, g, 1, [](uint32_t k, uint32_t s) { return s == k && s != 2; });
    auto st = commit_segments(target, kProcs);
    CHECK(st.status().is_corruption());
    CHECK(st.status().message().find("is in no segment") != std::string::npos);
  }
  SUBCASE("a segment left over from another save") {
    save_all(target, g, 1);
    Process p;
    REQUIRE(save_segment(p.tree(g, 3, owner_k), target, {3, kProcs, 999}, small_chunks()).ok());
    auto st = commit_segments(target, kProcs);
    CHECK(st.status().message().find("belongs to another save") != std::string::npos);
  }
  SUBCASE("a damaged segment") {
    save_all(target, g, 1);
    const std::string seg = segment_path(target, 1, kProcs);
    auto bytes = read_file(seg);
    bytes[200] ^= std::byte{1};  // inside the header
    write_file(seg, bytes);
    auto st = commit_segments(target, kProcs);
    CHECK(st.status().is_corruption());
    CHECK(st.status().message().find(seg) != std::string::npos);
  }
  SUBCASE("a damaged copy of the checkpoint head in segment 0") {
    save_all(target, g, 1);
    const std::string seg = segment_path(target, 0, kProcs);
    const uint64_t h = (*Reader::open(seg))->info().checkpoint_head_offset;
    REQUIRE(h > 0);
    auto bytes = read_file(seg);
    bytes[h + 130] ^= std::byte{1};  // inside the copy of the header: no segment checksum covers it
    write_file(seg, bytes);
    REQUIRE(Reader::open(seg).ok());
    auto st = commit_segments(target, kProcs);
    CHECK(st.status().is_corruption());
    CHECK(st.status().message().find(seg + ": at " + std::to_string(h) +
                                     ": the copy of the checkpoint head") != std::string::npos);
  }
  CHECK_FALSE(std::filesystem::exists(target));
}

TEST_CASE("a commit can be run again; segments can be kept; data can be verified") {
  TempDir dir;
  const std::string target = dir.file("ckpt.jtree");
  Global g;
  save_all(target, g, 5);
  CommitOptions keep;
  keep.keep_segments = true;
  keep.verify_chunks = true;
  auto first = commit_segments(target, kProcs, keep);
  REQUIRE_MESSAGE(first.ok(), first.status().to_string());
  CHECK(dir.entries().size() == kProcs + 1);
  // Run again (as after a crash between the rename and the clean-up): same result.
  REQUIRE(commit_segments(target, kProcs).ok());
  CHECK(dir.entries() == std::vector<std::string>{"ckpt.jtree"});
  CHECK(read_leaf(**Reader::open(target), "c") == g.c);
}

TEST_CASE("one process holding every shard saves a complete file; gaps are refused") {
  TempDir dir;
  Global g;
  Process all;
  auto st = save(all.tree(g, 0, [](uint32_t, uint32_t) { return true; }), dir.file("one.jtree"),
                 small_chunks());
  REQUIRE_MESSAGE(st.ok(), st.status().to_string());
  CHECK(read_leaf(**Reader::open(dir.file("one.jtree")), "b") == g.b);
  Process some;
  auto gap = save(some.tree(g, 0, [](uint32_t, uint32_t s) { return s != 1; }),
                  dir.file("gap.jtree"), small_chunks());
  CHECK(gap.status().is_invalid_argument());
  CHECK(gap.status().message().find("no data") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir.file("gap.jtree")));
}

TEST_CASE("chunk shapes must follow the shards") {
  TempDir dir;
  std::vector<std::byte> data(64 * 4);
  auto in = std::make_shared<LeafInput>();
  in->shard_shape = {16};
  in->shards = std::vector<Shard>{{Box{{0}, {16}}, ArrayView{data.data()}}};
  in->options.chunk_shape = {12};  // does not divide 16
  Leaf l;
  l.kind = LeafKind::kArray;
  l.dtype = DType::kFloat32;
  l.shape = {64};
  l.storage = Storage::kChunked;
  l.input = in;
  TreeBuilder b;
  b.dict().key("x").leaf(l).end();
  auto st = save_segment(std::move(*std::move(b).finish()), dir.file("t.jtree"), {0, 4, 1});
  CHECK(st.status().is_invalid_argument());
  CHECK(st.status().message().find("does not divide the shard extent") != std::string::npos);
}

TEST_CASE("a multi-process save of a version-2 dtype commits as a version-2 file") {
  // The segments, the copy of the checkpoint head in segment 0 and the commit all carry
  // min_read_version 2 (FORMAT.md 6.3); a save without such a dtype stays at version 1.
  TempDir dir;
  const std::string target = dir.file("v2.jtree");
  const auto full = random_array(DType::kFloat8E4M3B11FNUZ, 64 * 32, 9);
  for (uint32_t k = 0; k < 2; ++k) {
    Process p;
    TreeBuilder b;
    b.dict();
    b.key("w").leaf(p.sharded(DType::kFloat8E4M3B11FNUZ, {64, 32}, {32, 32}, full,
                              {Box{{32ull * k, 0}, {32ull * (k + 1), 32}}}));
    b.end();
    auto t = std::move(b).finish();
    REQUIRE(t.ok());
    auto st = save_segment(std::move(*t), target, {k, 2, 5}, small_chunks());
    REQUIRE_MESSAGE(st.ok(), st.status().to_string());
    auto seg = Reader::open(segment_path(target, k, 2));
    REQUIRE(seg.ok());
    CHECK((*seg)->info().min_read_version == 2);
  }
  REQUIRE(commit_segments(target, 2).ok());
  auto r = Reader::open(target);
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  CHECK((*r)->info().min_read_version == 2);
  CHECK((*r)->info().min_write_version == 2);
  CHECK(read_leaf(**r, "w") == full);
  CHECK((*r)->verify()->ok());
  // Version 1 stays version 1 through the same path.
  const std::string v1 = dir.file("v1.jtree");
  Global g;
  save_all(v1, g, 6);
  REQUIRE(commit_segments(v1, kProcs).ok());
  CHECK((*Reader::open(v1))->info().min_read_version == 1);
}

TEST_CASE("a commit never replaces a file that is not a jtree file unless asked") {
  TempDir dir;
  const std::string target = dir.file("notes.txt");
  const std::string text = "precious notes, not a checkpoint\n";
  write_file(target, std::as_bytes(std::span(text)));
  Global g;
  save_all(target, g, 91);
  auto st = commit_segments(target, kProcs);
  REQUIRE_FALSE(st.ok());
  CHECK(st.status().code() == StatusCode::kAlreadyExists);
  CHECK(st.status().message().find("notes.txt: exists and is not a jtree file") !=
        std::string::npos);
  CHECK(read_file(target).size() == text.size());
  // Nothing was read or removed: the segments wait for a forced commit.
  CHECK(dir.entries().size() == kProcs + 1);
  CommitOptions force;
  force.write.overwrite_foreign = true;
  auto forced = commit_segments(target, kProcs, force);
  REQUIRE_MESSAGE(forced.ok(), forced.status().to_string());
  auto r = Reader::open(target);
  REQUIRE(r.ok());
  CHECK(read_leaf(**r, "a") == g.a);
  CHECK(dir.entries() == std::vector<std::string>{"notes.txt"});
}

namespace {

// np.array_split's boxes of `n` into `k` parts (the first n % k one longer).
std::vector<std::pair<uint64_t, uint64_t>> array_split(uint64_t n, uint64_t k) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  uint64_t at = 0;
  for (uint64_t i = 0; i < k; ++i) {
    const uint64_t len = n / k + (i < n % k ? 1 : 0);
    out.push_back({at, at + len});
    at += len;
  }
  return out;
}

// A leaf of `shape` split into `blocks`, process k holding blocks[j] for j % procs == k; every
// process is told all the blocks (LeafInput::blocks), as Python passes them.
Leaf uneven_leaf(Process& p, DType dtype, const Shape& shape, const std::vector<std::byte>& full,
                 const std::vector<Box>& blocks, uint32_t k, uint32_t procs) {
  std::vector<Box> mine;
  for (size_t j = 0; j < blocks.size(); ++j) {
    if (j % procs == k) mine.push_back(blocks[j]);
  }
  Leaf l = p.sharded(dtype, shape, {}, full, mine);
  std::const_pointer_cast<LeafInput>(l.input)->blocks = blocks;
  return l;
}

}  // namespace

TEST_CASE("uneven splits get a rectilinear grid: few chunks, bit-exact whole and by slices") {
  TempDir dir;
  const std::string target = dir.file("uneven.jtree");
  const Shape sv = {100003}, st = {50257, 64}, s3 = {7, 1001, 13};
  const auto v = random_array(DType::kUInt16, 100003, 11);
  const auto t = random_array(DType::kFloat32, 50257 * 64, 12);
  const auto c = random_array(DType::kUInt8, 7 * 1001 * 13, 13);
  std::vector<Box> bv, bt, b3;
  for (auto [b, e] : array_split(100003, 4)) bv.push_back({{b}, {e}});
  for (auto [r0, r1] : array_split(50257, 4)) {
    for (auto [c0, c1] : array_split(64, 4)) bt.push_back({{r0, c0}, {r1, c1}});
  }
  for (auto [a0, a1] : array_split(7, 3)) {
    for (auto [b0, b1] : array_split(1001, 4)) b3.push_back({{a0, b0, 0}, {a1, b1, 13}});
  }
  constexpr uint32_t kP = 4;
  WriteOptions wo;
  wo.inline_threshold = 0;
  wo.target_chunk_bytes = 1 << 20;
  for (uint32_t k = 0; k < kP; ++k) {
    Process p;
    TreeBuilder b;
    b.dict();
    b.key("v").leaf(uneven_leaf(p, DType::kUInt16, sv, v, bv, k, kP));
    b.key("t").leaf(uneven_leaf(p, DType::kFloat32, st, t, bt, k, kP));
    b.key("c").leaf(uneven_leaf(p, DType::kUInt8, s3, c, b3, k, kP));
    b.end();
    auto tree = std::move(b).finish();
    REQUIRE(tree.ok());
    auto s = save_segment(std::move(*tree), target, {k, kP, 9}, wo);
    REQUIRE_MESSAGE(s.ok(), s.status().to_string());
  }
  REQUIRE(commit_segments(target, kP).ok());
  auto r = Reader::open(target);
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  CHECK((*r)->info().min_read_version == 2);
  CHECK(read_leaf(**r, "v") == v);
  CHECK(read_leaf(**r, "t") == t);
  CHECK(read_leaf(**r, "c") == c);
  CHECK((*r)->verify()->ok());
  // Chunk counts: at most the single-process grid's plus the number of blocks.
  struct Case {
    const char* name;
    Shape shape;
    DType dtype;
    size_t blocks;
  };
  // "v" splits 25001 x 3 + 25000: the regular grid of 25001 (last chunk clipped) fits it.
  const Leaf& leaf_v = (*r)->tree().leaves[*(*r)->find_leaf("v")];
  CHECK(leaf_v.chunk_shape == Shape{25001});
  for (const Case& cs : {Case{"v", sv, DType::kUInt16, bv.size()},
                         Case{"t", st, DType::kFloat32, bt.size()},
                         Case{"c", s3, DType::kUInt8, b3.size()}}) {
    const Leaf& l = (*r)->tree().leaves[*(*r)->find_leaf(cs.name)];
    const Shape single = format::default_chunk_shape(cs.shape, dtype_info(cs.dtype)->stored_bits,
                                                     wo.target_chunk_bytes);
    const uint64_t single_count = *format::grid_chunk_count(cs.shape, single);
    INFO(std::string(cs.name), " chunks ", Tree::chunk_count(l), " single ", single_count,
         " chunk shape rank ", l.chunk_shape.size(), " bounds ", l.chunk_bounds.size());
    CHECK(l.chunk_bounds.empty() == (cs.name == std::string("v")));
    CHECK(l.chunk_shape.empty() == (cs.name != std::string("v")));
    CHECK(Tree::chunk_count(l) <= single_count + cs.blocks);
  }
  // Slices across block and chunk boundaries.
  const uint32_t lt = *(*r)->find_leaf("t");
  const Box box{{12560, 10}, {37700, 50}};
  std::vector<std::byte> got(box.num_elements() * 4);
  REQUIRE((*r)->read_box(lt, box, got).ok());
  CHECK(got == shard_of(t, st, box, 4));
  const uint32_t lv = *(*r)->find_leaf("v");
  const Box vbox{{25000}, {75003}};
  std::vector<std::byte> vgot(vbox.num_elements() * 2);
  REQUIRE((*r)->read_box(lv, vbox, vgot).ok());
  CHECK(vgot == shard_of(v, sv, vbox, 2));
}

TEST_CASE("even splits told their blocks keep a regular grid and format version 1") {
  TempDir dir;
  const std::string target = dir.file("even.jtree");
  const auto a = random_array(DType::kFloat32, 64 * 48, 14);
  std::vector<Box> blocks;
  for (uint64_t s = 0; s < 4; ++s) blocks.push_back({{16 * s, 0}, {16 * (s + 1), 48}});
  for (uint32_t k = 0; k < 4; ++k) {
    Process p;
    TreeBuilder b;
    b.dict().key("a").leaf(uneven_leaf(p, DType::kFloat32, {64, 48}, a, blocks, k, 4)).end();
    auto s = save_segment(std::move(*std::move(b).finish()), target, {k, 4, 3}, small_chunks());
    REQUIRE_MESSAGE(s.ok(), s.status().to_string());
  }
  REQUIRE(commit_segments(target, 4).ok());
  auto r = Reader::open(target);
  REQUIRE(r.ok());
  CHECK((*r)->info().min_read_version == 1);
  const Leaf& l = (*r)->tree().leaves[0];
  CHECK(l.chunk_bounds.empty());
  CHECK(16 % l.chunk_shape[0] == 0);
  CHECK(read_leaf(**r, "a") == a);
}

TEST_CASE("block boxes of the wrong rank or outside the array are refused") {
  TempDir dir;
  std::vector<std::byte> data(64 * 4);
  for (const Box& bad : {Box{{0, 0}, {16, 1}}, Box{{0}, {65}}, Box{{9}, {3}}}) {
    auto in = std::make_shared<LeafInput>();
    in->source = ArrayView{data.data()};
    in->blocks = {Box{{0}, {16}}, bad};
    Leaf l;
    l.kind = LeafKind::kArray;
    l.dtype = DType::kFloat32;
    l.shape = {64};
    l.storage = Storage::kChunked;
    l.input = in;
    TreeBuilder b;
    b.dict().key("x").leaf(l).end();
    auto st = save(std::move(*std::move(b).finish()), dir.file("t.jtree"));
    CHECK(st.status().is_invalid_argument());
    CHECK(st.status().message().find("block box") != std::string::npos);
  }
  CHECK(dir.entries().empty());
}
