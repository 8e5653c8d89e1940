// Checksums: XXH3-64 everywhere (spec/FORMAT.md, "Checksums").
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include <xxhash.h>
#if defined(__x86_64__)
// The library's run-time dispatch to its AVX2/AVX-512 kernels (the plain entry points are
// compiled for baseline SSE2): about twice as fast on large chunks.
#include <xxh_x86dispatch.h>
#endif

namespace jtree {

/// XXH3-64 of `bytes` with `seed`.
inline uint64_t xxh3(std::span<const std::byte> bytes, uint64_t seed = 0) {
  return XXH3_64bits_withSeed(bytes.data(), bytes.size(), seed);
}

/// XXH3-64 computed piece by piece (hash data while it is still in the cache).
class Xxh3Stream {
 public:
  explicit Xxh3Stream(uint64_t seed) : state_(XXH3_createState()) {
    XXH3_64bits_reset_withSeed(state_, seed);
  }
  ~Xxh3Stream() { XXH3_freeState(state_); }
  Xxh3Stream(const Xxh3Stream&) = delete;
  Xxh3Stream& operator=(const Xxh3Stream&) = delete;
  void update(std::span<const std::byte> bytes) {
    XXH3_64bits_update(state_, bytes.data(), bytes.size());
  }
  uint64_t digest() const { return XXH3_64bits_digest(state_); }

 private:
  XXH3_state_t* state_;
};

/// The seed of a chunk's checksum: its segment's salt mixed with its offset in the segment,
/// so that a chunk read from the wrong place fails verification.
inline uint64_t chunk_seed(uint64_t segment_salt, uint64_t offset_in_segment) {
  return segment_salt ^ offset_in_segment;
}

}  // namespace jtree
