// Packing of 4-bit dtypes: two elements per byte, the first of each pair in the low nibble.
#include "codec/pack4.h"

#include <cassert>
#include <cstdint>

namespace jtree::codec {
namespace {

uint8_t u8(std::byte b) { return static_cast<uint8_t>(b); }

}  // namespace

void pack4(std::span<const std::byte> src, std::span<std::byte> dst) {
  const size_t pairs = src.size() / 2;
  assert(dst.size() == pairs + (src.size() & 1));
  for (size_t j = 0; j < pairs; ++j) {
    // Only the low nibble of each element is meaningful: ml_dtypes' own arithmetic can leave
    // int4 values sign-extended (-1 as 0xFF), and those store as the same nibble.
    const uint8_t lo = u8(src[2 * j]) & 0x0F, hi = u8(src[2 * j + 1]) & 0x0F;
    dst[j] = std::byte(static_cast<uint8_t>(lo | (hi << 4)));
  }
  if (src.size() & 1) dst[pairs] = std::byte(u8(src[2 * pairs]) & 0x0F);  // pad nibble zero
}

void unpack4(std::span<const std::byte> src, std::span<std::byte> dst) {
  assert(src.size() == dst.size() / 2 + (dst.size() & 1));
  // Each value zero-extended, for int4 too: the bytes ml_dtypes holds for an array it builds
  // (np.array([-1], ml_dtypes.int4).tobytes() == b'\x0f'). Branch-free, so it vectorizes.
  const std::byte* s = src.data();
  std::byte* d = dst.data();
  const size_t count = dst.size(), pairs = count / 2;
  for (size_t j = 0; j < pairs; ++j) {
    const uint8_t b = u8(s[j]);
    d[2 * j] = std::byte(static_cast<uint8_t>(b & 0x0F));
    d[2 * j + 1] = std::byte(static_cast<uint8_t>(b >> 4));
  }
  // An odd count ignores the pad nibble: a nonzero one is tolerated, not an error.
  if (count & 1) d[2 * pairs] = std::byte(static_cast<uint8_t>(u8(s[pairs]) & 0x0F));
}

}  // namespace jtree::codec
