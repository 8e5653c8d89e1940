// jtree/multihost.h — many processes writing one checkpoint.
//
// Each process of a job saves a *segment*: a valid .jtree file (file kind "segment") whose
// header describes the whole tree and whose chunks are the ones this process holds; the
// others are marked absent. After a barrier of the job's own runtime (MPI, JAX, torch —
// jtree brings no network of its own), one process commits: it checks that every segment is
// present and belongs to the same save, and assembles the single checkpoint file, copying each
// segment's chunk data as a block (copy_file_range on local file systems; the data never
// passes through the committing process where the backend can copy server-side). Checksums
// and offsets inside a segment are relative to the segment, so nothing is re-encoded.
//
//   // every process:
//   jtree::SegmentOptions so{.process_index = rank, .process_count = size, .save_id = id};
//   auto st = jtree::save_segment(tree, "ckpt.jtree", so);   // tree: leaves with shards
//   barrier();
//   if (rank == 0) st = jtree::commit_segments("ckpt.jtree", size);
//
// Sharded arrays: a leaf whose LeafInput has `shard_shape` set is cut into chunks that divide
// the shard shape, so every chunk lies in exactly one shard; `shards` lists the shards this
// process holds (replica 0 only: every byte must be written by exactly one process). Leaves
// without `shards` — replicated arrays, strings, bytes — are written by process 0 alone (every
// process passes the same tree; the others need not provide their data).
//
// Thread safety: each call is independent.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "jtree/export.h"
#include "jtree/options.h"
#include "jtree/status.h"
#include "jtree/tree.h"
#include "jtree/writer.h"

namespace jtree {

/// Which part of a multi-process save this process writes.
struct JTREE_API SegmentOptions {
  uint32_t process_index = 0;
  uint32_t process_count = 1;
  /// The same value in every process of one save (e.g. a random number broadcast by the
  /// coordinator): a segment left over from another save is refused at commit.
  uint64_t save_id = 0;
};

/// The path or URL of segment `index` of `count` for `target`: "<target>.seg-00002-of-00004".
JTREE_API std::string segment_path(std::string_view target, uint32_t index, uint32_t count);

/// Writes this process's segment of `target`. Every process must pass the same tree structure,
/// leaf specs and chunking (the same shapes, dtypes, options and shard shapes); only the data
/// held differs. Errors: InvalidArgument (a chunk straddling shards, a shard outside its array),
/// IOError.
JTREE_API Result<WriteStats> save_segment(Tree tree, std::string_view target,
                                          const SegmentOptions& segment,
                                          const WriteOptions& options = {});

/// Whether a save may replace what is at `target`, a local path or URL: nothing, an empty file,
/// or a jtree file; anything else (a typo in a path must not destroy someone's data) only with
/// options.overwrite_foreign. The one rule, the same for every backend, that every writer of a
/// new file applies before creating its sink: save, commit_segments, compact into another file.
/// Process 0 of a multi-process save calls it before the segments are written, so that a save
/// to a foreign file or object fails in every process before any data is written. An s3://
/// object is asked for its size and first bytes; http(s) targets pass (their sink refuses).
/// Errors: AlreadyExists (a foreign file), IOError (an S3 target that cannot be asked).
JTREE_API Status check_save_target(std::string_view target, const WriteOptions& options = {});

struct JTREE_API CommitOptions {
  bool keep_segments = false;  ///< leave the segment files in place after the commit
  bool verify_chunks = false;  ///< also verify every chunk's checksum (reads all the data)
  WriteOptions write;          ///< sync, overwrite, progress...
};

/// Assembles `target` from its `process_count` segments, then removes them. Fails (leaving no
/// target file) when a segment is missing, damaged, from another save, or when a chunk is
/// absent from every segment or present in two. Safe to run again after a crash: the target
/// appears only when complete and the segments are removed only after that.
JTREE_API Result<WriteStats> commit_segments(std::string_view target, uint32_t process_count,
                                             const CommitOptions& options = {});

}  // namespace jtree
