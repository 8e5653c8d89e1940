// Deterministic data that looks like trained weights to a compressor, shared by the tests and
// the benchmarks (header-only; not part of the library).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace jtree::synthetic {

/// `n` bf16 values drawn from normal(0, std), rounded to nearest even, as bytes.
inline std::vector<std::byte> bf16_normal(size_t n, float std, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> d(0, std);
  std::vector<std::byte> v(n * 2);
  for (size_t i = 0; i < n; ++i) {
    float f = d(g);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    uint16_t h = static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
    std::memcpy(v.data() + 2 * i, &h, 2);
  }
  return v;
}

}  // namespace jtree::synthetic
