// Deferred array leaves: the data comes from a Python callable, called only when the writer
// reaches the leaf, and dropped once every chunk has been written. A save of many such leaves
// (a conversion from another format, arrays generated on demand) holds only the few leaves
// being written at a time instead of the whole tree.
#pragma once

#include <nanobind/nanobind.h>

#include <memory>

#include "jtree/tree.h"

namespace jtpy {

namespace nb = nanobind;

struct DeferredState;

/// The fill function of a deferred leaf of `shape` with elements of `item` bytes. `fetch` (a
/// Python callable returning a C-contiguous, native-order array of that shape) is borrowed: the
/// caller keeps it alive as long as the tree. `state` receives what must be released, with the
/// GIL held, if the save ends before the leaf is fully written (release_deferred).
jtree::FillFn deferred_fill(nb::handle fetch, jtree::Shape shape, size_t item,
                            std::shared_ptr<DeferredState>* state);

/// Drops a deferred leaf's fetched array if it is still held (the GIL must be held).
void release_deferred(DeferredState& state);

}  // namespace jtpy
