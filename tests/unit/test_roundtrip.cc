// Save then load: every dtype, rank (0-d and empty too), chunk grid, codec and filter.
#include <doctest/doctest.h>

#include "test_util.h"

using namespace jtree;
using namespace jtree::testing;

namespace {

struct Case {
  DType dtype;
  Shape shape;
  Shape chunk;  // empty: default
  Codec codec;
  std::optional<Filter> filter;
  int level;
};

std::vector<std::byte> load_leaf(const Reader& r, const std::string& path) {
  auto leaf = r.find_leaf(path);
  REQUIRE(leaf.ok());
  const Leaf& l = r.tree().leaves[*leaf];
  std::vector<std::byte> out(l.memory_bytes());
  Status st = r.read(*leaf, out);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  return out;
}

}  // namespace

TEST_CASE("every dtype, shape, grid, codec and filter round-trips bit-exact") {
  TempDir dir;
  std::vector<Case> cases;
  const std::vector<Shape> shapes = {{}, {0}, {1}, {7}, {1000}, {33, 17}, {4, 0, 3},
                                     {5, 6, 7}, {2, 3, 4, 5}};
  for (int code = 1; code < kDTypeCodeEnd; ++code) {
    const DType d = static_cast<DType>(code);
    for (const Shape& s : shapes) {
      cases.push_back({d, s, {}, Codec::kZstd, std::nullopt, 1});
      cases.push_back({d, s, {}, Codec::kRaw, std::nullopt, 0});
    }
    // Small irregular chunk grids, every allowed filter.
    for (Filter f : {Filter::kNone, Filter::kShuffle, Filter::kFloatSplit}) {
      const auto info = *dtype_info(d);
      if (f == Filter::kFloatSplit && info.float_component == 0) continue;
      if (f != Filter::kNone && is_4bit(d)) continue;
      cases.push_back({d, {33, 17}, {5, 4}, Codec::kZstd, f, 3});
      cases.push_back({d, {1000}, {333}, Codec::kZstd, f, -1});
    }
  }
  // One save holding all of them, with a low inline threshold so that most are chunked.
  std::vector<std::vector<std::byte>> data;
  TreeBuilder b;
  b.dict();
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    uint64_t n = 1;
    for (auto e : c.shape) n *= e;
    data.push_back(random_array(c.dtype, n, i));
    LeafOptions lo;
    lo.codec = c.codec;
    lo.filter = c.filter;
    lo.level = c.level;
    lo.chunk_shape = c.chunk;
    b.key("leaf" + std::to_string(i)).array(c.dtype, c.shape, ArrayView{data.back().data()}, lo);
  }
  b.end();
  auto tree = std::move(b).finish();
  REQUIRE(tree.ok());
  WriteOptions wo;
  wo.inline_threshold = 16;
  wo.target_chunk_bytes = 1000;  // many chunks even for small arrays
  auto st = save(std::move(*tree), dir.file("all.jtree"), wo);
  REQUIRE_MESSAGE(st.ok(), st.status().to_string());
  auto r = Reader::open(dir.file("all.jtree"));
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  size_t chunked = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    CAPTURE(i);
    CAPTURE(dtype_name(cases[i].dtype));
    CHECK(load_leaf(**r, "leaf" + std::to_string(i)) == data[i]);
    const Leaf& l = (*r)->tree().leaves[*(*r)->find_leaf("leaf" + std::to_string(i))];
    CHECK(l.dtype == cases[i].dtype);
    CHECK(l.shape == cases[i].shape);
    if (l.storage == Storage::kChunked) {
      ++chunked;
      if (!cases[i].chunk.empty()) CHECK(l.chunk_shape == cases[i].chunk);
      CHECK(l.codec == cases[i].codec);
    }
  }
  CHECK(chunked > cases.size() / 2);
  auto report = (*r)->verify();
  REQUIRE(report.ok());
  CHECK(report->ok());
  CHECK(report->chunks_checked == (*r)->info().num_chunks);
}

