// The trees of the valid golden files, generated deterministically: the generator saves them,
// the test rebuilds the same data and compares every leaf with what the committed files hold.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "jtree/jtree.h"

namespace jtree::golden {

/// Deterministic bytes (an LCG: the values only have to be stable across builds).
inline std::vector<std::byte> pattern(size_t n, uint32_t seed) {
  std::vector<std::byte> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    v[i] = static_cast<std::byte>(x >> 24);
  }
  return v;
}

/// bf16 values shaped like weights: a few small exponents, noisy mantissas and signs.
inline std::vector<std::byte> weights_bf16(size_t n, uint32_t seed) {
  auto r = pattern(n * 2, seed);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t lo = static_cast<uint8_t>(r[2 * i]);
    const uint8_t e = static_cast<uint8_t>(117 + static_cast<uint8_t>(r[2 * i + 1]) % 6);
    const uint16_t h = static_cast<uint16_t>(((lo & 1) << 15) | (e << 7) | (lo >> 1));
    r[2 * i] = static_cast<std::byte>(h & 0xff);
    r[2 * i + 1] = static_cast<std::byte>(h >> 8);
  }
  return r;
}

/// One array of a golden tree.
struct GoldenArray {
  std::string key;
  DType dtype;
  Shape shape;
  std::vector<std::byte> data;  // memory layout
  LeafOptions options;
};

/// The arrays of "basic.jtree": several dtypes, codecs, filters and grids.
inline std::vector<GoldenArray> basic_arrays() {
  std::vector<GoldenArray> a;
  auto opts = [](std::optional<Codec> c, std::optional<Filter> f, Shape chunk) {
    LeafOptions o;
    o.codec = c;
    o.filter = f;
    o.chunk_shape = std::move(chunk);
    return o;
  };
  a.push_back({"w_bf16", DType::kBFloat16, {64, 96}, weights_bf16(64 * 96, 1),
               opts(Codec::kZstd, Filter::kFloatSplit, {16, 96})});
  a.push_back({"f32_shuffle", DType::kFloat32, {40, 30}, pattern(40 * 30 * 4, 2),
               opts(Codec::kZstd, Filter::kShuffle, {7, 11})});
  a.push_back({"i64_raw", DType::kInt64, {500}, pattern(500 * 8, 3),
               opts(Codec::kRaw, std::nullopt, {128})});
  auto zeros = std::vector<std::byte>(3000, std::byte{0});
  a.push_back({"u8_zeros", DType::kUInt8, {3000}, zeros, opts(Codec::kZstd, Filter::kNone, {})});
  auto i4 = pattern(1001, 5);
  // The low nibble, high nibble zero: what a read returns (ml_dtypes' bytes). The files were
  // written from these values sign-extended; only the nibble is stored, so the bytes agree.
  for (auto& b : i4) b = static_cast<std::byte>(static_cast<uint8_t>(b) & 0x0F);
  a.push_back({"int4", DType::kInt4, {1001}, i4, opts(Codec::kZstd, std::nullopt, {300})});
  a.push_back({"c128", DType::kComplex128, {10, 4}, pattern(10 * 4 * 16, 6),
               opts(Codec::kZstd, Filter::kFloatSplit, {3, 4})});
  a.push_back({"scalar_f64", DType::kFloat64, {}, pattern(8, 7), {}});  // 0-d, inline
  a.push_back({"empty", DType::kFloat32, {0, 5}, {}, {}});
  a.push_back({"fp8", DType::kFloat8E4M3FN, {2000}, pattern(2000, 8),
               opts(Codec::kZstd, std::nullopt, {512})});
  return a;
}

/// "rectilinear.jtree" (format version 2): a float32 [50, 7] leaf "w" saved with the blocks
/// rows [0,13) [13,31) [31,50) x columns [0,3) [3,7) (no useful common divisor), so that its
/// chunk grid is rectilinear: chunk_bounds {13, 31, 50, 3, 7}.
inline std::vector<std::byte> rectilinear_data() { return pattern(50 * 7 * 4, 77); }
inline std::vector<Box> rectilinear_blocks() {
  std::vector<Box> blocks;
  const uint64_t rows[] = {0, 13, 31, 50}, cols[] = {0, 3, 7};
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 2; ++c) blocks.push_back({{rows[r], cols[c]}, {rows[r + 1], cols[c + 1]}});
  }
  return blocks;
}

/// The arrays of "dtypes_v2.jtree" (format version 2): one chunked and one inline leaf of each
/// dtype version 2 added, their bytes every bit pattern in turn (6-bit types: the low 6 bits).
inline std::vector<GoldenArray> v2_dtype_arrays() {
  const std::pair<const char*, DType> types[] = {
      {"f8_e4m3b11fnuz", DType::kFloat8E4M3B11FNUZ}, {"f8_e3m4", DType::kFloat8E3M4},
      {"f8_e4m3", DType::kFloat8E4M3},               {"f6_e2m3fn", DType::kFloat6E2M3FN},
      {"f6_e3m2fn", DType::kFloat6E3M2FN}};
  std::vector<GoldenArray> a;
  for (const auto& [name, dtype] : types) {
    const bool six = dtype == DType::kFloat6E2M3FN || dtype == DType::kFloat6E3M2FN;
    std::vector<std::byte> bytes(128 * 128);
    for (size_t i = 0; i < bytes.size(); ++i) {
      bytes[i] = static_cast<std::byte>(six ? (i * 7) % 64 : (i * 7) % 256);
    }
    LeafOptions chunked;
    chunked.codec = Codec::kZstd;
    chunked.chunk_shape = {32, 128};
    a.push_back({std::string(name), dtype, {128, 128}, bytes, chunked});
    a.push_back({std::string(name) + "_inline", dtype, {5},
                 std::vector<std::byte>(bytes.begin(), bytes.begin() + 5), {}});
  }
  return a;
}

/// A dict of `arrays` (which must outlive the save).
inline Result<Tree> arrays_tree(const std::vector<GoldenArray>& arrays) {
  TreeBuilder b;
  b.dict();
  for (const auto& a : arrays) {
    b.key(a.key).array(a.dtype, a.shape, ArrayView{a.data.data()}, a.options);
  }
  b.end();
  return std::move(b).finish();
}

/// The whole tree of "basic.jtree" over `arrays` (which must outlive the save).
inline Result<Tree> basic_tree(const std::vector<GoldenArray>& arrays) {
  TreeBuilder b;
  b.dict();
  b.key("arrays").dict();
  for (const auto& a : arrays) {
    b.key(a.key).array(a.dtype, a.shape, ArrayView{a.data.data()}, a.options);
  }
  b.end();
  b.key("step").int_value(123456789);
  b.key("lr").float_value(0.001);
  b.key("flag").bool_value(false);
  b.key("z").complex_value(1, -1);
  b.key("name").str("golden");
  b.key("blob").bytes(std::string(5000, 'b'));
  b.key("nothing").none();
  b.key("list").list().int_value(1).none().tuple().end().end();
  b.key("point").named_tuple("Point").key("x").int_value(1).key("y").int_value(2).end();
  b.key("custom").custom("golden.Node", "aux").key("c").int_value(3).end();
  b.key(7).str("int key");
  b.key("tied").tied(0);
  b.metadata("purpose", "golden file");
  b.end();
  return std::move(b).finish();
}

}  // namespace jtree::golden
