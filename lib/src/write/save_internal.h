// Pieces of save() shared with segment saves and commits.
#pragma once

#include <string_view>

#include "jtree/io.h"
#include "jtree/multihost.h"
#include "jtree/writer.h"

namespace jtree {

/// Writes `tree` as generation 0 into `sink` and commits it: a checkpoint, or a segment file
/// of a multi-process save when `segment` is given (chunks outside this process's shards are
/// recorded absent). On error the sink is left to the caller to abort.
Status save_into(Tree& tree, Sink& sink, const WriteOptions& options, WriteStats* stats,
                 const SegmentOptions* segment);

/// Refuses a target (a local file or an s3:// object) that exists, is not empty and does not
/// start with the jtree magic, unless options.overwrite_foreign: AlreadyExists, the same
/// message for every backend. A missing target is fine. Every writer of a new file calls it
/// before creating its sink: save, commit_segments, compact into another file.
Status check_target(std::string_view path_or_url, const WriteOptions& options);

}  // namespace jtree
