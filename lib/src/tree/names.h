// The writer's check of the names the format says are UTF-8 (spec/FORMAT.md 6.1, 6.2, 6):
// keys, type names, metadata keys and text metadata values, and metadata keys unique. A reader refuses a file
// breaking these (Corruption); a writer refuses to write one (InvalidArgument).
#pragma once

#include "jtree/status.h"
#include "jtree/tree.h"

namespace jtree {

/// Checks a finalized tree's string keys, node and leaf type names and metadata keys are valid
/// UTF-8, the metadata keys unique, each of metadata_text_keys naming one entry whose value is
/// UTF-8 (6), and Int leaves' big_int canonical (6.2). Errors: InvalidArgument naming the node (its parent's
/// path and its position, since the key itself is what is wrong), the leaf or the metadata key.
Status check_names(const Tree& tree);

}  // namespace jtree