TEST_CASE("scalars, strings, bytes (small and large), tied leaves and metadata") {
  TempDir dir;
  std::string big(200000, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7);
  std::vector<float> w(1000, 1.5f);
  TreeBuilder b;
  b.dict();
  b.key("i").int_value(-123456789012345);
  b.key("f").float_value(0.25);
  b.key("b").bool_value(true);
  b.key("c").complex_value(1.5, -2.5);
  b.key("s").str("héllo");
  b.key("big").bytes(big);
  b.key("w").array(DType::kFloat32, {1000}, ArrayView{reinterpret_cast<std::byte*>(w.data())});
  b.key("w_tied").tied(6);
  b.key("nt").named_tuple("Pair").key("a").none().key("b").list().end().end();
  b.key("cu").custom("my.Class", "aux-bytes").int_value(1).end();
  Leaf huge;
  huge.kind = LeafKind::kInt;
  huge.storage = Storage::kNone;
  huge.big_int = std::string(40, '\x7f');
  b.key("bigint").leaf(huge);
  b.metadata("step", "100");
  b.end();
  auto tree = std::move(b).finish();
  REQUIRE(tree.ok());
  REQUIRE(save(std::move(*tree), dir.file("t.jtree")).ok());
  auto r = Reader::open(dir.file("t.jtree"));
  REQUIRE(r.ok());
  const Tree& t = (*r)->tree();
  auto leaf = [&](const char* p) -> const Leaf& { return t.leaves[*(*r)->find_leaf(p)]; };
  CHECK(leaf("i").int_value == -123456789012345);
  CHECK(leaf("f").real == 0.25);
  CHECK(leaf("b").bool_value);
  CHECK(leaf("c").imag == -2.5);
  CHECK(leaf("s").kind == LeafKind::kStr);
  CHECK(*(*r)->read_bytes(*(*r)->find_leaf("s")) == "héllo");
  CHECK(leaf("big").storage == Storage::kChunked);
  CHECK(*(*r)->read_bytes(*(*r)->find_leaf("big")) == big);
  CHECK(*(*r)->find_leaf("w") == *(*r)->find_leaf("w_tied"));
  CHECK(t.nodes[*t.find("nt")].type_name == "Pair");
  CHECK(t.nodes[*t.find("cu")].aux_data == "aux-bytes");
  CHECK(leaf("bigint").big_int == std::string(40, '\x7f'));
  CHECK(t.metadata == std::vector<std::pair<std::string, std::string>>{{"step", "100"}});
  // The default inline threshold (512 bytes): the 7-byte string goes into the header, the
  // 4000-byte array and the 200 KB bytes leaf into a chunk each.
  CHECK(WriteOptions{}.inline_threshold == 512);
  CHECK(leaf("s").storage == Storage::kInline);
  CHECK(leaf("w").storage == Storage::kChunked);
  CHECK((*r)->info().num_chunks == 2);
}

TEST_CASE("strided and big-endian sources, and FillFn producers") {
  TempDir dir;
  // A transposed float64 view and a big-endian int32 array.
  std::vector<double> base(60);
  for (size_t i = 0; i < base.size(); ++i) base[i] = static_cast<double>(i);
  std::vector<uint32_t> be(100);
  for (uint32_t i = 0; i < 100; ++i) be[i] = __builtin_bswap32(i * 1000);
  TreeBuilder b;
  b.dict();
  b.key("t").array(DType::kFloat64, {10, 6},
                   ArrayView{reinterpret_cast<std::byte*>(base.data()), {8, 80}, false});
  b.key("be").array(DType::kInt32, {100},
                    ArrayView{reinterpret_cast<std::byte*>(be.data()), {}, true});
  b.key("gen").array(DType::kUInt16, {300, 200}, FillFn([](const Box& box, std::span<std::byte> dst) {
    auto* p = reinterpret_cast<uint16_t*>(dst.data());
    for (uint64_t i = box.begin[0]; i < box.end[0]; ++i)
      for (uint64_t j = box.begin[1]; j < box.end[1]; ++j) *p++ = static_cast<uint16_t>(i * 7 + j);
    return Status::success();
  }));
  b.end();
  WriteOptions wo;
  wo.inline_threshold = 0;
  wo.target_chunk_bytes = 1024;
  REQUIRE(save(std::move(*std::move(b).finish()), dir.file("s.jtree"), wo).ok());
  auto r = *Reader::open(dir.file("s.jtree"));
  std::vector<double> t(60);
  REQUIRE(r->read(*r->find_leaf("t"), std::as_writable_bytes(std::span(t))).ok());
  for (int i = 0; i < 10; ++i)
    for (int j = 0; j < 6; ++j) CHECK(t[i * 6 + j] == base[j * 10 + i]);
  std::vector<int32_t> le(100);
  REQUIRE(r->read(*r->find_leaf("be"), std::as_writable_bytes(std::span(le))).ok());
  for (int i = 0; i < 100; ++i) CHECK(le[i] == i * 1000);
  std::vector<uint16_t> g(300 * 200);
  REQUIRE(r->read(*r->find_leaf("gen"), std::as_writable_bytes(std::span(g))).ok());
  for (int i = 0; i < 300; ++i)
    for (int j = 0; j < 200; ++j) REQUIRE(g[i * 200 + j] == static_cast<uint16_t>(i * 7 + j));
  // A failing producer fails the save with the leaf's path, and leaves nothing behind.
  TreeBuilder f;
  f.dict().key("bad").array(DType::kUInt8, {100000}, FillFn([](const Box&, std::span<std::byte>) {
    return Status::io_error("device lost");
  })).end();
  auto fs = save(std::move(*std::move(f).finish()), dir.file("f.jtree"));
  REQUIRE_FALSE(fs.ok());
  CHECK(fs.status().message().find("leaf bad") != std::string::npos);
  CHECK(fs.status().message().find("device lost") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir.file("f.jtree")));
}

