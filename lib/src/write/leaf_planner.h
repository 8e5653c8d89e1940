// Deciding how each leaf is stored before anything is written (the header comes first).
#pragma once

#include "jtree/options.h"
#include "jtree/tree.h"

namespace jtree {

/// Resolves every leaf of a finalized `tree` that is not reused: storage (inline when the
/// stored payload fits WriteOptions::inline_threshold, else chunked), chunk grid, filter,
/// codec and level; inline payloads are gathered into Leaf::inline_data in stored form.
/// Reused leaves (append) must have been resolved by the caller. Errors: InvalidArgument
/// naming the leaf's path.
Status plan_leaves(Tree& tree, const WriteOptions& options);

/// The byte-swap unit of a dtype (item size, or component size for complex types), for
/// big-endian input.
size_t swap_unit(DType dtype);

/// True when `view` is C-contiguous for `shape` with elements of `item` bytes.
bool is_c_contiguous(const ArrayView& view, const Shape& shape, size_t item);

/// The filter used when a leaf does not choose one: FloatSplit for floats, Shuffle for wider
/// integers, None otherwise.
Filter default_filter(DType dtype);

}  // namespace jtree
