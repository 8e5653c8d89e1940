// jtree/slice.h — basic indexing (NumPy's rules) resolved into the box of an array to read.
//
// The one place that turns an index such as [3, 10:-2, ::4, ..., None] into the box a
// Reader reads and the way the result is picked from that box. The `jtree get` command (its
// KEY[SLICE] argument) and the Python LazyArray (`f["w"][...]`, through the native module)
// both call resolve_index; Reader::read_many then checks the box it is given.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "jtree/export.h"
#include "jtree/status.h"
#include "jtree/tree.h"

namespace jtree {

/// One item of a basic index.
struct JTREE_API IndexItem {
  enum class Kind : uint8_t {
    kInt = 0,       ///< one position (negative: from the end); the dimension is dropped
    kSlice = 1,     ///< start:stop:step, each optional (NumPy's defaults), step != 0
    kEllipsis = 2,  ///< '...': as many full slices as the other items leave (at most one)
    kNewAxis = 3,   ///< None / np.newaxis: a new dimension of extent 1, no array dimension
  };
  Kind kind = Kind::kSlice;
  std::optional<int64_t> start;  ///< kInt: the position; kSlice: the start
  std::optional<int64_t> stop;   ///< kSlice only
  std::optional<int64_t> step;   ///< kSlice only (absent: 1)
};

/// How one dimension of the result is picked from the box that was read (one entry per index
/// item after '...' is expanded, in order).
struct JTREE_API IndexAxis {
  IndexItem::Kind kind;  ///< kInt (dropped: the box is 1 long there), kSlice or kNewAxis
  uint64_t offset = 0;   ///< kSlice: the first element, relative to the box's begin
  int64_t step = 1;      ///< kSlice: the stride (negative: backwards from offset)
  uint64_t count = 0;    ///< kSlice: elements picked (0: an empty dimension)
};

/// What a basic index selects from an array.
struct JTREE_API ResolvedIndex {
  Box box;                       ///< the smallest box holding every selected element
  std::vector<IndexAxis> axes;   ///< how the result is picked from the box read
  Shape shape;                   ///< the result's shape (dropped and new dimensions applied)
  /// True when the result is the box itself, in C order: every slice has step 1 (or picks at
  /// most one element) and there are no new axes. (Dropped dimensions keep the layout.)
  bool is_box() const;
};

/// Resolves `index` against an array of `shape`, with Python's and NumPy's rules: slices
/// clamp to the extent, ints must be inside it (negative ones count from the end), missing
/// trailing items are full slices. InvalidArgument (a message saying what and on which axis)
/// for more than one '...', more ints and slices than dimensions, an int out of bounds, a
/// zero step, or an item that is not well formed. The empty index selects the whole array.
JTREE_API Result<ResolvedIndex> resolve_index(std::span<const IndexItem> index,
                                              const Shape& shape);

}  // namespace jtree
