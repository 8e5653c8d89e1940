// The inputs that the XXH3 device code is checked on, on the CPU (test_xxh3_device) and on a GPU
// (test_device_hash): every length class of XXH3 and its edges, and seeds like the format's
// (a segment's random salt xor-ed with a chunk's offset: high bits set).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace jtree::testing {

// 0 | 1-3 | 4-8 | 9-16 | 17-128 | 129-240 | 241+: one stripe (64 B), one block (1024 B: 16
// stripes), block edges, several blocks.
inline std::vector<uint64_t> xxh3_edge_lengths() {
  return {0,    1,    2,    3,    4,    5,    7,    8,    9,    15,   16,   17,   31,   32,
          33,   63,   64,   65,   96,   97,   127,  128,  129,  130,  143,  144,  239,  240,
          241,  255,  256,  319,  320,  1000, 1023, 1024, 1025, 1087, 1088, 2047, 2048, 2049,
          3071, 3072, 3073, 4096, 5000, 65536, 65537, 100003};
}

inline std::vector<uint64_t> xxh3_seeds() {
  std::vector<uint64_t> seeds = {0, 1, 0x7f, 0xffffffffULL, 0x100000000ULL, 0x8000000000000000ULL,
                                 0xffffffffffffffffULL, 0x9E3779B185EBCA87ULL};
  std::mt19937_64 rng(50);
  for (int i = 0; i < 8; ++i) seeds.push_back(rng() ^ (uint64_t(i) << 22));  // salt ^ offset
  return seeds;
}

inline std::vector<uint8_t> xxh3_random_bytes(uint64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

}  // namespace jtree::testing