TEST_CASE("int4 and uint4 read back as ml_dtypes holds them: the low nibble, no sign extension") {
  // ml_dtypes builds int4 -1 as the byte 0x0F (np.array([-1], ml_dtypes.int4).tobytes()), and
  // its arithmetic can leave 0xFF: both are written as the nibble F, and read back as 0x0F.
  TempDir dir;
  const uint64_t n = 37;  // odd: a pad nibble in the last byte
  std::vector<std::byte> i4(n), u4(n), want_i4(n);
  for (uint64_t i = 0; i < n; ++i) {
    const int v = static_cast<int>(i % 16) - 8;  // -8..7
    i4[i] = std::byte(static_cast<uint8_t>(static_cast<int8_t>(v)));  // sign-extended input
    want_i4[i] = std::byte(static_cast<uint8_t>(v & 0x0F));
    u4[i] = std::byte(static_cast<uint8_t>(i * 5 % 16));
  }
  // Inline (a file with a high inline threshold), and chunked raw and zstd in chunks of 5.
  for (const char* storage : {"inline", "raw", "zstd"}) {
    CAPTURE(storage);
    const std::string file = dir.file(std::string(storage) + ".jtree");
    LeafOptions lo;
    lo.codec = std::string(storage) == "zstd" ? Codec::kZstd : Codec::kRaw;
    lo.chunk_shape = Shape{5};
    TreeBuilder b;
    b.dict();
    b.key("i4").array(DType::kInt4, {n}, ArrayView{i4.data()}, lo);
    b.key("u4").array(DType::kUInt4, {n}, ArrayView{u4.data()}, lo);
    b.end();
    WriteOptions wo;
    wo.inline_threshold = std::string(storage) == "inline" ? 1024 : 0;
    REQUIRE(save(std::move(*std::move(b).finish()), file, wo).ok());
    auto r = *Reader::open(file);
    const bool inl = r->tree().leaves[*r->find_leaf("i4")].storage == Storage::kInline;
    CHECK(inl == (std::string(storage) == "inline"));
    CHECK(load_leaf(*r, "i4") == want_i4);
    CHECK(load_leaf(*r, "u4") == u4);
    // A slice that starts on a high nibble (element 3) and crosses chunks.
    std::vector<std::byte> part(20);
    const Box box{{3}, {23}};
    REQUIRE(r->read_box(*r->find_leaf("i4"), box, part).ok());
    CHECK(part == std::vector<std::byte>(want_i4.begin() + 3, want_i4.begin() + 23));
    REQUIRE(r->read_box(*r->find_leaf("u4"), box, part).ok());
    CHECK(part == std::vector<std::byte>(u4.begin() + 3, u4.begin() + 23));
  }
}

TEST_CASE("bf16 weights compress near the entropy bound with the default options") {
  TempDir dir;
  auto w = bf16_weights(1 << 22, 0.02f, 1);  // 8 MiB
  TreeBuilder b;
  b.dict().key("w").array(DType::kBFloat16, {1024, 4096}, ArrayView{w.data()}).end();
  auto st = save(std::move(*std::move(b).finish()), dir.file("w.jtree"));
  REQUIRE(st.ok());
  const double ratio = static_cast<double>(st->stored_bytes) / st->raw_bytes;
  MESSAGE("bf16 normal(0, 0.02) stored/raw = " << ratio);
  CHECK(ratio < 0.675);
  // Random bytes are stored raw: no expansion.
  auto noise = random_bytes(1 << 22, 3);
  TreeBuilder n;
  n.dict().key("n").array(DType::kFloat32, {1 << 20}, ArrayView{noise.data()}).end();
  auto ns = save(std::move(*std::move(n).finish()), dir.file("n.jtree"));
  REQUIRE(ns.ok());
  CHECK(ns->stored_bytes == ns->raw_bytes);
}

