// One lane's part of XXH3's long path when a warp of 32 lanes hashes one chunk (the GPU
// checksum kernel, xxh3_kernel.cu). Written as __host__ __device__ code, like xxh3_device.h, so
// that test_xxh3_device runs the same lane code on the CPU, with the warp's shuffles emulated,
// and proves the split bit-exact against libxxhash without a GPU.
//
// Why a warp can share a chunk: XXH3's long path (inputs over 240 bytes) adds each of a block's
// 16 stripes into 8 accumulators (input word i into accumulator i ^ 1, a keyed product into
// accumulator i) and only scrambles them at the end of the block. Sums mod 2^64 commute, so the
// 32 lanes take a block's 16 x 8 words at once: lane = word i + 8 x stripe group g, and the lane
// takes word i of stripes g, g + 4, g + 8, g + 12 (each of its 4 loads is 256 contiguous bytes
// across the warp). The lanes' sums meet in `warp_sum` (shuffles) and the scramble runs per
// block, in order, as the algorithm requires.
#pragma once

#include "cuda/xxh3_device.h"

namespace jtree::portable_xxh3 {

inline constexpr unsigned kWarpLanes = 32;
inline constexpr unsigned kStripeGroups = kWarpLanes / 8;                   // 4
inline constexpr unsigned kStripesPerLane = kStripesPerBlock / kStripeGroups;  // 4

// What one lane adds up in a block (or the tail): the keyed products of its word, into
// accumulator `word`, and its raw words, into accumulator `word ^ 1` (the neighbour lane's).
struct LanePartial {
  uint64_t products = 0;
  uint64_t words = 0;
};

// A lane's words of the block at `block`: word (lane % 8) of stripes lane / 8 + 4 k.
JTREE_HD inline void load_lane_words(const uint8_t* block, unsigned lane,
                                     uint64_t (&words)[kStripesPerLane]) {
  for (unsigned k = 0; k < kStripesPerLane; ++k) {
    words[k] = read64(block + k * (kWarpLanes * 8) + 8 * lane);
  }
}

class LaneState {
 public:
  JTREE_HD LaneState(unsigned lane, uint64_t seed)
      : word_(lane & 7), group_(lane >> 3), secret_{seed}, acc_(accumulator_init(word_)),
        scramble_key_(secret_(kScrambleKeyOffset / 8 + word_)) {
    // (Stripe s of a block is keyed 8 s bytes into the secret: word s + i.)
    for (unsigned k = 0; k < kStripesPerLane; ++k) keys_[k] = secret_(stripe(k) + word_);
  }

  // The lane's part of a whole block whose words are loaded.
  JTREE_HD LanePartial block(const uint64_t (&words)[kStripesPerLane]) const {
    LanePartial p;
    for (unsigned k = 0; k < kStripesPerLane; ++k) {
      p.products += stripe_product(words[k], keys_[k]);
      p.words += words[k];
    }
    return p;
  }

  // The lane's part of the stripes after the last whole block (at `tail`) and of the input's
  // last 64 bytes (`last_stripe`), taken by stripe group 0.
  JTREE_HD LanePartial tail(const uint8_t* tail, uint64_t stripes,
                            const uint8_t* last_stripe) const {
    LanePartial p;
    for (unsigned k = 0; k < kStripesPerLane && stripe(k) < stripes; ++k) {
      const uint64_t w = read64(tail + stripe(k) * kStripeBytes + 8 * word_);
      p.products += stripe_product(w, keys_[k]);
      p.words += w;
    }
    if (group_ == 0) {
      const uint64_t w = read64(last_stripe + 8 * word_);
      p.products += stripe_product(w, secret_bytes64(secret_, kLastStripeKeyOffset + 8 * word_));
      p.words += w;
    }
    return p;
  }

  // `sum`: the warp's total for accumulator word_ (warp_sum of every lane's part).
  JTREE_HD void end_block(uint64_t sum) { acc_ = scramble(acc_ + sum, scramble_key_); }
  JTREE_HD void end_tail(uint64_t sum) { acc_ += sum; }

  // Accumulator lane % 8 (the same in every stripe group); merge_accumulators takes lanes 0-7's.
  JTREE_HD uint64_t accumulator() const { return acc_; }

 private:
  JTREE_HD unsigned stripe(unsigned k) const { return group_ + kStripeGroups * k; }

  unsigned word_, group_;
  SeededSecret secret_;
  uint64_t acc_;
  uint64_t scramble_key_;
  uint64_t keys_[kStripesPerLane];
};

}  // namespace jtree::portable_xxh3
