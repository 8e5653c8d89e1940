// The XXH3 device code (cuda/xxh3_device.h) compiled for the CPU, bit for bit against libxxhash's
// XXH3_64bits_withSeed: every length class and its edges, unaligned starts, many seeds; and the
// GPU kernel's split of the long path over a warp (cuda/xxh3_warp.h), its 32 lanes run in
// lockstep here with the kernel's shuffles emulated. Needs no CUDA at all (it runs in every
// build); test_device_hash runs the same code on a GPU.
#include <doctest/doctest.h>
#include <xxhash.h>

#include <cstdint>
#include <ios>
#include <string>
#include <vector>

#include "cuda/xxh3_device.h"
#include "cuda/xxh3_warp.h"
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

namespace px = jtree::portable_xxh3;
constexpr unsigned kLanes = px::kWarpLanes;

// The kernel's warp_sum (xxh3_kernel.cu) over all lanes at once: __shfl_xor_sync(v, m) in lane l
// is lane (l ^ m)'s v.
std::vector<uint64_t> emulated_warp_sum(const std::vector<px::LanePartial>& parts) {
  std::vector<uint64_t> sum(kLanes), step(kLanes);
  for (unsigned l = 0; l < kLanes; ++l) sum[l] = parts[l].products + parts[l ^ 1].words;
  for (unsigned mask : {8U, 16U}) {
    for (unsigned l = 0; l < kLanes; ++l) step[l] = sum[l] + sum[l ^ mask];
    sum = step;
  }
  return sum;
}

// The kernel's warp_hash_long with its 32 lanes in lockstep.
uint64_t emulated_warp_hash_long(const uint8_t* in, uint64_t len, uint64_t seed) {
  std::vector<px::LaneState> lanes;
  for (unsigned l = 0; l < kLanes; ++l) lanes.emplace_back(l, seed);
  std::vector<px::LanePartial> parts(kLanes);
  const uint64_t blocks = (len - 1) / px::kBlockBytes;
  for (uint64_t b = 0; b < blocks; ++b) {
    for (unsigned l = 0; l < kLanes; ++l) {
      uint64_t words[px::kStripesPerLane];
      px::load_lane_words(in + b * px::kBlockBytes, l, words);
      parts[l] = lanes[l].block(words);
    }
    const std::vector<uint64_t> sums = emulated_warp_sum(parts);
    for (unsigned l = 0; l < kLanes; ++l) lanes[l].end_block(sums[l]);
  }
  for (unsigned l = 0; l < kLanes; ++l) {
    parts[l] = lanes[l].tail(in + blocks * px::kBlockBytes, px::tail_stripes(len),
                             in + len - px::kStripeBytes);
  }
  const std::vector<uint64_t> sums = emulated_warp_sum(parts);
  for (unsigned l = 0; l < kLanes; ++l) lanes[l].end_tail(sums[l]);
  // (Every lane merges the accumulators of lanes 0-7; each stripe group holds the same ones.)
  uint64_t acc[8];
  for (unsigned i = 0; i < 8; ++i) {
    for (unsigned g = 1; g < kLanes / 8; ++g) {
      CHECK(lanes[8 * g + i].accumulator() == lanes[i].accumulator());
    }
    acc[i] = lanes[i].accumulator();
  }
  return px::merge_accumulators(acc, len, seed);
}

}  // namespace

TEST_CASE("XXH3 on a warp (the GPU kernel's split), emulated on the CPU: long inputs") {
  const std::vector<uint8_t> buffer = xxh3_random_bytes((1 << 20) + 8, 5);
  std::vector<uint64_t> lengths;
  for (uint64_t len : xxh3_edge_lengths()) {
    if (len > px::kMaxShortInput) lengths.push_back(len);
  }
  for (uint64_t len = 241; len <= 3200; len += 37) lengths.push_back(len);
  lengths.push_back(1 << 20);
  for (uint64_t len : lengths) {
    for (unsigned shift : {0U, 5U}) {
      for (uint64_t seed : xxh3_seeds()) {
        INFO("len ", len, ", start +", shift, ", seed 0x", std::hex, seed);
        const uint8_t* p = buffer.data() + shift;
        CHECK(emulated_warp_hash_long(p, len, seed) == XXH3_64bits_withSeed(p, len, seed));
      }
    }
  }
}

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
