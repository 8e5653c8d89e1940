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

// (The check every writer of a new file makes before creating its sink is the public
// jtree::check_save_target, jtree/multihost.h.)

}  // namespace jtree
