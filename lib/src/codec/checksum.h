// Checksums: XXH3-64 everywhere (spec/FORMAT.md, "Checksums").
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include <xxhash.h>

namespace jtree {

/// XXH3-64 of `bytes` with `seed`.
inline uint64_t xxh3(std::span<const std::byte> bytes, uint64_t seed = 0) {
  return XXH3_64bits_withSeed(bytes.data(), bytes.size(), seed);
}

/// The seed of a chunk's checksum: its segment's salt mixed with its offset in the segment,
/// so that a chunk read from the wrong place fails verification.
inline uint64_t chunk_seed(uint64_t segment_salt, uint64_t offset_in_segment) {
  return segment_salt ^ offset_in_segment;
}

}  // namespace jtree
