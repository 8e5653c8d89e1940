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

/// Refuses a local target that exists and is not a jtree file, unless the options allow it.
Status check_target(std::string_view path_or_url, const WriteOptions& options);

}  // namespace jtree
