// XXH3-64 with a seed, written as code that compiles both for the CPU and for a CUDA device, so
// that the GPU checksum kernel (xxh3_kernel.cu) and the plain C++ unit test run the SAME
// functions, and the test proves them bit-exact against libxxhash on the CI machine, which has
// no GPU.
//
// Why by hand: no library offers XXH3 as device code. libxxhash (xxhash.h) is host-only (its
// functions are not __device__, and its fast paths are SSE2/AVX2/NEON intrinsics); the CUDA
// toolkit has no hash functions of this kind. This is written from the algorithm's description
// (Cyan4973/xxHash, doc/xxhash_spec.md) for the one variant jtree's format uses:
// XXH3_64bits_withSeed with the default 192-byte secret (spec/FORMAT.md, "Checksums").
//
// The format's own hashing (codec/checksum.h) stays libxxhash: this header is for the device.
// It assumes a little-endian host, as the format does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define JTREE_HD __host__ __device__
#else
#define JTREE_HD
#endif

namespace jtree::portable_xxh3 {

inline constexpr uint64_t kPrime32_1 = 0x9E3779B1U;
inline constexpr uint64_t kPrime32_2 = 0x85EBCA77U;
inline constexpr uint64_t kPrime32_3 = 0xC2B2AE3DU;
inline constexpr uint64_t kPrime64_1 = 0x9E3779B185EBCA87ULL;
inline constexpr uint64_t kPrime64_2 = 0xC2B2AE3D27D4EB4FULL;
inline constexpr uint64_t kPrime64_3 = 0x165667B19E3779F9ULL;
inline constexpr uint64_t kPrime64_4 = 0x85EBCA77C2B2AE63ULL;
inline constexpr uint64_t kPrime64_5 = 0x27D4EB2F165667C5ULL;
inline constexpr uint64_t kPrimeMx1 = 0x165667919E3779F9ULL;
inline constexpr uint64_t kPrimeMx2 = 0x9FB21C651E98DF25ULL;

// The long path's shape for the default secret (192 bytes): a stripe is 64 bytes (8 words, one
// per accumulator); a block is 16 stripes, each keyed 8 bytes further into the secret; the
// accumulators are scrambled after every block.
inline constexpr unsigned kStripeBytes = 64;
inline constexpr unsigned kStripesPerBlock = 16;
inline constexpr unsigned kBlockBytes = kStripeBytes * kStripesPerBlock;  // 1024
inline constexpr unsigned kScrambleKeyOffset = 192 - kStripeBytes;        // 128
inline constexpr unsigned kLastStripeKeyOffset = 192 - kStripeBytes - 7;  // 121
inline constexpr unsigned kMergeKeyOffset = 11;
inline constexpr uint64_t kMaxShortInput = 240;  // longer inputs take the long path

// The default secret (kSecret), as 24 little-endian words.
#define JTREE_XXH3_SECRET_WORDS                                                           \
  0xbe4ba423396cfeb8ULL, 0x1cad21f72c81017cULL, 0xdb979083e96dd4deULL,                    \
      0x1f67b3b7a4a44072ULL, 0x78e5c0cc4ee679cbULL, 0x2172ffcc7dd05a82ULL,                \
      0x8e2443f7744608b8ULL, 0x4c263a81e69035e0ULL, 0xcb00c391bb52283cULL,                \
      0xa32e531b8b65d088ULL, 0x4ef90da297486471ULL, 0xd8acdea946ef1938ULL,                \
      0x3f349ce33f76faa8ULL, 0x1d4f0bc7c7bbdcf9ULL, 0x3159b4cd4be0518aULL,                \
      0x647378d9c97e9fc8ULL, 0xc3ebd33483acc5eaULL, 0xeb6313faffa081c5ULL,                \
      0x49daf0b751dd0d17ULL, 0x9e68d429265516d3ULL, 0xfca1477d58be162bULL,                \
      0xce31d07ad1b8f88fULL, 0x280416958f3acb45ULL, 0x7e404bbbcafbd7afULL
inline constexpr uint64_t kSecretWords[24] = {JTREE_XXH3_SECRET_WORDS};
#if defined(__CUDACC__)
// (Device code cannot index a host array: the same words in the device's constant memory.)
static __constant__ uint64_t kSecretWordsDevice[24] = {JTREE_XXH3_SECRET_WORDS};
#endif
#undef JTREE_XXH3_SECRET_WORDS

// ---- primitives ---------------------------------------------------------------------------

JTREE_HD inline uint64_t rotl64(uint64_t x, unsigned r) { return (x << r) | (x >> (64 - r)); }

JTREE_HD inline uint32_t swap32(uint32_t x) {
  return ((x << 24) & 0xff000000U) | ((x << 8) & 0x00ff0000U) | ((x >> 8) & 0x0000ff00U) |
         ((x >> 24) & 0x000000ffU);
}

JTREE_HD inline uint64_t swap64(uint64_t x) {
  return (static_cast<uint64_t>(swap32(static_cast<uint32_t>(x))) << 32) |
         swap32(static_cast<uint32_t>(x >> 32));
}

// The low and high halves of the 128-bit product, xor-ed together.
JTREE_HD inline uint64_t mul128_fold64(uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH__)
  return (a * b) ^ __umul64hi(a, b);
#elif defined(__SIZEOF_INT128__)
  __extension__ typedef unsigned __int128 U128;
  const U128 p = static_cast<U128>(a) * b;
  return static_cast<uint64_t>(p) ^ static_cast<uint64_t>(p >> 64);
#else
  const uint64_t lo_lo = (a & 0xffffffffU) * (b & 0xffffffffU);
  const uint64_t hi_lo = (a >> 32) * (b & 0xffffffffU);
  const uint64_t lo_hi = (a & 0xffffffffU) * (b >> 32);
  const uint64_t hi_hi = (a >> 32) * (b >> 32);
  const uint64_t cross = (lo_lo >> 32) + (hi_lo & 0xffffffffU) + lo_hi;
  const uint64_t hi = (hi_lo >> 32) + (cross >> 32) + hi_hi;
  return ((cross << 32) | (lo_lo & 0xffffffffU)) ^ hi;
#endif
}

