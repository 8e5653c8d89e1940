// The XXH3 device code (cuda/xxh3_device.h) compiled for the CPU, bit for bit against libxxhash's
// XXH3_64bits_withSeed: every length class and its edges, unaligned starts, many seeds. Needs no
// CUDA at all (it runs in every build); test_device_hash runs the same code on a GPU.
#include <doctest/doctest.h>
#include <xxhash.h>

#include <cstdint>
#include <ios>
#include <string>
#include <vector>

#include "cuda/xxh3_device.h"
#include "unit/xxh3_cases.h"

using jtree::portable_xxh3::hash64;
using namespace jtree::testing;

namespace {

// Checks hash64 on `len` bytes at `shift` bytes past an 8-byte boundary, with every seed.
void check_length(const std::vector<uint8_t>& buffer, uint64_t len, unsigned shift) {
  const uint8_t* p = buffer.data() + shift;
  for (uint64_t seed : xxh3_seeds()) {
    INFO("len ", len, ", start +", shift, ", seed 0x", std::hex, seed);
    CHECK(hash64(p, len, seed) == XXH3_64bits_withSeed(p, len, seed));
  }
}

}  // namespace

TEST_CASE("XXH3 device code on the CPU: every length class and its edges, aligned") {
  const std::vector<uint64_t> lengths = xxh3_edge_lengths();
  const std::vector<uint8_t> buffer = xxh3_random_bytes(lengths.back() + 8, 1);
  for (uint64_t len : lengths) check_length(buffer, len, 0);
}

TEST_CASE("XXH3 device code on the CPU: unaligned starts") {
  const std::vector<uint8_t> buffer = xxh3_random_bytes(70000, 2);
  for (unsigned shift = 1; shift < 8; ++shift) {
    for (uint64_t len : xxh3_edge_lengths()) {
      if (len + shift <= buffer.size()) check_length(buffer, len, shift);
    }
  }
}

TEST_CASE("XXH3 device code on the CPU: every length from 0 to 2100") {
  // (Every short class completely, the long path's first two blocks stripe by stripe.)
  const std::vector<uint8_t> buffer = xxh3_random_bytes(2100 + 8, 3);
  for (uint64_t len = 0; len <= 2100; ++len) {
    for (uint64_t seed : {uint64_t{0}, uint64_t{0xA5A5A5A5DEADBEEFULL}}) {
      INFO("len ", len, ", seed 0x", std::hex, seed);
      const uint8_t* p = buffer.data() + 3;
      CHECK(hash64(p, len, seed) == XXH3_64bits_withSeed(p, len, seed));
    }
  }
}

TEST_CASE("XXH3 device code on the CPU: chunks of several MiB (the long path's many blocks)") {
  const std::vector<uint8_t> buffer = xxh3_random_bytes((4 << 20) + 4096, 4);
  for (uint64_t len : {uint64_t{1} << 20, uint64_t{4} << 20, (uint64_t{4} << 20) + 4093}) {
    for (uint64_t seed : {uint64_t{0}, uint64_t{0xFEDCBA9876543210ULL}}) {
      CHECK(hash64(buffer.data(), len, seed) == XXH3_64bits_withSeed(buffer.data(), len, seed));
      CHECK(hash64(buffer.data() + 5, len - 5, seed) ==
            XXH3_64bits_withSeed(buffer.data() + 5, len - 5, seed));
    }
  }
}

TEST_CASE("XXH3 device code on the CPU: bytes of one value (zeros, ones) and known values") {
  // (Patterned inputs exercise the carries of the 128-bit products and of the sums.)
  for (uint8_t fill : {uint8_t{0x00}, uint8_t{0xff}, uint8_t{0x80}}) {
    const std::vector<uint8_t> buffer(5000, fill);
    for (uint64_t len : xxh3_edge_lengths()) {
      if (len <= buffer.size()) check_length(buffer, len, 0);
    }
  }
  // XXH3_64bits("") with seed 0, as the xxHash project publishes it.
  CHECK(hash64("", 0, 0) == 0x2D06800538D394C2ULL);
}
