// The regular n-d chunk grid of a chunked leaf (spec/FORMAT.md, "Chunk grid").
//
// A leaf of shape S with chunk shape C has G[d] = ceil(S[d] / C[d]) chunks along dimension d
// (0 when S[d] is 0); chunk g (a grid coordinate) covers [g*C, min((g+1)*C, S)) — edge chunks
// are clipped, not padded. Chunks are numbered row-major over G. A rank-0 leaf has one chunk.
#pragma once

#include <cstdint>
#include <optional>

#include "jtree/status.h"
#include "jtree/tree.h"

namespace jtree::format {

class ChunkGrid {
 public:
  /// A grid for shape/chunk that validation has accepted (same rank, chunk dims >= 1).
  ChunkGrid(const Shape& shape, const Shape& chunk);

  const Shape& shape() const { return shape_; }
  const Shape& chunk() const { return chunk_; }
  const Shape& grid() const { return grid_; }
  size_t rank() const { return shape_.size(); }
  /// Number of chunks.
  uint64_t count() const { return count_; }

  /// Grid coordinate of chunk `linear`.
  Shape coord(uint64_t linear) const;
  /// Linear number of grid coordinate `g`.
  uint64_t linear(const Shape& g) const;
  /// The box chunk `linear` covers.
  Box box(uint64_t linear) const;
  /// Elements in chunk `linear`.
  uint64_t elements(uint64_t linear) const;
  /// The grid coordinates [lo, hi) of the chunks overlapping `box` (empty box: lo == hi
  /// somewhere).
  void overlapping(const Box& box, Shape& lo, Shape& hi) const;

 private:
  Shape shape_, chunk_, grid_;
  uint64_t count_ = 0;
};

/// Number of chunks of a grid, or nullopt when it overflows or exceeds `limit`.
std::optional<uint64_t> grid_chunk_count(const Shape& shape, const Shape& chunk,
                                         uint64_t limit = UINT64_MAX);

/// The default chunk shape for a leaf: C-order slabs of about `target_bytes` stored bytes —
/// leading dimensions are cut first and trailing ones kept whole, so that every chunk is a
/// contiguous byte range of the array (whole-leaf reads decode straight into place).
Shape default_chunk_shape(const Shape& shape, uint32_t stored_bits, uint64_t target_bytes);

/// True when the chunks of the grid, concatenated in grid order, are the C-order array: the
/// grid cuts one dimension k into runs, every dimension before k into single indices, and
/// keeps every dimension after k whole. A leaf stored so, every chunk Raw and back to back,
/// is its array in the file (Reader::mapped_leaf).
bool chunks_concatenate_in_c_order(const Shape& shape, const Shape& chunk);

}  // namespace jtree::format