// Little-endian loads at any alignment. On the device an unaligned word is put together from
// the two aligned words around it (which never leaves the allocation: an aligned word holding a
// byte of the input lies in the input's page).
JTREE_HD inline uint64_t read64(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  const uintptr_t address = reinterpret_cast<uintptr_t>(p);
  const unsigned shift = static_cast<unsigned>(address & 7) * 8;
  const uint64_t* q = reinterpret_cast<const uint64_t*>(address - (address & 7));
  if (shift == 0) return q[0];
  return (q[0] >> shift) | (q[1] << (64 - shift));
#else
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
#endif
}

JTREE_HD inline uint32_t read32(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
#else
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
#endif
}

// ---- the secret ---------------------------------------------------------------------------

JTREE_HD inline uint64_t secret_word(unsigned k) {
#if defined(__CUDA_ARCH__)
  return kSecretWordsDevice[k];
#else
  return kSecretWords[k];
#endif
}

// The 64 bits at byte `offset` of a secret given by its aligned words (offset + 8 <= 192).
template <typename Words>
JTREE_HD inline uint64_t secret_bytes64(Words words, unsigned offset) {
  const unsigned k = offset / 8, shift = (offset % 8) * 8;
  if (shift == 0) return words(k);
  return (words(k) >> shift) | (words(k + 1) << (64 - shift));
}

struct DefaultSecret {
  JTREE_HD uint64_t operator()(unsigned k) const { return secret_word(k); }
};

// The long path's secret for a seed: kSecret with the seed added to its even words and taken
// from its odd ones (a zero seed leaves kSecret as it is). Computed word by word, never stored.
struct SeededSecret {
  uint64_t seed;
  JTREE_HD uint64_t operator()(unsigned k) const {
    return (k & 1) ? secret_word(k) - seed : secret_word(k) + seed;
  }
};

JTREE_HD inline uint64_t default_secret64(unsigned offset) {
  return secret_bytes64(DefaultSecret{}, offset);
}

// ---- finishing ----------------------------------------------------------------------------

JTREE_HD inline uint64_t xxh64_avalanche(uint64_t h) {
  h ^= h >> 33;
  h *= kPrime64_2;
  h ^= h >> 29;
  h *= kPrime64_3;
  return h ^ (h >> 32);
}

JTREE_HD inline uint64_t avalanche(uint64_t h) {
  h ^= h >> 37;
  h *= kPrimeMx1;
  return h ^ (h >> 32);
}

