// Cutting loads to a device into pieces that fit the pinned staging buffers, and packing the
// pieces into buffer loads. Pure functions over shapes: no I/O, no device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "jtree/tree.h"

namespace jtree::staging {

/// Part of a request's box whose bytes are one contiguous run of the request's destination:
/// `box` (in the leaf's coordinates) goes to bytes [dst_offset, dst_offset + bytes).
struct Piece {
  uint32_t request = 0;
  Box box;
  uint64_t dst_offset = 0;
  uint64_t bytes = 0;
};

/// A piece read with O_DIRECT (io/direct_read.h): the aligned file range [file_offset,
/// file_offset + length) covering the piece's bytes is read into the buffer at
/// `buffer_offset`, so that the piece's first byte lands at its offset in Batch::offsets.
struct DirectRead {
  size_t piece = 0;
  uint64_t buffer_offset = 0, file_offset = 0, length = 0;
};

/// Pieces that fill one staging buffer: pieces [first, last), piece i at buffer offset
/// `offsets[i - first]` (64-byte aligned, for DMA and for every dtype, except for pieces read
/// with O_DIRECT, which sit at their file offset's remainder past an aligned start).
struct Batch {
  size_t first = 0, last = 0;
  std::vector<uint64_t> offsets;
  uint64_t bytes = 0;  ///< payload bytes of its pieces
  std::vector<DirectRead> direct;  ///< its pieces read with O_DIRECT (pack_pieces_direct)
};

/// No file run: the piece is read through Reader::read_many (pack_pieces_direct).
inline constexpr uint64_t kNoFileRun = UINT64_MAX;

/// Appends to `out` the pieces of request `request`'s `box` (elements of `item` bytes), each
/// at most `max_bytes` (>= item), in destination order. A piece is the box's extent along
/// every dimension after some dimension k, a range along k and one index before it, so it is
/// contiguous in the C-order destination. Along k the ranges are whole multiples of the leaf's
/// chunk extent when they can be (`chunk_shape`, empty for unchunked leaves), so that raw
/// chunks land whole in a buffer and are read straight into it. Empty boxes give no piece.
void cut_box(uint32_t request, const Box& box, const Shape& chunk_shape, uint64_t item,
             uint64_t max_bytes, std::vector<Piece>& out);

/// Packs consecutive pieces (each at most `buffer_bytes`) into buffer loads of at most
/// `buffer_bytes`, in order.
std::vector<Batch> pack_pieces(const std::vector<Piece>& pieces, uint64_t buffer_bytes);

/// pack_pieces for a load that reads some pieces with O_DIRECT: piece i with
/// `file_offsets[i] != kNoFileRun` (the file offset of its bytes, one run of whole raw chunks)
/// gets the aligned file range around it (`offset_align`: the range's start and length;
/// `memory_align`: its place in the buffer, whose start must be aligned so) and a
/// DirectRead; that range takes the buffer space, the alignment slack before and after the
/// piece included, so no other piece is overwritten. A piece whose range would not fit in an
/// empty buffer is packed as an ordinary one (the caller cuts pieces at most buffer_bytes -
/// 2 x offset_align, so that none is). Both alignments are powers of two.
std::vector<Batch> pack_pieces_direct(const std::vector<Piece>& pieces,
                                      const std::vector<uint64_t>& file_offsets,
                                      uint64_t buffer_bytes, uint64_t offset_align,
                                      uint64_t memory_align);

/// `n` rounded up to a multiple of 64.
constexpr uint64_t round_up_64(uint64_t n) { return (n + 63) & ~uint64_t{63}; }

}  // namespace jtree::staging
