// n-d region copies and strided gathers against naive element-by-element references.
#include <cstring>
#include <random>

#include <doctest/doctest.h>

#include "util/box_copy.h"

using namespace jtree;

namespace {

uint64_t linear(const Shape& shape, const Shape& idx) {
  uint64_t l = 0;
  for (size_t d = 0; d < shape.size(); ++d) l = l * shape[d] + idx[d];
  return l;
}

// Visits every index of `shape` in C order.
template <typename F>
void for_each_index(const Shape& shape, F f) {
  for (uint64_t e : shape)
    if (e == 0) return;
  Shape idx(shape.size(), 0);
  for (;;) {
    f(idx);
    size_t d = shape.size();
    while (d-- > 0) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
    if (d == static_cast<size_t>(-1)) return;
  }
}

}  // namespace

TEST_CASE("copy_region matches a naive copy for random shapes and regions") {
  std::mt19937 g(7);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t rank = g() % 5;
    const size_t item = std::vector<size_t>{1, 2, 4, 8}[g() % 4];
    Shape src_shape(rank), dst_shape(rank), region(rank), ss(rank), ds(rank);
    for (size_t d = 0; d < rank; ++d) {
      region[d] = g() % 5;
      src_shape[d] = region[d] + g() % 3;
      dst_shape[d] = region[d] + g() % 3;
      ss[d] = src_shape[d] == region[d] ? 0 : g() % (src_shape[d] - region[d] + 1);
      ds[d] = dst_shape[d] == region[d] ? 0 : g() % (dst_shape[d] - region[d] + 1);
    }
    uint64_t sn = 1, dn = 1;
    for (size_t d = 0; d < rank; ++d) sn *= src_shape[d], dn *= dst_shape[d];
    std::vector<std::byte> src(sn * item), dst(dn * item, std::byte{0xEE}), ref = dst;
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>(g());
    copy_region(src.data(), src_shape, ss, dst.data(), dst_shape, ds, region, item);
    for_each_index(region, [&](const Shape& idx) {
      Shape s(rank), t(rank);
      for (size_t d = 0; d < rank; ++d) s[d] = ss[d] + idx[d], t[d] = ds[d] + idx[d];
      std::memcpy(ref.data() + linear(dst_shape, t) * item,
                  src.data() + linear(src_shape, s) * item, item);
    });
    CHECK(dst == ref);
  }
}

TEST_CASE("gather_strided: transposed, negative and broadcast strides, byte swaps") {
  // A 3x4 int32 array stored transposed (column-major), gathered in C order.
  std::vector<int32_t> colmajor(12);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) colmajor[j * 3 + i] = i * 10 + j;
  std::vector<int32_t> out(12);
  std::vector<int64_t> strides = {4, 12};
  gather_strided(reinterpret_cast<std::byte*>(colmajor.data()), strides, Box::all({3, 4}), 4, 0,
                 reinterpret_cast<std::byte*>(out.data()));
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) CHECK(out[i * 4 + j] == i * 10 + j);
  // Negative stride: a reversed view, and a sub-box of it.
  std::vector<int16_t> v = {0, 1, 2, 3, 4, 5, 6, 7};
  std::vector<int64_t> neg = {-2};
  std::vector<int16_t> r(3);
  gather_strided(reinterpret_cast<std::byte*>(v.data() + 7), neg, Box{{2}, {5}}, 2, 0,
                 reinterpret_cast<std::byte*>(r.data()));
  CHECK(r == std::vector<int16_t>{5, 4, 3});
  // Zero stride (broadcast).
  std::vector<int64_t> zero = {0};
  gather_strided(reinterpret_cast<std::byte*>(v.data() + 3), zero, Box::all({3}), 2, 0,
                 reinterpret_cast<std::byte*>(r.data()));
  CHECK(r == std::vector<int16_t>{3, 3, 3});
  // Byte swap of big-endian input: per 2 bytes, and per component for 8-byte items.
  std::vector<uint16_t> be = {0x0102, 0x0304};
  std::vector<uint16_t> le(2);
  std::vector<int64_t> s2 = {2};
  gather_strided(reinterpret_cast<std::byte*>(be.data()), s2, Box::all({2}), 2, 2,
                 reinterpret_cast<std::byte*>(le.data()));
  CHECK(le == std::vector<uint16_t>{0x0201, 0x0403});
  std::vector<uint32_t> cplx = {0x01020304, 0x05060708};
  std::vector<uint32_t> cout(2);
  std::vector<int64_t> s8 = {8};
  gather_strided(reinterpret_cast<std::byte*>(cplx.data()), s8, Box::all({1}), 8, 4,
                 reinterpret_cast<std::byte*>(cout.data()));
  CHECK(cout == std::vector<uint32_t>{0x04030201, 0x08070605});
}

TEST_CASE("contiguous_offset") {
  CHECK(contiguous_offset({10, 4}, {2, 0}, {3, 4}) == 8u);
  CHECK(contiguous_offset({10, 4}, {2, 1}, {1, 2}) == 9u);
  CHECK_FALSE(contiguous_offset({10, 4}, {2, 1}, {2, 2}).has_value());
  CHECK(contiguous_offset({5, 1, 4}, {1, 0, 0}, {2, 1, 4}) == 4u);
  CHECK(contiguous_offset({}, {}, {}) == 0u);
}