JTREE_HD inline uint64_t rrmxmx(uint64_t h, uint64_t len) {
  h ^= rotl64(h, 49) ^ rotl64(h, 24);
  h *= kPrimeMx2;
  h ^= (h >> 35) + len;
  h *= kPrimeMx2;
  return h ^ (h >> 28);
}

// ---- inputs of 0 to 240 bytes (the default secret, the seed mixed in as they go) ------------

JTREE_HD inline uint64_t hash_empty(uint64_t seed) {
  return xxh64_avalanche(seed ^ default_secret64(56) ^ default_secret64(64));
}

JTREE_HD inline uint64_t hash_1to3(const uint8_t* in, uint64_t len, uint64_t seed) {
  const uint32_t combined = (static_cast<uint32_t>(in[0]) << 16) |
                            (static_cast<uint32_t>(in[len >> 1]) << 24) |
                            static_cast<uint32_t>(in[len - 1]) |
                            (static_cast<uint32_t>(len) << 8);
  const uint64_t secret = default_secret64(0);
  const uint64_t bitflip = ((secret & 0xffffffffU) ^ (secret >> 32)) + seed;
  return xxh64_avalanche(combined ^ bitflip);
}

JTREE_HD inline uint64_t hash_4to8(const uint8_t* in, uint64_t len, uint64_t seed) {
  seed ^= static_cast<uint64_t>(swap32(static_cast<uint32_t>(seed))) << 32;
  const uint64_t first = read32(in), last = read32(in + len - 4);
  const uint64_t bitflip = (default_secret64(8) ^ default_secret64(16)) - seed;
  return rrmxmx((last + (first << 32)) ^ bitflip, len);
}

JTREE_HD inline uint64_t hash_9to16(const uint8_t* in, uint64_t len, uint64_t seed) {
  const uint64_t bitflip_lo = (default_secret64(24) ^ default_secret64(32)) + seed;
  const uint64_t bitflip_hi = (default_secret64(40) ^ default_secret64(48)) - seed;
  const uint64_t lo = read64(in) ^ bitflip_lo;
  const uint64_t hi = read64(in + len - 8) ^ bitflip_hi;
  return avalanche(len + swap64(lo) + hi + mul128_fold64(lo, hi));
}

// 16 input bytes against 16 secret bytes at `offset`.
JTREE_HD inline uint64_t mix16(const uint8_t* in, unsigned offset, uint64_t seed) {
  return mul128_fold64(read64(in) ^ (default_secret64(offset) + seed),
                       read64(in + 8) ^ (default_secret64(offset + 8) - seed));
}

// 17 to 128 bytes: pairs of 16-byte pieces from both ends, working inwards.
JTREE_HD inline uint64_t hash_17to128(const uint8_t* in, uint64_t len, uint64_t seed) {
  uint64_t acc = len * kPrime64_1;
  const unsigned pairs = static_cast<unsigned>((len - 1) / 32);  // 0..3: pairs beyond the first
  for (unsigned i = 0; i <= pairs; ++i) {
    acc += mix16(in + 16 * i, 32 * i, seed);
    acc += mix16(in + len - 16 * (i + 1), 32 * i + 16, seed);
  }
  return avalanche(acc);
}

// 129 to 240 bytes: eight 16-byte pieces, avalanche, the rest at secret offset 3, the last 16.
JTREE_HD inline uint64_t hash_129to240(const uint8_t* in, uint64_t len, uint64_t seed) {
  uint64_t acc = len * kPrime64_1;
  for (unsigned i = 0; i < 8; ++i) acc += mix16(in + 16 * i, 16 * i, seed);
  acc = avalanche(acc);
  const unsigned rounds = static_cast<unsigned>(len / 16);
  for (unsigned i = 8; i < rounds; ++i) acc += mix16(in + 16 * i, 16 * (i - 8) + 3, seed);
  acc += mix16(in + len - 16, 136 - 17, seed);
  return avalanche(acc);
}

JTREE_HD inline uint64_t hash_short(const uint8_t* in, uint64_t len, uint64_t seed) {
  if (len > 128) return hash_129to240(in, len, seed);
  if (len > 16) return hash_17to128(in, len, seed);
  if (len > 8) return hash_9to16(in, len, seed);
  if (len >= 4) return hash_4to8(in, len, seed);
  if (len > 0) return hash_1to3(in, len, seed);
  return hash_empty(seed);
}