TEST_CASE("format version 2: its dtypes raise min_read_version, nothing else does") {
  TempDir dir;
  const std::string path = dir.file("v.jtree");
  auto versions = [&]() {
    auto r = Reader::open(path);
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    const FileInfo& i = (*r)->info();
    CHECK(i.writer_version == kFormatVersion);
    CHECK(i.min_write_version == i.min_read_version);
    return i.min_read_version;
  };
  auto f32 = random_array(DType::kFloat32, 1000, 1);
  auto e3m4 = random_array(DType::kFloat8E3M4, 5000, 2);
  {
    TreeBuilder b;
    b.dict().key("x").array(DType::kFloat32, {1000}, ArrayView{f32.data()}).end();
    REQUIRE(save(std::move(*std::move(b).finish()), path).ok());
  }
  CHECK(kFormatVersion == 3);
  CHECK(versions() == 1);  // nothing of version 2: version-1 readers read it
  {
    // An append adding a version-2 dtype raises the file's versions.
    auto r = Reader::open(path);
    REQUIRE(r.ok());
    Tree t = (*r)->tree();
    t.leaves[0] = Leaf::reused(0);
    t.nodes[0].num_children += 1;
    Node n;
    n.kind = NodeKind::kLeaf;
    n.key = Key::string("y");
    n.leaf = 1;
    t.nodes.push_back(n);
    Leaf y;
    y.kind = LeafKind::kArray;
    y.dtype = DType::kFloat8E3M4;
    y.shape = {5000};
    y.storage = Storage::kChunked;
    auto in = std::make_shared<LeafInput>();
    in->source = ArrayView{e3m4.data()};
    y.input = std::move(in);
    t.leaves.push_back(y);
    r->reset();
    auto st = append(path, std::move(t));
    REQUIRE_MESSAGE(st.ok(), st.status().to_string());
  }
  CHECK(versions() == 2);
  CHECK(load_leaf(**Reader::open(path), "y") == e3m4);
  CHECK(load_leaf(**Reader::open(path), "x") == f32);
  // Compaction keeps what the tree needs.
  REQUIRE(compact(path, dir.file("c.jtree")).ok());
  {
    auto r = Reader::open(dir.file("c.jtree"));
    REQUIRE(r.ok());
    CHECK((*r)->info().min_read_version == 2);
    CHECK(load_leaf(**r, "y") == e3m4);
  }
  // Every version-2 dtype alone makes a version-2 file.
  for (int code = kFirstVersion2DTypeCode; code < kDTypeCodeEnd; ++code) {
    CAPTURE(code);
    const DType d = static_cast<DType>(code);
    auto data = random_array(d, 10, code);
    TreeBuilder b;
    b.array(d, {10}, ArrayView{data.data()});
    REQUIRE(save(std::move(*std::move(b).finish()), path).ok());
    CHECK(versions() == 2);
  }
}

TEST_CASE("format version 3: text metadata comes back marked, raises no version, is UTF-8") {
  TempDir dir;
  const std::string path = dir.file("text.jtree");
  auto f32 = random_array(DType::kFloat32, 100, 1);
  {
    TreeBuilder b;
    b.dict().key("x").array(DType::kFloat32, {100}, ArrayView{f32.data()}).end();
    b.metadata("blob", std::string("\xff\x00", 2)).text_metadata("note", "caf\xc3\xa9");
    REQUIRE(save(std::move(*std::move(b).finish()), path).ok());
  }
  auto r = Reader::open(path);
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  CHECK((*r)->info().writer_version == 3);
  CHECK((*r)->info().min_read_version == 1);  // older readers read it (the value as bytes)
  CHECK((*r)->metadata().size() == 2);
  CHECK((*r)->metadata()[1].second == "caf\xc3\xa9");
  CHECK((*r)->metadata_text_keys() == std::vector<std::string>{"note"});
  CHECK((*r)->tree().metadata_text_keys == std::vector<std::string>{"note"});
  // A compaction keeps the mark (it writes the tree it read).
  REQUIRE(compact(path).ok());
  auto c = Reader::open(path);
  REQUIRE(c.ok());
  CHECK((*c)->metadata_text_keys() == std::vector<std::string>{"note"});
  // A text value that is not UTF-8, or a text key naming no entry, is refused at save.
  for (int bad = 0; bad < 2; ++bad) {
    TreeBuilder b;
    b.dict().key("x").array(DType::kFloat32, {100}, ArrayView{f32.data()}).end();
    b.text_metadata("note", bad == 0 ? "\xc3" : "ok");
    auto t = std::move(b).finish();
    REQUIRE(t.ok());
    if (bad == 1) t->metadata_text_keys.push_back("missing");
    auto st = save(std::move(*t), dir.file("bad.jtree"));
    CHECK(st.status().is_invalid_argument());
    CHECK_MESSAGE(st.status().message().find(bad == 0 ? "not valid UTF-8" : "name a metadata") !=
                      std::string::npos,
                  st.status().to_string());
  }
}
