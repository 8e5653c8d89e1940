// Slice reads: random hyper-rectangles against a reference, only overlapping chunks fetched.
#include <atomic>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <random>

#include <doctest/doctest.h>

#include "test_util.h"
#include "util/box_copy.h"

using namespace jtree;
using namespace jtree::testing;

namespace {

Box random_box(std::mt19937& g, const Shape& shape) {
  Box b{Shape(shape.size()), Shape(shape.size())};
  for (size_t d = 0; d < shape.size(); ++d) {
    uint64_t x = g() % (shape[d] + 1), y = g() % (shape[d] + 1);
    b.begin[d] = std::min(x, y);
    b.end[d] = std::max(x, y);
  }
  return b;
}

struct Spec {
  DType dtype;
  Shape shape;
  Shape chunk;
  Codec codec = Codec::kZstd;
  std::optional<Filter> filter = {};  // (the writer's default for the dtype)
};

using MakeBytes = std::function<std::vector<std::byte>(size_t leaf, uint64_t elements)>;

// Saves a list of one leaf per spec, nothing inline, leaf i's bytes made by make(i, elements)
// and kept in `data` (the reference); opens the file.
std::shared_ptr<Reader> save_leaves(const TempDir& dir, const std::vector<Spec>& specs,
                                    std::vector<std::vector<std::byte>>& data,
                                    const MakeBytes& make) {
  TreeBuilder b;
  b.list();
  for (size_t i = 0; i < specs.size(); ++i) {
    uint64_t n = 1;
    for (auto e : specs[i].shape) n *= e;
    data.push_back(make(i, n));
    LeafOptions lo;
    lo.chunk_shape = specs[i].chunk;
    lo.codec = specs[i].codec;
    lo.filter = specs[i].filter;
    b.array(specs[i].dtype, specs[i].shape, ArrayView{data.back().data()}, lo);
  }
  b.end();
  WriteOptions wo;
  wo.inline_threshold = 0;
  REQUIRE(save(std::move(*std::move(b).finish()), dir.file("s.jtree"), wo).ok());
  return *Reader::open(dir.file("s.jtree"));
}

}  // namespace

TEST_CASE("random boxes of many leaves match the reference") {
  TempDir dir;
  std::vector<Spec> specs = {
      {DType::kFloat32, {97, 55}, {10, 8}, Codec::kZstd},
      {DType::kBFloat16, {64, 33, 9}, {7, 33, 2}, Codec::kZstd},
      {DType::kInt64, {1000}, {64}, Codec::kRaw},
      {DType::kUInt8, {13, 17, 19}, {13, 17, 19}, Codec::kRaw},
      {DType::kInt4, {45, 31}, {8, 7}, Codec::kZstd},
      {DType::kUInt4, {101}, {10}, Codec::kRaw},
      {DType::kComplex128, {20, 3}, {3, 3}, Codec::kZstd},
      {DType::kFloat8E4M3FN, {5, 6, 7, 8}, {2, 3, 4, 5}, Codec::kZstd},
      {DType::kBool, {300}, {300}, Codec::kZstd},
  };
  std::vector<std::vector<std::byte>> data;
  auto r = save_leaves(dir, specs, data, [&](size_t i, uint64_t n) {
    return random_array(specs[i].dtype, n, 100 + i);
  });
  std::mt19937 g(42);
  for (size_t i = 0; i < specs.size(); ++i) {
    const size_t item = dtype_info(specs[i].dtype)->item_size;
    for (int trial = 0; trial < 200; ++trial) {
      Box box = random_box(g, specs[i].shape);
      std::vector<std::byte> got(box.num_elements() * item, std::byte{0xAB});
      Status st = r->read_box(static_cast<uint32_t>(i), box, got);
      REQUIRE_MESSAGE(st.ok(), st.to_string());
      REQUIRE(got == box_reference(data[i], specs[i].shape, box, item));
    }
  }
  // read_many: overlapping boxes of several leaves in one call.
  std::vector<ReadRequest> reqs;
  std::vector<std::vector<std::byte>> outs;
  std::vector<std::vector<std::byte>> refs;
  for (int k = 0; k < 40; ++k) {
    uint32_t i = g() % specs.size();
    Box box = random_box(g, specs[i].shape);
    const size_t item = dtype_info(specs[i].dtype)->item_size;
    outs.emplace_back(box.num_elements() * item);
    refs.push_back(box_reference(data[i], specs[i].shape, box, item));
    reqs.push_back({i, box, {}});
  }
  for (size_t k = 0; k < reqs.size(); ++k) reqs[k].dst = outs[k];
  Status st = r->read_many(reqs);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  for (size_t k = 0; k < reqs.size(); ++k) CHECK(outs[k] == refs[k]);
}

