// Planning a read: which chunks each request overlaps, where each chunk's part goes, and
// which byte ranges to fetch (neighbouring chunks coalesced).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "format/index_codec.h"
#include "jtree/reader.h"
#include "read/read_tree.h"

namespace jtree {

/// Where one part of a decoded chunk goes: `region` elements starting at `chunk_start`
/// (relative to the chunk's origin) into request `request`'s buffer at `dst_start` (relative
/// to the request box's origin).
struct ChunkTarget {
  uint32_t request = 0;
  Shape chunk_start;
  Shape dst_start;
  Shape region;
};

/// One chunk to fetch and decode, with every request part it serves.
struct ChunkJob {
  uint64_t chunk = 0;  ///< global chunk number
  uint32_t leaf = 0;
  uint64_t local = 0;  ///< chunk number within the leaf's grid
  Box box;             ///< the chunk's box in the leaf
  uint64_t file_offset = 0;
  uint64_t stored_size = 0;
  std::vector<ChunkTarget> targets;
};

/// A contiguous byte range fetched with one request, and the chunks inside it.
struct FetchUnit {
  uint64_t offset = 0;
  uint64_t size = 0;
  std::vector<uint32_t> jobs;  ///< indices into ReadPlan::jobs, by file offset
};

struct ReadPlan {
  std::vector<ChunkJob> jobs;
  std::vector<FetchUnit> units;
  uint64_t fetch_bytes = 0;
};

/// A byte range to fetch (a chunk, or any other bytes a caller wants), known by `id`.
struct FetchExtent {
  uint64_t offset = 0;
  uint64_t size = 0;
  uint32_t id = 0;
};

/// Groups extents sorted by offset into fetch units: neighbours at most
/// options.coalesce_gap apart are merged while the unit stays within options.max_fetch_bytes
/// (a single larger extent is a unit of its own). FetchUnit::jobs holds the extents' ids.
/// The one coalescing rule of every read (loads and Reader::verify).
std::vector<FetchUnit> coalesce_fetches(std::span<const FetchExtent> sorted,
                                        const ReadOptions& options);

/// Bytes [begin, begin + size) of job `job`'s stored chunk.
struct ChunkPiece {
  uint32_t job = 0;
  uint64_t begin = 0;
  uint64_t size = 0;
};

/// A byte range fetched with one request whose ends need not be chunk ends: the pieces of the
/// chunks it holds, by file offset (a chunk may span several of them).
struct StreamUnit {
  uint64_t offset = 0;
  uint64_t size = 0;
  std::vector<ChunkPiece> pieces;
};

/// Cuts the stored bytes of `jobs` (indices into `plan.jobs`, sorted by file offset) into
/// requests of options.max_fetch_bytes, chunk ends ignored: neighbours at most
/// options.coalesce_gap apart share a request, so a run of chunks costs about its size over
/// the fetch size in requests (whole chunks per request would cost one more for each short
/// chunk, a leaf's last). For remote objects, where each request is a round trip.
std::vector<StreamUnit> cut_stream(const ReadPlan& plan, std::span<const uint32_t> jobs,
                                   const ReadOptions& options);

/// Plans chunked requests (the caller handles inline leaves and checks the requests).
/// `boxes[i]` is request i's box (already validated). Errors: NotFound for absent chunks.
Result<ReadPlan> plan_reads(const ReadTree& tree, const format::IndexData& index,
                            std::span<const ReadRequest> requests, std::span<const Box> boxes,
                            const ReadOptions& options);

}  // namespace jtree