// ---- the long path (more than 240 bytes): 8 accumulators, keyed by the seeded secret --------
// The per-word steps below are shared with the device kernel, which spreads a block's 16
// stripes over a warp (their sums commute) and keeps the blocks in order.

// The initial value of accumulator i.
JTREE_HD inline uint64_t accumulator_init(unsigned i) {
  switch (i) {
    case 0: return kPrime32_3;
    case 1: return kPrime64_1;
    case 2: return kPrime64_2;
    case 3: return kPrime64_3;
    case 4: return kPrime64_4;
    case 5: return kPrime32_2;
    case 6: return kPrime64_5;
    default: return kPrime32_1;
  }
}

// What input word i of a stripe adds to accumulator i (the word itself goes to i ^ 1).
JTREE_HD inline uint64_t stripe_product(uint64_t word, uint64_t key) {
  const uint64_t keyed = word ^ key;
  return (keyed & 0xffffffffU) * (keyed >> 32);
}

// Accumulator i after a block, given its key (the secret's word at kScrambleKeyOffset + 8 i).
JTREE_HD inline uint64_t scramble(uint64_t acc, uint64_t key) {
  acc ^= acc >> 47;
  acc ^= key;
  return acc * kPrime32_1;
}

// The hash from the 8 final accumulators.
JTREE_HD inline uint64_t merge_accumulators(const uint64_t acc[8], uint64_t len, uint64_t seed) {
  const SeededSecret secret{seed};
  uint64_t result = len * kPrime64_1;
  for (unsigned j = 0; j < 4; ++j) {
    const unsigned offset = kMergeKeyOffset + 16 * j;
    result += mul128_fold64(acc[2 * j] ^ secret_bytes64(secret, offset),
                            acc[2 * j + 1] ^ secret_bytes64(secret, offset + 8));
  }
  return avalanche(result);
}

JTREE_HD inline void accumulate_stripe(uint64_t acc[8], const uint8_t* in, SeededSecret secret,
                                       unsigned key_offset) {
  for (unsigned i = 0; i < 8; ++i) {
    const uint64_t word = read64(in + 8 * i);
    acc[i ^ 1] += word;
    acc[i] += stripe_product(word, secret_bytes64(secret, key_offset + 8 * i));
  }
}

JTREE_HD inline void accumulate_stripes(uint64_t acc[8], const uint8_t* in, SeededSecret secret,
                                        uint64_t stripes) {
  for (unsigned s = 0; s < stripes; ++s) {
    accumulate_stripe(acc, in + s * kStripeBytes, secret, 8 * s);
  }
}

// The stripes after the last whole block, 0 to 15 (an input that ends a block exactly takes its
// last block here, unscrambled: the blocks scrambled are those before the input's last byte).
JTREE_HD inline uint64_t tail_stripes(uint64_t len) {
  return ((len - 1) % kBlockBytes) / kStripeBytes;
}

JTREE_HD inline uint64_t hash_long(const uint8_t* in, uint64_t len, uint64_t seed) {
  const SeededSecret secret{seed};
  uint64_t acc[8];
  for (unsigned i = 0; i < 8; ++i) acc[i] = accumulator_init(i);
  const uint64_t blocks = (len - 1) / kBlockBytes;
  for (uint64_t b = 0; b < blocks; ++b) {
    accumulate_stripes(acc, in + b * kBlockBytes, secret, kStripesPerBlock);
    for (unsigned i = 0; i < 8; ++i) acc[i] = scramble(acc[i], secret(kScrambleKeyOffset / 8 + i));
  }
  accumulate_stripes(acc, in + blocks * kBlockBytes, secret, tail_stripes(len));
  accumulate_stripe(acc, in + len - kStripeBytes, secret, kLastStripeKeyOffset);
  return merge_accumulators(acc, len, seed);
}

/// XXH3_64bits_withSeed(data, len, seed), bit for bit.
JTREE_HD inline uint64_t hash64(const void* data, uint64_t len, uint64_t seed) {
  const auto* in = static_cast<const uint8_t*>(data);
  return len <= kMaxShortInput ? hash_short(in, len, seed) : hash_long(in, len, seed);
}

}  // namespace jtree::portable_xxh3
