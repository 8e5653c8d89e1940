// Byte-plane filters (spec/FORMAT.md, "Filters"): stateless, thread-safe, no allocation.
//
// shuffle: for n elements of `width` bytes, byte k of element i goes to dst[k * n + i]
//          (plane k holds byte k of every element: what makes float weights compress).
// float rotation: each `component`-byte little-endian word is rotated left by one bit, which
//          moves the sign bit below the mantissa and the exponent to the top byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace jtree::codec {

/// dst[k * n + i] = src[i * width + k] for n = src.size() / width. Sizes must be equal and a
/// multiple of width; width >= 1.
void shuffle(std::span<const std::byte> src, std::span<std::byte> dst, size_t width);

/// The inverse: dst[i * width + k] = src[k * n + i].
void unshuffle(std::span<const std::byte> src, std::span<std::byte> dst, size_t width);

/// Rotates every little-endian `component`-byte word of `data` left by one bit, in place.
/// component is 2, 4 or 8; data.size() a multiple of it.
void rotate_left_1(std::span<std::byte> data, size_t component);

/// The inverse (rotate right by one bit), in place.
void rotate_right_1(std::span<std::byte> data, size_t component);

}  // namespace jtree::codec
