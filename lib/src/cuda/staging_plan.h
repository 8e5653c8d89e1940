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

/// Part of a piece copied straight from the file's mapping (zero copy): its bytes
/// [dst_offset, dst_offset + bytes) from file offset `file_offset`.
struct MappedPart {
  size_t piece = 0;
  uint64_t file_offset = 0, dst_offset = 0, bytes = 0;
};

/// Pieces that fill one staging buffer: pieces [first, last), piece i at buffer offset
/// `offsets[i - first]` (64-byte aligned, for DMA and for every dtype, except for pieces read
/// with O_DIRECT, which sit at their file offset's remainder past an aligned start).
struct Batch {
  size_t first = 0, last = 0;
  std::vector<uint64_t> offsets;
  uint64_t bytes = 0;  ///< payload bytes of its pieces
  std::vector<DirectRead> direct;  ///< its pieces read with O_DIRECT (pack_pieces_direct)
  /// Zero copy (pack_pieces_mapped): the batch copies `parts` straight from the file's
  /// mapping, whose pages [map_begin, map_end) (file offsets, page-aligned) it registers, and
  /// verifies the chunks of the pieces in `verified`; no buffer; first, last and offsets are
  /// unused.
  bool mapped = false;
  uint64_t map_begin = 0, map_end = 0;
  std::vector<MappedPart> parts;
  std::vector<size_t> verified;
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

/// Batches for a load that copies some pieces straight from the file's mapping (zero copy).
/// The pieces with `file_offsets[i] != kNoFileRun` (the file offset of their bytes) go to
/// mapped batches, one per window of the file (`window` rounded down to whole pages of `page`
/// bytes, at least one page) that holds some of their bytes, in file order: a piece that
/// crosses windows is copied in parts, and its chunks are verified by the batch of its first
/// part. A batch registers the pages its parts touch ([map_begin, map_end), up to `file_size`
/// rounded up to a page), so no page belongs to two batches (registering a page twice is an
/// error for CUDA). The other pieces follow, each run of consecutive ones packed as
/// pack_pieces does into buffers of `buffer_bytes`. `page` is a power of two.
std::vector<Batch> pack_pieces_mapped(const std::vector<Piece>& pieces,
                                      const std::vector<uint64_t>& file_offsets,
                                      uint64_t buffer_bytes, uint64_t window, uint64_t page,
                                      uint64_t file_size);

/// `n` rounded up to a multiple of 64.
constexpr uint64_t round_up_64(uint64_t n) { return (n + 63) & ~uint64_t{63}; }

}  // namespace jtree::staging
