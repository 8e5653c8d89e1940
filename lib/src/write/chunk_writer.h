// Streaming chunks into a sink: encoding on a pool, placement in completion order, memory
// bounded by bytes in flight.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "format/index_codec.h"
#include "jtree/io.h"
#include "jtree/reader.h"
#include "jtree/writer.h"

namespace jtree {

/// Appends chunks to a sink as one segment. put() is thread-safe: it serializes placement,
/// aligns raw chunks, and computes each chunk's checksum from its segment offset.
class ChunkStream {
 public:
  ChunkStream(Sink& sink, uint32_t alignment, uint64_t salt, uint32_t segment_id)
      : sink_(sink), alignment_(alignment), salt_(salt), segment_id_(segment_id) {}

  /// Pads the sink to the alignment; the segment starts there.
  Status begin();
  /// Writes one stored chunk and describes it in `record`.
  Status put(std::span<const std::byte> stored, ChunkEncoding encoding,
             format::ChunkRecord* record);
  /// One chunk of a raw run: its stored bytes, and whether they stay valid until the run is
  /// written (a view of the caller's array) or only until the next chunk is asked for.
  struct RunChunk {
    std::span<const std::byte> bytes;
    bool stable = false;
  };
  /// Writes `count` Raw chunks back to back in order with no other chunk between them and no
  /// padding but before the first, which is aligned: a leaf whose chunks are all Raw then lies
  /// in the file as its C-order array, mappable whole (spec/FORMAT.md 8.2). `chunk(k)` gives
  /// chunk k; records[k] describes it. The stream is held for the whole run; when every chunk
  /// is stable, up to `threads` threads hash them while the chunks are written.
  Status put_raw_run(uint64_t count, const std::function<Result<RunChunk>(uint64_t)>& chunk,
                     format::ChunkRecord* records, int threads = 1);
  /// The segment written so far.
  SegmentSpan span() const;
  uint32_t segment_id() const { return segment_id_; }

 private:
  Sink& sink_;
  const uint32_t alignment_;
  const uint64_t salt_;
  const uint32_t segment_id_;
  uint64_t start_ = 0;
  std::mutex mu_;
};

/// Pads the sink with zeros up to a multiple of `alignment`.
Status pad_to(Sink& sink, uint64_t alignment);

/// Pads with zeros after a segment's data up to a multiple of 64 bytes from the segment's start
/// (the unit a multi-process commit copies in; spec/FORMAT.md, section 11.1).
Status pad_segment_end(Sink& sink, const SegmentSpan& segment);

/// A random 64-bit value (segment salts, save ids).
uint64_t random_u64();

/// Encodes and writes every chunk of the chunked leaves of `tree` that are not reused, in
/// parallel, filling `records` (indexed by global chunk number; Leaf::first_chunk must be
/// set). In a segment of a multi-process save (`process_index` set), chunks this process does
/// not hold — outside its shards, or of an unsharded leaf when it is not process 0 — are
/// recorded absent; in a plain save they are an error. Adds to `stats`. Errors name the leaf.
Status write_chunks(const Tree& tree, ChunkStream& stream,
                    std::vector<format::ChunkRecord>& records, const WriteOptions& options,
                    WriteStats* stats, std::optional<uint32_t> process_index = std::nullopt);

}  // namespace jtree
