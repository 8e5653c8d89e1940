// Appends: new generations in place, reuse of old data, torn appends recovered.
#include <filesystem>

#include <doctest/doctest.h>

#include "codec/checksum.h"
#include "test_util.h"
#include "util/endian.h"

using namespace jtree;
using namespace jtree::testing;

namespace {

// Generation 0: a (1 MiB array), b (int), c (None).
void save_base(const std::string& path, const std::vector<std::byte>& a) {
  TreeBuilder b;
  b.dict();
  b.key("a").array(DType::kFloat32, {512, 512}, ArrayView{a.data()});
  b.key("b").int_value(1);
  b.key("c").none();
  b.end();
  REQUIRE(save(std::move(*std::move(b).finish()), path).ok());
}

// Generation n+1: a reused, b = value, c = an array of `c` bytes (or None when empty).
Result<WriteStats> append_update(const std::string& path, int64_t value,
                                 const std::vector<std::byte>* c) {
  auto r = Reader::open(path);
  REQUIRE(r.ok());
  TreeBuilder b;
  b.dict();
  Leaf reuse = Leaf::reused(*(*r)->find_leaf("a"));
  b.key("a").leaf(reuse);
  b.key("b").int_value(value);
  if (c) {
    b.key("c").array(DType::kUInt8, {c->size()}, ArrayView{c->data()});
  } else {
    b.key("c").none();
  }
  b.end();
  return append(path, std::move(*std::move(b).finish()));
}

}  // namespace

TEST_CASE("append adds a generation, reuses data, and keeps older bytes intact") {
  TempDir dir;
  const std::string path = dir.file("g.jtree");
  auto a = random_bytes(512 * 512 * 4, 1);
  save_base(path, a);
  const auto gen0 = read_file(path);
  auto c = random_bytes(300000, 2);
  auto st = append_update(path, 2, &c);
  REQUIRE_MESSAGE(st.ok(), st.status().to_string());
  CHECK(st->generation == 1);
  CHECK(st->raw_bytes == c.size());  // a was not rewritten
  const auto gen1 = read_file(path);
  REQUIRE(gen1.size() > gen0.size());
  // Everything of generation 0 past the preamble's commit slots is untouched.
  CHECK(std::equal(gen0.begin() + 128, gen0.end(), gen1.begin() + 128));
  auto r = *Reader::open(path);
  CHECK(r->info().generation == 1);
  CHECK(r->info().prev_footer_offset == gen0.size() - 128);
  CHECK(r->tree().leaves[*r->find_leaf("b")].int_value == 2);
  std::vector<std::byte> got(a.size());
  REQUIRE(r->read(*r->find_leaf("a"), got).ok());
  CHECK(got == a);
  CHECK(*r->read_bytes(*r->find_leaf("c")) == std::string(reinterpret_cast<char*>(c.data()), c.size()));
  auto rep = *r->verify();
  CHECK(rep.ok());
  CHECK(rep.dead_bytes > 0);  // generation 0's header, index and footer
}

TEST_CASE("appends that replace every chunk keep the file readable (segments outnumber chunks)") {
  TempDir dir;
  const std::string path = dir.file("r.jtree");
  auto a = random_bytes(512 * 512 * 4, 9);
  save_base(path, a);
  for (int g = 1; g <= 4; ++g) {
    auto c = random_bytes(100000, 10 + g);  // one chunk, replaced each time
    auto st = append_update(path, g, &c);
    REQUIRE_MESSAGE(st.ok(), st.status().to_string());
    auto r = Reader::open(path);
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    if (g >= 2) CHECK((*r)->info().segments.size() > (*r)->info().num_chunks);
    CHECK(*(*r)->read_bytes(*(*r)->find_leaf("c")) ==
          std::string(reinterpret_cast<char*>(c.data()), c.size()));
  }
}

TEST_CASE("a torn append leaves the previous generation readable, and the next append heals") {
  TempDir dir;
  const std::string path = dir.file("t.jtree");
  auto a = random_bytes(512 * 512 * 4, 3);
  save_base(path, a);
  auto c = random_bytes(100000, 4);
  REQUIRE(append_update(path, 2, &c).ok());
  const auto committed = read_file(path);
  // An interrupted append: garbage after the committed end.
  auto torn = committed;
  auto junk = random_bytes(70000, 5);
  torn.insert(torn.end(), junk.begin(), junk.end());
  write_file(path, torn);
  {
    auto r = Reader::open(path);
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    CHECK((*r)->info().recovered);
    CHECK((*r)->info().generation == 1);
    CHECK((*r)->tree().leaves[*(*r)->find_leaf("b")].int_value == 2);
    auto rep = *(*r)->verify();
    CHECK(rep.ok());
    CHECK(rep.notes.size() == 1);
  }
  // The next append truncates the garbage.
  REQUIRE(append_update(path, 3, nullptr).ok());
  auto r = *Reader::open(path);
  CHECK_FALSE(r->info().recovered);
  CHECK(r->info().generation == 2);
  CHECK(r->tree().leaves[*r->find_leaf("b")].int_value == 3);
  CHECK(r->tree().nodes[*r->tree().find("c")].kind == NodeKind::kNone);
}

