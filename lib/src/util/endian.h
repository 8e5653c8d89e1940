// Little-endian loads and stores of fixed-width integers at unaligned addresses.
// The file format is little-endian throughout; these are the only place that knows it.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace jtree {

static_assert(std::endian::native == std::endian::little,
              "jtree assumes a little-endian host (x86-64, AArch64)");

template <typename T>
inline T load_le(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T>
inline void store_le(std::byte* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

}  // namespace jtree
