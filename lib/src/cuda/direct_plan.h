// Which pieces of a load to a device can be read with O_DIRECT: those whose bytes are, byte for
// byte, a run of whole raw chunks stored back to back in the file (what jtree writes for
// leaves saved without compression). Such a piece is one file range, read straight into the
// pinned staging buffer and verified there chunk by chunk (lib/src/cuda/staging.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "cuda/staging_plan.h"
#include "io/direct_read.h"
#include "jtree/device.h"
#include "jtree/reader.h"

namespace jtree::staging {

/// One chunk of a FileRun: the leaf's local chunk number and its index entry.
struct RunChunk {
  uint64_t local = 0;
  ChunkInfo info;
};

/// The file bytes of a piece: [offset, offset + bytes), the chunks in file order.
struct FileRun {
  uint64_t offset = 0;
  uint64_t bytes = 0;
  std::vector<RunChunk> chunks;
};

/// The file run of `box` of leaf `leaf` when the box's C-order bytes (`bytes` of them) are
/// exactly whole raw chunks stored back to back: the box is a union of whole chunks that
/// differ along at most one dimension k, with extent 1 along every dimension before k (so
/// each chunk is a contiguous slab of the box), each chunk Raw, present, of its raw size, not
/// 4-bit. nullopt otherwise (compressed, a slice of a chunk, chunks apart in the file...):
/// such pieces are read through Reader::read_many as before.
std::optional<FileRun> piece_file_run(const Reader& reader, uint32_t leaf, const Box& box,
                                      uint64_t bytes);

/// A piece of several whole chunks along one dimension (as piece_file_run asks) cut into one
/// piece per chunk, in order: where padding separates the chunks in the file (raw chunks
/// start at WriteOptions::alignment, so chunks of sizes off that multiple are not back to
/// back), each chunk alone is still a run. Empty when the piece is not such a union.
std::vector<Piece> split_at_chunks(const Reader& reader, uint32_t leaf, const Piece& piece);

/// The file bytes the chunks of `requests` (of boxes `boxes`, checked) lie in, sorted and
/// merged where they are at most 1 MiB apart: what a load reads, for io::cached_fraction.
/// Leaves held inline in the header have none.
std::vector<io::FileExtent> load_extents(const Reader& reader,
                                         std::span<const DeviceRequest> requests,
                                         std::span<const Box> boxes);

}  // namespace jtree::staging
