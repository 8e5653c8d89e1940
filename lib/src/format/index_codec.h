// The index flatbuffer (spec/FORMAT.md, "Index"). Pure functions over bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "jtree/chunk.h"
#include "jtree/options.h"
#include "jtree/status.h"

namespace jtree::format {

/// Chunk flag bit 0: the chunk is not stored in this file (segment files only).
inline constexpr uint8_t kChunkAbsent = 1;

/// One chunk entry, laid out exactly as the schema's `Chunk` struct (32 bytes).
struct ChunkRecord {
  uint64_t offset = 0;       ///< relative to the segment's file_offset
  uint64_t stored_size = 0;
  uint64_t checksum = 0;
  uint32_t segment = 0;
  uint8_t encoding = 0;
  uint8_t flags = 0;
  uint16_t reserved = 0;
};
static_assert(sizeof(ChunkRecord) == 32);

/// Present in segment files: which part of a multi-host save this is.
struct SegmentInfo {
  uint32_t process_index = 0;
  uint32_t process_count = 0;
  uint64_t save_id = 0;
  uint64_t head_offset = 0;  ///< 0, or the offset of the embedded checkpoint head (spec 11.1)
};

struct IndexData {
  uint64_t generation = 0;
  std::vector<SegmentSpan> segments;
  std::vector<ChunkRecord> chunks;
  std::optional<SegmentInfo> segment_info;
};

std::vector<std::byte> encode_index(const IndexData& index);

/// Verifies and decodes an index. Structural checks only (flatbuffer, sizes against limits);
/// the chunk entries are checked against the tree and the file by validate_index().
Result<IndexData> decode_index(std::span<const std::byte> bytes, const Limits& limits);

}  // namespace jtree::format