TEST_CASE("a slice reads only the chunks it overlaps") {
  TempDir dir;
  // 4096 rows of 1 KiB: 64 chunks of 64 KiB, raw.
  auto emb = random_bytes(4096 * 1024, 9);
  TreeBuilder b;
  LeafOptions lo;
  lo.codec = Codec::kRaw;
  lo.chunk_shape = {64, 256};
  b.dict().key("emb").array(DType::kFloat32, {4096, 256}, ArrayView{emb.data()}, lo).end();
  REQUIRE(save(std::move(*std::move(b).finish()), dir.file("e.jtree")).ok());
  auto r = *Reader::open(dir.file("e.jtree"));
  const uint64_t before = r->io_stats().bytes_read;
  std::vector<std::byte> rows(100 * 1024);
  ReadOptions exact;
  exact.coalesce_gap = 0;  // chunks land in completion order: no gap may be bridged
  REQUIRE(r->read_box(0, {{1000, 0}, {1100, 256}}, rows, exact).ok());
  const uint64_t fetched = r->io_stats().bytes_read - before;
  // Rows 1000..1100 touch chunks 15..17: three chunks of 64 KiB.
  CHECK(fetched == 3 * 64 * 1024);
  CHECK(std::memcmp(rows.data(), emb.data() + 1000 * 1024, rows.size()) == 0);
}

TEST_CASE("bad requests are InvalidArgument naming the leaf") {
  TempDir dir;
  std::vector<float> w(100);
  TreeBuilder b;
  b.dict().key("w").array(DType::kFloat32, {10, 10}, ArrayView{reinterpret_cast<std::byte*>(w.data())}).key("n").int_value(1).end();
  REQUIRE(save(std::move(*std::move(b).finish()), dir.file("b.jtree")).ok());
  auto r = *Reader::open(dir.file("b.jtree"));
  std::vector<std::byte> buf(400);
  auto st = r->read_box(0, {{0, 0}, {11, 10}}, buf);
  CHECK(st.is_invalid_argument());
  CHECK(st.message().find("leaf w") != std::string::npos);
  CHECK(r->read_box(0, {{0}, {10}}, buf).is_invalid_argument());
  CHECK(r->read(0, std::span(buf).first(399)).is_invalid_argument());
  CHECK(r->read(1, buf).is_invalid_argument());  // an int leaf has no array data
  CHECK(r->read(7, buf).is_invalid_argument());
  CHECK(r->find_leaf("nope").status().is_not_found());
}

TEST_CASE("row slices of compressed chunks decode only the rows they want, bit-exact") {
  // Chunks that span whole rows, compressed (bf16 float split, int16 shuffle, float32 no
  // filter, a 3-d leaf): a slice of rows takes one run of each chunk it overlaps, which is
  // decoded straight into place (codec::decode_chunk_range); chunks it covers whole take the
  // whole-chunk path. Every slice is compared with the source.
  TempDir dir;
  const std::vector<Spec> specs = {
      {DType::kBFloat16, {300, 64}, {32, 64}, Codec::kZstd, Filter::kFloatSplit},
      {DType::kInt16, {257, 40}, {50, 40}, Codec::kZstd, Filter::kShuffle},
      {DType::kFloat32, {100, 30}, {16, 30}, Codec::kZstd, Filter::kNone},
      {DType::kBFloat16, {40, 6, 8}, {7, 6, 8}, Codec::kZstd, Filter::kFloatSplit},
  };
  std::vector<std::vector<std::byte>> data;
  // Compressible: smooth bf16 bytes, reinterpreted for the other dtypes.
  auto r = save_leaves(dir, specs, data, [&](size_t i, uint64_t n) {
    return bf16_weights(n * dtype_info(specs[i].dtype)->item_size / 2, 0.02f, 200 + i);
  });
  std::mt19937 g(7);
  for (size_t i = 0; i < specs.size(); ++i) {
    CAPTURE(i);
    const Leaf& leaf = r->leaf(static_cast<uint32_t>(i));
    REQUIRE(r->chunk(leaf.first_chunk).encoding == ChunkEncoding::kPlanes);
    const size_t item = dtype_info(specs[i].dtype)->item_size;
    const uint64_t rows = specs[i].shape[0], chunk_rows = specs[i].chunk[0];
    std::vector<std::pair<uint64_t, uint64_t>> slices = {
        {1, rows - 1}, {chunk_rows - 1, chunk_rows + 1}, {3, 4}, {0, chunk_rows / 2},
        {rows - 2, rows}, {chunk_rows, 2 * chunk_rows}};
    for (int k = 0; k < 40; ++k) {
      const uint64_t x = g() % (rows + 1), y = g() % (rows + 1);
      slices.push_back({std::min(x, y), std::max(x, y)});
    }
    for (auto [a, e] : slices) {
      CAPTURE(a);
      CAPTURE(e);
      Box box{Shape(specs[i].shape.size(), 0), specs[i].shape};
      box.begin[0] = a;
      box.end[0] = e;
      std::vector<std::byte> got(box.num_elements() * item, std::byte{0xAB});
      ReadOptions ro;
      ro.threads = 1 + (a % 3);
      Status st = r->read_box(static_cast<uint32_t>(i), box, got, ro);
      REQUIRE_MESSAGE(st.ok(), st.to_string());
      REQUIRE(got == box_reference(data[i], specs[i].shape, box, item));
    }
  }
}

