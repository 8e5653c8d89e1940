// jtree/chunk.h — the on-disk chunk types shared by the reader, the writer and the codec
// (spec/FORMAT.md section 8): how a chunk is encoded, one resolved index entry, and a segment.
//
// Plain values, no behaviour: the library's codec and format layers use them without the rest
// of the Reader API (jtree/reader.h includes this header, so users see them there as before).
#pragma once

#include <cstdint>

#include "jtree/export.h"

namespace jtree {

/// How a chunk's bytes are stored (the index's `encoding`, spec section 8.2): Raw is the raw
/// bytes; Planes is a plane-size table and one payload per plane, each plane either stored as
/// is or compressed by the leaf's codec (Leaf::codec, recorded in the header).
enum class ChunkEncoding : uint8_t { kRaw = 0, kPlanes = 1 };

/// One entry of the chunk index, resolved to absolute file offsets.
struct JTREE_API ChunkInfo {
  uint64_t file_offset = 0;  ///< absolute offset in the file
  uint64_t stored_size = 0;
  uint64_t raw_size = 0;     ///< bytes after decoding (stored form: 4-bit types packed)
  uint64_t checksum = 0;
  uint64_t seed = 0;         ///< the checksum's seed (segment salt XOR segment offset)
  uint32_t segment = 0;
  ChunkEncoding encoding = ChunkEncoding::kRaw;
  bool absent = false;       ///< not stored in this file (segment files)
};

/// A segment: a contiguous data region written by one writer (one host, or one append).
struct JTREE_API SegmentSpan {
  uint64_t file_offset = 0;
  uint64_t size = 0;
  uint64_t salt = 0;
};

}  // namespace jtree
