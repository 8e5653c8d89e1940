// Copying a box of a global array out of the in-memory pieces that hold it (shards, or one whole
// array): the fill functions of sharded and deferred leaves.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "jtree/tree.h"

namespace jtpy {

/// A part of a global array in host memory: where it sits in the array and where its elements
/// are (byte strides per dimension).
struct Piece {
  jtree::Shape begin, shape;
  const std::byte* data = nullptr;
  std::vector<int64_t> strides;
};

/// Copies the part of `box` that `p` holds into `dst` (C order over the box, elements of `item`
/// bytes); returns the number of elements copied.
uint64_t copy_from_piece(const Piece& p, const jtree::Box& box, size_t item, std::byte* dst);

}  // namespace jtpy
