// Semantic validation of a decoded header and index (spec/FORMAT.md, "Validation").
// Everything a reader relies on is checked here, before any chunk is touched.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "format/index_codec.h"
#include "format/layout.h"
#include "jtree/options.h"
#include "jtree/status.h"
#include "jtree/tree.h"

namespace jtree::format {

/// Checks every leaf's spec (kind, dtype, shape, storage, chunk grid, filter, codec, inline
/// size) against the limits, and sets Leaf::first_chunk. `tree` must be finalized. Returns the
/// total number of chunks the index must list. Errors: Corruption naming the leaf's path, or
/// ResourceExhausted for limits.
Result<uint64_t> validate_leaves(Tree& tree, const Limits& limits);

/// The checks of validate_leaves for one leaf, without messages and without the tree: true when
/// `leaf` passes them, with its chunk count in `*chunks`. For decoders that check each leaf as
/// they build it; on false, validate_leaves gives the error (the same checks, with the message).
bool leaf_spec_valid(const Leaf& leaf, const Limits& limits, uint64_t* chunks);

/// The lowest format version that defines everything `leaf` uses (spec section 10.1): 2 for a
/// payload of a version-2 dtype, else 1. A writer sets the file's min_read_version (and
/// min_write_version) to the highest of its leaves'; a reader refuses a file whose
/// min_read_version is lower than one of its leaves' (Corruption: a reader of that older
/// version would misread or refuse it without saying why).
uint16_t leaf_min_read_version(const Leaf& leaf);

/// The highest leaf_min_read_version of the leaves of `tree` (1 for none). Leaves kept by an
/// append (Leaf::reuse) count as version 1: the file's own min_read_version covers them.
uint16_t tree_min_read_version(const Tree& tree);

/// Whether an Int leaf's `big_int` (non-empty) is canonical (section 6.2): at least 9 bytes,
/// the minimal two's complement encoding (so the value lies outside int64), and `int_value` 0.
bool big_int_canonical(std::string_view big_int, int64_t int_value);

/// Whether every byte of a Bool payload is 0 or 1 (section 6.3).
bool bools_valid(std::span<const std::byte> data);
bool bools_valid(std::string_view data);

/// A byte range of the file that holds metadata of the current generation.
struct Region {
  uint64_t offset = 0;
  uint64_t size = 0;
  const char* what = "";
};

/// What validate_index needs of the tree: its chunked leaves, decoded on demand (a reader
/// that has not built a Tree decodes each into one scratch Leaf).
struct ChunkedLeaves {
  std::span<const uint32_t> ids;                  ///< the chunked leaves, in order
  /// A leaf's spec: at least what a walk of its chunk grid reads, first_chunk set.
  std::function<void(uint32_t, Leaf&)> decode;
  std::function<std::string(uint32_t)> path;      ///< a leaf's key path (messages)
};

/// Checks the index against the tree and the file: chunk count, segments inside the file and
/// clear of metadata and of each other, every chunk inside its segment with a size that fits
/// its encoding and raw size, no two chunks overlapping, absent chunks only in segment files.
Status validate_index(const ChunkedLeaves& leaves, const IndexData& index,
                      uint64_t expected_chunks, uint64_t file_size,
                      std::span<const Region> metadata, FileKind kind, uint64_t generation);
/// The same for a finalized Tree whose leaves have first_chunk set.
Status validate_index(const Tree& tree, const IndexData& index, uint64_t expected_chunks,
                      uint64_t file_size, std::span<const Region> metadata, FileKind kind,
                      uint64_t generation);

/// Number of byte planes of a Planes chunk for a leaf (1 for Filter::kNone, else the stored
/// element size).
size_t planes_of(const Leaf& leaf);

/// for_each_chunk_raw_size for any leaf (rectilinear grids, any rank), through a
/// std::function and the leaf's ChunkGrid (what the inline version leaves to it).
void for_each_chunk_raw_size_general(const Leaf& leaf,
                                     const std::function<void(uint64_t, uint64_t)>& fn);

/// Calls fn(chunk number within the leaf, raw bytes of that chunk) for every chunk of a
/// validated chunked leaf, in order. Regular grids of rank up to 16 are walked inline without
/// allocating (an open runs it for every leaf of the file, where a std::function's capture
/// and a ChunkGrid's vectors were several allocations a leaf); others through
/// for_each_chunk_raw_size_general.
template <class Fn>
void for_each_chunk_raw_size(const Leaf& leaf, Fn&& fn) {
  constexpr size_t kInlineRank = 16;
  const size_t r = leaf.shape.size();
  if (!leaf.chunk_bounds.empty() || r > kInlineRank) {
    for_each_chunk_raw_size_general(leaf, fn);
    return;
  }
  const Shape& s = leaf.shape;
  const Shape& c = leaf.chunk_shape;
  // Chunks along each dim (as ChunkGrid counts them), the odometer, and the extent of the
  // current chunk along each dim: c[d], except the last chunk of the dim.
  std::array<uint64_t, kInlineRank> grid{}, g{}, extent{};
  uint64_t count = 1, elements = 1;
  for (size_t d = 0; d < r; ++d) {
    grid[d] = s[d] == 0 ? 0 : (s[d] - 1) / c[d] + 1;
    count *= grid[d];  // (validated not to overflow)
    extent[d] = std::min(c[d], s[d]);
    elements *= extent[d];
  }
  for (uint64_t k = 0; k < count; ++k) {
    fn(k, stored_bytes(leaf.dtype, elements));
    // Advance the odometer and recompute the product only for changed dims.
    for (size_t d = r; d-- > 0;) {
      if (++g[d] < grid[d]) {
        extent[d] = std::min(c[d], s[d] - g[d] * c[d]);
        break;
      }
      g[d] = 0;
      extent[d] = std::min(c[d], s[d]);
    }
    elements = 1;
    for (size_t d = 0; d < r; ++d) elements *= extent[d];
  }
}

/// Raw (stored-form) bytes of chunk `local` of a validated chunked leaf.
uint64_t chunk_raw_size(const Leaf& leaf, uint64_t local);

}  // namespace jtree::format
