// A failed or refused save leaves any previous file intact and nothing else behind.
#include <doctest/doctest.h>

#include <functional>

#include "test_util.h"

using namespace jtree;
using namespace jtree::testing;

namespace {

Tree small_tree(const std::vector<std::byte>& data) {
  TreeBuilder b;
  b.dict().key("x").array(DType::kUInt8, {data.size()}, ArrayView{data.data()}).end();
  return std::move(*std::move(b).finish());
}

}  // namespace

TEST_CASE("failing producer, cancelled progress and refused targets keep the old file") {
  TempDir dir;
  const std::string path = dir.file("p.jtree");
  auto data = random_bytes(3 << 20, 1);
  REQUIRE(save(small_tree(data), path).ok());
  const auto original = read_file(path);

  TreeBuilder b;
  b.dict().key("x").array(DType::kUInt8, {1 << 22}, FillFn([](const Box& box, std::span<std::byte>) {
    return box.begin[0] > 0 ? Status::io_error("disk of the producer failed") : Status::success();
  })).end();
  WriteOptions wo;
  wo.target_chunk_bytes = 1 << 20;
  CHECK_FALSE(save(std::move(*std::move(b).finish()), path, wo).ok());
  CHECK(read_file(path) == original);

  WriteOptions cancel;
  cancel.target_chunk_bytes = 1 << 20;
  cancel.progress = [](uint64_t done, uint64_t) { return done < (1 << 20); };
  auto st = save(small_tree(data), path, cancel);
  CHECK(st.status().code() == StatusCode::kAborted);
  CHECK(read_file(path) == original);

  WriteOptions no_overwrite;
  no_overwrite.overwrite = false;
  CHECK(save(small_tree(data), path, no_overwrite).status().code() ==
        StatusCode::kAlreadyExists);
  CHECK(read_file(path) == original);

  // A reused leaf belongs to appends: a new file has nothing to reuse.
  TreeBuilder reuse;
  reuse.dict().key("kept").leaf(Leaf::reused(0)).end();
  auto refused = save(std::move(*std::move(reuse).finish()), path);
  CHECK(refused.status().code() == StatusCode::kInvalidArgument);
  CHECK(refused.status().message().find("leaf kept: reuses a leaf of an existing file") !=
        std::string::npos);
  CHECK(read_file(path) == original);
  CHECK(dir.entries() == std::vector<std::string>{"p.jtree"});
}

TEST_CASE("a file that is not a jtree file is not replaced unless asked") {
  TempDir dir;
  const std::string path = dir.file("notes.txt");
  std::string text = "precious notes\n";
  write_file(path, std::as_bytes(std::span(text)));
  auto data = random_bytes(100, 2);
  auto st = save(small_tree(data), path);
  CHECK(st.status().code() == StatusCode::kAlreadyExists);
  CHECK(st.status().message().find("not a jtree file") != std::string::npos);
  CHECK(read_file(path).size() == text.size());
  WriteOptions force;
  force.overwrite_foreign = true;
  REQUIRE(save(small_tree(data), path, force).ok());
  CHECK((*Reader::open(path))->tree().leaves.size() == 1);
}

TEST_CASE("opening what is not a jtree file gives clear errors") {
  TempDir dir;
  CHECK(Reader::open(dir.file("missing.jtree")).status().is_not_found());
  std::string text(1000, 'x');
  write_file(dir.file("text"), std::as_bytes(std::span(text)));
  auto r = Reader::open(dir.file("text"));
  CHECK(r.status().is_corruption());
  CHECK(r.status().message().find("not a jtree file") != std::string::npos);
  CHECK(r.status().message().find(dir.file("text")) != std::string::npos);
  write_file(dir.file("empty"), {});
  CHECK(Reader::open(dir.file("empty")).status().is_corruption());
}

