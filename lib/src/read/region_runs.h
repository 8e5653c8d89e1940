// The contiguous byte runs that copy one region of a C-order chunk into a C-order destination:
// how a raw chunk read in pieces is scattered to its destinations (read_many.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "jtree/tree.h"

namespace jtree {

/// One contiguous run of a chunk's region: bytes [src, src + len) of the chunk go to bytes
/// [dst, dst + len) of the destination.
struct Run {
  uint64_t src, dst, len;
};

/// Appends to `out` the runs of `region` (at `chunk_start` of a C-order chunk of
/// `chunk_shape`) placed at `dst_start` of a C-order destination of `dst_shape`, elements of
/// `item` bytes, in increasing chunk order: trailing dimensions whole in both merge into one
/// run. An empty region has none; a 0-d one is one run of one item.
void region_runs(const Shape& chunk_shape, const Shape& chunk_start, const Shape& dst_shape,
                 const Shape& dst_start, const Shape& region, size_t item,
                 std::vector<Run>& out);

}  // namespace jtree