TEST_CASE("cut at any point of an append, the file opens at the last committed generation") {
  TempDir dir;
  const std::string path = dir.file("cut.jtree");
  auto a = random_bytes(64 * 1024, 6);
  TreeBuilder b;
  b.dict().key("a").array(DType::kUInt8, {a.size()}, ArrayView{a.data()}).key("b").int_value(1).end();
  REQUIRE(save(std::move(*std::move(b).finish()), path).ok());
  const auto gen0 = read_file(path);
  auto c = random_bytes(20000, 7);
  {
    auto r = *Reader::open(path);
    TreeBuilder u;
    Leaf reuse = Leaf::reused(0);
    u.dict().key("a").leaf(reuse).key("b").int_value(2).key("c").array(DType::kUInt8, {c.size()}, ArrayView{c.data()}).end();
    REQUIRE(append(path, std::move(*std::move(u).finish())).ok());
  }
  const auto gen1 = read_file(path);
  // Every cut inside the appended bytes, with the preamble as the appender left it (both
  // slots written) and as it was mid-way (only the slot of generation 0).
  const size_t step = std::max<size_t>(1, (gen1.size() - gen0.size()) / 97);
  for (size_t cut = gen0.size(); cut < gen1.size(); cut += step) {
    for (int slots = 0; slots < 2; ++slots) {
      std::vector<std::byte> f(gen1.begin(), gen1.begin() + cut);
      if (slots == 0) {  // generation 1's slot not yet written: only generation 0's
        std::copy(gen0.begin(), gen0.begin() + 128, f.begin());
        std::copy(gen1.begin() + 64, gen1.begin() + 96, f.begin() + 64);
      }
      write_file(dir.file("cut-copy.jtree"), f);
      auto r = Reader::open(dir.file("cut-copy.jtree"));
      REQUIRE_MESSAGE(r.ok(), "cut at " << cut << ": " << r.status().to_string());
      CHECK((*r)->info().generation == 0);
      CHECK((*r)->tree().leaves[*(*r)->find_leaf("b")].int_value == 1);
      std::vector<std::byte> got(a.size());
      REQUIRE((*r)->read(0, got).ok());
      CHECK(got == a);
    }
  }
}

TEST_CASE("a failed append leaves the file byte-identical") {
  TempDir dir;
  const std::string path = dir.file("f.jtree");
  auto a = random_bytes(512 * 512 * 4, 8);
  save_base(path, a);
  const auto before = read_file(path);
  TreeBuilder b;
  Leaf bad = Leaf::reused(99);
  b.dict().key("a").leaf(bad).end();
  auto st = append(path, std::move(*std::move(b).finish()));
  CHECK(st.status().is_invalid_argument());
  TreeBuilder f;
  f.dict().key("x").array(DType::kUInt8, {1 << 20}, FillFn([](const Box&, std::span<std::byte>) {
    return Status::io_error("producer failed");
  })).end();
  CHECK_FALSE(append(path, std::move(*std::move(f).finish())).ok());
  const auto after = read_file(path);
  // Byte-identical except possibly the commit slot of generation 0 (written before anything).
  REQUIRE(after.size() == before.size());
  CHECK(std::equal(before.begin() + 128, before.end(), after.begin() + 128));
  CHECK(std::equal(before.begin(), before.begin() + 64, after.begin()));
  CHECK((*Reader::open(path))->info().generation == 0);
}

TEST_CASE("a current footer with refused fields is an error, never a fallback to an older "
          "generation (FORMAT.md section 5)") {
  TempDir dir;
  const std::string path = dir.file("f.jtree");
  auto a = random_bytes(512 * 512 * 4, 3);
  save_base(path, a);
  REQUIRE(append_update(path, 2, nullptr).ok());
  const auto good = read_file(path);
  const size_t foot = good.size() - 128;
  struct Forgery {
    const char* what;
    size_t offset;       // byte offset in the footer
    uint64_t value;
    size_t width;        // bytes
    StatusCode expected;
  };
  // Offsets from FORMAT.md's footer table: writer_version 80, min_read_version 82,
  // min_write_version 84, file_kind 86, reserved 87..111.
  const Forgery cases[] = {
      {"min_read_version 0", 82, 0, 2, StatusCode::kCorruption},
      {"min_read_version 4", 82, 4, 2, StatusCode::kNotSupported},
      {"min_read_version 65535", 82, 65535, 2, StatusCode::kNotSupported},
      {"file_kind 2", 86, 2, 1, StatusCode::kCorruption},
      {"file_kind 255", 86, 255, 1, StatusCode::kCorruption},
      {"writer_version 0", 80, 0, 2, StatusCode::kCorruption},
      {"min_write_version 0", 84, 0, 2, StatusCode::kCorruption},
      {"a reserved byte", 100, 1, 1, StatusCode::kCorruption},
  };
  for (const Forgery& f : cases) {
    CAPTURE(f.what);
    auto bytes = good;
    std::byte* p = bytes.data() + foot;
    for (size_t i = 0; i < f.width; ++i) p[f.offset + i] = std::byte((f.value >> (8 * i)) & 0xff);
    // Magic and hash stay valid: the checksum is recomputed over the forged fields.
    store_le<uint64_t>(p + 112, xxh3(std::span<const std::byte>(p, 112)));
    write_file(path, bytes);
    auto r = Reader::open(path);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == f.expected);
    CHECK(r.status().message().find("current footer") != std::string::npos);
  }
  // The same footer with a broken hash is a torn end: generation 0 is read, as before.
  auto torn = good;
  torn[foot + 100] = std::byte{1};
  write_file(path, torn);
  auto r = Reader::open(path);
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  CHECK((*r)->info().recovered);
  CHECK((*r)->info().generation == 0);
}