namespace {

// A local file seen as a remote backend sees it: a preferred fetch size (so the reader plans
// as for HTTP/S3), every read() call counted as one request.
class RemoteLikeSource final : public Source {
 public:
  explicit RemoteLikeSource(std::shared_ptr<Source> inner) : inner_(std::move(inner)) {}
  const std::string& name() const override { return inner_->name(); }
  Result<uint64_t> size() override { return inner_->size(); }
  Status read(std::span<const ReadRange> ranges) override {
    requests += ranges.size();
    for (const ReadRange& r : ranges) bytes += r.dst.size();
    return inner_->read(ranges);
  }
  IoStats stats() const override { return inner_->stats(); }
  int preferred_concurrency() const override { return 4; }
  uint64_t preferred_fetch_bytes() const override { return 8 << 20; }
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> bytes{0};  // asked for

 private:
  std::shared_ptr<Source> inner_;
};

}  // namespace

TEST_CASE("a remote raw load fetches each chunk in one request, verified") {
  // (Before: raw chunks were read and hashed in 1 MiB pieces, each its own ranged GET.)
  TempDir dir;
  const Shape shape{1024, 1024};  // 4 MiB float32, chunks of 4 MiB
  auto data = random_array(DType::kFloat32, 1024 * 1024, 3);
  TreeBuilder b;
  LeafOptions lo;
  lo.codec = Codec::kRaw;
  lo.chunk_shape = shape;
  b.dict().key("w").array(DType::kFloat32, shape, ArrayView{data.data()}, lo).end();
  REQUIRE(save(std::move(*std::move(b).finish()), dir.file("r.jtree")).ok());
  auto file = open_file_source(dir.file("r.jtree"), false);
  REQUIRE(file.ok());
  auto src = std::make_shared<RemoteLikeSource>(*file);
  auto r = Reader::open(src);
  REQUIRE(r.ok());
  const uint64_t opened = src->requests.load();
  std::vector<std::byte> out(data.size());
  REQUIRE((*r)->read(*(*r)->find_leaf("w"), out).ok());
  CHECK(out == data);
  CHECK(src->requests.load() - opened == 1);
  // A damaged chunk is still caught.
  {
    std::FILE* f = std::fopen(dir.file("r.jtree").c_str(), "r+b");
    REQUIRE(f != nullptr);
    const uint64_t off = (*r)->chunk((*r)->leaf(*(*r)->find_leaf("w")).first_chunk).file_offset;
    std::fseek(f, static_cast<long>(off + 12345), SEEK_SET);
    std::fputc(0x5A ^ std::to_integer<int>(data[12345]), f);
    std::fclose(f);
  }
  const Status st = (*r)->read(*(*r)->find_leaf("w"), out);
  CHECK(st.is_corruption());
  CHECK(st.message().find("checksum mismatch") != std::string::npos);
}

TEST_CASE("a remote slice read without verification fetches only its byte runs of raw chunks") {
  TempDir dir;
  // A [256, 4096] uint8 leaf in raw chunks of 64 rows (256 KiB).
  const Shape shape{256, 4096};
  auto data = random_array(DType::kUInt8, 256 * 4096, 5);
  TreeBuilder b;
  LeafOptions lo;
  lo.codec = Codec::kRaw;
  lo.chunk_shape = {64, 4096};
  b.dict().key("w").array(DType::kUInt8, shape, ArrayView{data.data()}, lo).end();
  REQUIRE(save(std::move(*std::move(b).finish()), dir.file("rows.jtree")).ok());
  auto file = open_file_source(dir.file("rows.jtree"), false);
  REQUIRE(file.ok());
  auto src = std::make_shared<RemoteLikeSource>(*file);
  auto r = Reader::open(src);
  REQUIRE(r.ok());
  const uint32_t leaf = *(*r)->find_leaf("w");
  struct Case {
    Box box;
    uint64_t chunks;  // that the box overlaps
  };
  // Rows [60, 70): two chunks; rows [130, 131): one; columns [100, 200) of rows [0, 128): two
  // chunks, one run per row.
  for (const Case& c : {Case{Box{{60, 0}, {70, 4096}}, 2}, Case{Box{{130, 0}, {131, 4096}}, 1},
                        Case{Box{{0, 100}, {128, 200}}, 2}}) {
    const Shape part = c.box.shape();
    std::vector<std::byte> want(part[0] * part[1]);
    for (uint64_t i = 0; i < part[0]; ++i) {
      std::memcpy(want.data() + i * part[1],
                  data.data() + (c.box.begin[0] + i) * 4096 + c.box.begin[1], part[1]);
    }
    for (const bool verify : {false, true}) {
      CAPTURE(verify);
      CAPTURE(c.box.begin[0]);
      ReadOptions ro;
      ro.verify_checksums = verify;
      std::vector<std::byte> got(want.size());
      const uint64_t before = src->bytes.load();
      REQUIRE((*r)->read_box(leaf, c.box, got, ro).ok());
      CHECK(got == want);
      const uint64_t fetched = src->bytes.load() - before;
      if (verify) {
        CHECK(fetched == c.chunks * (256 << 10));  // the checksum covers whole chunks
      } else {
        CHECK(fetched == want.size());
      }
    }
  }
}