TEST_CASE("bool elements other than 0 and 1 are refused, inline and chunked (readers would "
          "refuse the file)") {
  TempDir dir;
  const std::string path = dir.file("b.jtree");
  auto data = random_bytes(1 << 10, 2);
  REQUIRE(save(small_tree(data), path).ok());
  const auto original = read_file(path);
  for (const size_t n : {size_t{16}, size_t{3} << 20}) {  // inline, then chunked (raw and zstd)
    for (const Codec codec : {Codec::kRaw, Codec::kZstd}) {
      CAPTURE(n);
      std::vector<std::byte> bools(n, std::byte{1});
      bools[n - 1] = std::byte{2};
      TreeBuilder b;
      b.dict().key("flags").array(DType::kBool, {n}, ArrayView{bools.data()}).end();
      WriteOptions wo;
      wo.target_chunk_bytes = 1 << 20;
      wo.codec = codec;
      auto st = save(std::move(*std::move(b).finish()), path, wo);
      REQUIRE_FALSE(st.ok());
      CHECK(st.status().code() == StatusCode::kInvalidArgument);
      CHECK(st.status().message().find("flags") != std::string::npos);
      CHECK(read_file(path) == original);
    }
  }
}

TEST_CASE("options out of range are refused, naming the option, and the old file stays") {
  TempDir dir;
  const std::string path = dir.file("o.jtree");
  auto data = random_bytes(1 << 16, 2);
  REQUIRE(save(small_tree(data), path).ok());
  const auto original = read_file(path);

  struct Bad {
    const char* why;
    std::function<void(WriteOptions&)> set;
  };
  const Bad bad[] = {
      {"threads must be >= 0", [](WriteOptions& o) { o.threads = -1; }},
      {"level 99 is not a zstd level (", [](WriteOptions& o) { o.level = 99; }},
      {"level -129 is not a zstd level", [](WriteOptions& o) { o.level = -129; }},
      {"chunk bytes (target_chunk_bytes) must be positive",
       [](WriteOptions& o) { o.target_chunk_bytes = 0; }},
      {"max_bytes_in_flight must be positive", [](WriteOptions& o) { o.max_bytes_in_flight = 0; }},
      {"alignment must be a power of two", [](WriteOptions& o) { o.alignment = 48; }},
      {"min_gain must be in [0, 1]", [](WriteOptions& o) { o.min_gain = -0.5; }},
  };
  for (const Bad& b : bad) {
    CAPTURE(b.why);
    WriteOptions o;
    b.set(o);
    auto st = save(small_tree(data), path, o);
    CHECK(st.status().code() == StatusCode::kInvalidArgument);
    CHECK(st.status().message().find(b.why) != std::string::npos);
    CHECK(read_file(path) == original);
  }
  // The edges are accepted: zstd's fastest level the header holds, and its strongest.
  for (int level : {-128, 22}) {
    WriteOptions o;
    o.level = level;
    CHECK(save(small_tree(data), path, o).ok());
  }
  // A raw save has no level to check (the level is the codec's).
  WriteOptions raw;
  raw.codec = Codec::kRaw;
  raw.level = 99;
  CHECK(save(small_tree(data), path, raw).ok());
  // A leaf's own level is checked against its codec too, naming the leaf.
  TreeBuilder b;
  LeafOptions lo;
  lo.level = 40;
  b.dict().key("x").array(DType::kUInt8, {data.size()}, ArrayView{data.data()}, lo).end();
  auto st = save(std::move(*std::move(b).finish()), path);
  CHECK(st.status().code() == StatusCode::kInvalidArgument);
  CHECK(st.status().message().find("leaf x: level 40 is not a zstd level") != std::string::npos);

  // Reads: threads < 0 is refused by every entry point, naming the file.
  auto r = Reader::open(path);
  REQUIRE(r.ok());
  ReadOptions ro;
  ro.threads = -2;
  std::vector<std::byte> dst(data.size());
  Status rs = (*r)->read(0, dst, ro);
  CHECK(rs.code() == StatusCode::kInvalidArgument);
  CHECK(rs.message().find(path + ": threads must be >= 0") == 0);
  CHECK((*r)->verify(ro).status().code() == StatusCode::kInvalidArgument);
  CHECK((*r)->mapped_leaf(0, ro).status().code() == StatusCode::kInvalidArgument);
  CHECK((*r)->mapped_box(0, Box{{0}, {1}}, ro).status().code() == StatusCode::kInvalidArgument);
}
