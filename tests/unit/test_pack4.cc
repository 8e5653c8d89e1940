// Packing of 4-bit dtypes: nibble order, no sign extension (ml_dtypes' bytes), odd counts.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "codec/pack4.h"

namespace {

using jtree::codec::pack4;
using jtree::codec::unpack4;

std::vector<std::byte> bytes(std::initializer_list<int> v) {
  std::vector<std::byte> out;
  for (int x : v) out.push_back(std::byte(static_cast<uint8_t>(x)));
  return out;
}

}  // namespace

TEST_CASE("pack4: element 2j in the low nibble, 2j+1 in the high nibble, zero pad") {
  const auto src = bytes({0x1, 0x2, 0x3, 0x4, 0x5});
  std::vector<std::byte> dst(3);
  pack4(src, dst);
  CHECK(dst == bytes({0x21, 0x43, 0x05}));

  std::vector<std::byte> back(5);
  unpack4(dst, back);
  CHECK(back == src);
}

TEST_CASE("pack4: only the low nibble of each element is kept") {
  // int4 -1 and -8 arrive sign-extended (0xFF, 0xF8).
  const auto src = bytes({0xFF, 0xF8, 0x7A});
  std::vector<std::byte> dst(2);
  pack4(src, dst);
  CHECK(dst == bytes({0x8F, 0x0A}));
}

TEST_CASE("unpack4: every value zero-extended, int4 too (ml_dtypes holds -1 as 0x0F)") {
  const auto packed = bytes({0x8F, 0x70});
  std::vector<std::byte> u(4);
  unpack4(packed, u);
  CHECK(u == bytes({0x0F, 0x08, 0x00, 0x07}));
}

TEST_CASE("pack4/unpack4 round trip every int4 and uint4 value, odd and even counts") {
  for (size_t count : {0, 1, 2, 15, 16, 17, 33, 1001}) {
    CAPTURE(count);
    std::vector<std::byte> i4(count), u4(count);
    for (size_t i = 0; i < count; ++i) {
      const int v = static_cast<int>(i * 7 % 16);
      u4[i] = std::byte(static_cast<uint8_t>(v));
      i4[i] = std::byte(static_cast<uint8_t>(static_cast<int8_t>(v - 8)));  // -8..7, sign-extended
    }
    std::vector<std::byte> packed((count + 1) / 2), back(count);
    pack4(i4, packed);
    unpack4(packed, back);
    for (size_t i = 0; i < count; ++i) {  // the same nibble, the high one cleared
      CHECK(static_cast<uint8_t>(back[i]) == (static_cast<uint8_t>(i4[i]) & 0x0F));
    }
    pack4(u4, packed);
    unpack4(packed, back);
    CHECK(back == u4);
    if (count % 2 == 1) CHECK((static_cast<uint8_t>(packed.back()) & 0xF0) == 0);
  }
}

TEST_CASE("unpack4: a nonzero pad nibble of an odd count is ignored") {
  std::vector<std::byte> out(3);
  unpack4(bytes({0x21, 0xF3}), out);
  CHECK(out == bytes({0x1, 0x2, 0x3}));
  unpack4(bytes({0x21, 0x7B}), out);
  CHECK(out == bytes({0x1, 0x2, 0x0B}));  // int4 -5 as ml_dtypes holds it
}
