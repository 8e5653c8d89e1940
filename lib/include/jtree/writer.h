// jtree/writer.h — saving trees: whole files, appended generations, compaction.
//
// A save streams: preamble and header first, then chunks as the compression pool finishes
// them (in completion order), then the index and the footer, and commits atomically. Memory
// stays bounded by WriteOptions::max_bytes_in_flight, whatever the tree's size: chunks are
// gathered from the caller's memory (or FillFn) one at a time. On any failure nothing is
// committed and a previous file at the target is left intact.
//
// The caller's array memory must stay valid and unchanged until the call returns.
//
// Thread safety: each call is independent; calls writing the same target at once race
// (the last commit wins for new files). Appends to one local file are serialized by an
// exclusive flock() and each appends to the generation it finds under the lock; a caller that
// planned its tree against an earlier read passes WriteOptions::append_base to be refused
// when another writer got in between.
#pragma once

#include <cstdint>
#include <string_view>

#include "jtree/export.h"
#include "jtree/io.h"
#include "jtree/options.h"
#include "jtree/status.h"
#include "jtree/tree.h"

namespace jtree {

/// What a write did.
struct JTREE_API WriteStats {
  uint64_t leaves = 0;
  uint64_t chunks = 0;          ///< chunks written by this call
  uint64_t raw_bytes = 0;       ///< payload bytes written by this call, before encoding
  uint64_t stored_bytes = 0;    ///< chunk bytes written by this call, after encoding
  uint64_t file_size = 0;       ///< the committed file's size
  uint64_t generation = 0;
  /// What writing the target took: write requests and bytes sent into it by this process
  /// (uploaded bodies on S3, where server-side copies of a commit send none).
  IoStats io;
};

/// Writes `tree` as a new file at a path or URL. Leaves take their data from Leaf::source or
/// Leaf::fill; their storage (inline or chunked), chunk grid, filter and codec are chosen from
/// Leaf::options and `options`. Errors: InvalidArgument (naming the leaf's path), IOError,
/// AlreadyExists (options.overwrite false), Aborted (progress callback).
JTREE_API Result<WriteStats> save(Tree tree, std::string_view path_or_url,
                                  const WriteOptions& options = {});

/// As above, into a sink the caller created; commits it on success, aborts it on failure.
JTREE_API Result<WriteStats> save(Tree tree, Sink& sink, const WriteOptions& options = {});

/// Adds a generation to an existing file: `tree` is the complete new tree. Leaves with
/// `reuse` set keep the data of that leaf of the current generation (no bytes rewritten);
/// the others are written after the current end of the file, followed by a new header,
/// index and footer. An interrupted append leaves the previous generation readable.
/// Errors: Aborted, with nothing written, when options.append_base names another generation
/// (or ETag) than the file's current one, or when the file was replaced as the append began.
JTREE_API Result<WriteStats> append(std::string_view path, Tree tree,
                                    const WriteOptions& options = {});

/// Rewrites `path` into `out_path` (or in place, atomically, when out_path is empty) with only
/// the current generation's live bytes; chunks are copied without re-encoding after their
/// checksums are verified.
JTREE_API Result<WriteStats> compact(std::string_view path, std::string_view out_path = {},
                                     const WriteOptions& options = {});

/// jtree's own version ("0.1.0") and the format version it writes.
JTREE_API std::string_view version_string();
inline constexpr uint16_t kFormatVersion = 3;

}  // namespace jtree
