// The n-d chunk grid of a chunked leaf (spec/FORMAT.md, "Chunk grid").
//
// Regular: a leaf of shape S with chunk shape C has G[d] = ceil(S[d] / C[d]) chunks along
// dimension d (0 when S[d] is 0); chunk g (a grid coordinate) covers [g*C, min((g+1)*C, S)) —
// edge chunks are clipped, not padded. Rectilinear (format version 2): each dimension lists its
// chunks' end positions; chunk g covers [end[d][g-1], end[d][g]) (from 0 for g = 0). Either way
// chunks are numbered row-major over G. A rank-0 leaf has one chunk.
#pragma once

#include <cstdint>
#include <optional>

#include "jtree/status.h"
#include "jtree/tree.h"

namespace jtree::format {

class ChunkGrid {
 public:
  /// A regular grid for shape/chunk that validation has accepted (same rank, chunk dims >= 1).
  ChunkGrid(const Shape& shape, const Shape& chunk);
  /// A rectilinear grid: `ends[d]` are dimension d's chunk ends (validated: strictly
  /// increasing, ending at shape[d]).
  static ChunkGrid rectilinear(const Shape& shape, std::vector<Shape> ends);
  /// The grid of a chunked leaf that validation has accepted (regular or rectilinear).
  static ChunkGrid of(const Leaf& leaf);

  const Shape& shape() const { return shape_; }
  /// Regular grids: the chunk shape; rectilinear ones: empty.
  const Shape& chunk() const { return chunk_; }
  bool regular() const { return ends_.empty(); }
  /// Start of chunk index `i` along dimension `d`.
  uint64_t begin(size_t d, uint64_t i) const;
  /// End of chunk index `i` along dimension `d`.
  uint64_t end(size_t d, uint64_t i) const;
  /// True when position `x` along dimension `d` is a chunk boundary (0 and the extent are).
  bool is_boundary(size_t d, uint64_t x) const;
  /// The largest chunk extent along each dimension.
  Shape max_chunk() const;
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
  std::vector<Shape> ends_;  // rectilinear only
  uint64_t count_ = 0;
};

/// Splits a leaf's flat `chunk_bounds` (the file's encoding) into per-dimension ends: dimension
/// d's list runs up to and including the first value equal to shape[d]. nullopt unless every
/// list is strictly increasing, starts above 0, ends exactly at its extent (every extent >= 1)
/// and nothing is left over.
std::optional<std::vector<Shape>> split_chunk_bounds(const Shape& shape, const Shape& bounds);

/// Number of chunks of a rectilinear grid, or nullopt when it overflows or exceeds `limit`.
std::optional<uint64_t> rectilinear_chunk_count(const std::vector<Shape>& ends,
                                                uint64_t limit = UINT64_MAX);

/// The flat `chunk_bounds` encoding of per-dimension ends.
Shape join_chunk_bounds(const std::vector<Shape>& ends);

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
/// As above for any grid: dimensions before the cut one have chunks of extent 1, those after
/// it are whole (the cut dimension may be cut irregularly).
bool chunks_concatenate_in_c_order(const ChunkGrid& grid);

}  // namespace jtree::format
