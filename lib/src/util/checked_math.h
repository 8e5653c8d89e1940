// Overflow-checked arithmetic for numbers that come from files.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace jtree {

/// a * b, or nullopt on overflow.
inline std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

/// a + b, or nullopt on overflow.
inline std::optional<uint64_t> checked_add(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

/// Product of `dims`, or nullopt when it exceeds `limit` (or overflows) or when any one
/// dimension does. Every dimension is bounded even when another is 0: an empty array of shape
/// (0, 2^63) has no elements, but no NumPy, PyTorch or JAX array can have that shape, and slice
/// arithmetic on such a dimension overflows signed 64-bit indices.
inline std::optional<uint64_t> checked_product(std::span<const uint64_t> dims,
                                               uint64_t limit = UINT64_MAX) {
  bool empty = false;
  for (uint64_t d : dims) {
    if (d > limit) return std::nullopt;
    empty = empty || d == 0;
  }
  if (empty) return 0;
  uint64_t p = 1;
  for (uint64_t d : dims) {
    auto r = checked_mul(p, d);
    if (!r || *r > limit) return std::nullopt;
    p = *r;
  }
  return p;
}

/// True when [offset, offset + size) lies inside [0, bound).
inline bool range_within(uint64_t offset, uint64_t size, uint64_t bound) {
  return offset <= bound && size <= bound - offset;
}

/// x rounded up to a multiple of `align` (a power of two), or nullopt on overflow.
inline std::optional<uint64_t> align_up(uint64_t x, uint64_t align) {
  auto r = checked_add(x, align - 1);
  if (!r) return std::nullopt;
  return *r & ~(align - 1);
}

}  // namespace jtree
