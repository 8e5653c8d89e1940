// Packing of 4-bit dtypes: two elements per byte, the first of each pair in the low nibble.
#include "codec/pack4.h"

#include <cassert>
#include <cstdint>

namespace jtree::codec {
namespace {

uint8_t u8(std::byte b) { return static_cast<uint8_t>(b); }

// The low nibble of `v` as a byte: sign-extended (bit 3 copied into bits 4-7) or zero-extended.
// Branch-free so that the loops below vectorize.
template <bool kSign>
uint8_t widen(uint8_t v) {
  if constexpr (kSign) return static_cast<uint8_t>(static_cast<int8_t>(v << 4) >> 4);
  return v & 0x0F;
}

template <bool kSign>
void unpack4_impl(const std::byte* src, std::byte* dst, size_t count) {
  const size_t pairs = count / 2;
  for (size_t j = 0; j < pairs; ++j) {
    const uint8_t b = u8(src[j]);
    dst[2 * j] = std::byte(widen<kSign>(b));
    dst[2 * j + 1] = std::byte(widen<kSign>(b >> 4));
  }
  // An odd count ignores the pad nibble: a nonzero one is tolerated, not an error.
  if (count & 1) dst[2 * pairs] = std::byte(widen<kSign>(u8(src[pairs])));
}

}  // namespace

void pack4(std::span<const std::byte> src, std::span<std::byte> dst) {
  const size_t pairs = src.size() / 2;
  assert(dst.size() == pairs + (src.size() & 1));
  for (size_t j = 0; j < pairs; ++j) {
    // Only the low nibble of each element is meaningful (int4 arrives sign-extended).
    const uint8_t lo = u8(src[2 * j]) & 0x0F, hi = u8(src[2 * j + 1]) & 0x0F;
    dst[j] = std::byte(static_cast<uint8_t>(lo | (hi << 4)));
  }
  if (src.size() & 1) dst[pairs] = std::byte(u8(src[2 * pairs]) & 0x0F);  // pad nibble zero
}

void unpack4(std::span<const std::byte> src, std::span<std::byte> dst, bool sign_extend) {
  assert(src.size() == dst.size() / 2 + (dst.size() & 1));
  if (sign_extend) {
    unpack4_impl<true>(src.data(), dst.data(), dst.size());
  } else {
    unpack4_impl<false>(src.data(), dst.data(), dst.size());
  }
}

}  // namespace jtree::codec
