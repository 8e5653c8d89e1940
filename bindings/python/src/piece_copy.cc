// See piece_copy.h.
#include "piece_copy.h"

#include <algorithm>
#include <cstring>

namespace jtpy {

using jtree::Box;
using jtree::Shape;

uint64_t copy_from_piece(const Piece& p, const Box& box, size_t item, std::byte* dst) {
  const size_t r = box.begin.size();
  Shape lo(r), ext(r);
  uint64_t n = 1;
  for (size_t d = 0; d < r; ++d) {
    lo[d] = std::max(box.begin[d], p.begin[d]);
    const uint64_t hi = std::min(box.end[d], p.begin[d] + p.shape[d]);
    if (hi <= lo[d]) return 0;
    ext[d] = hi - lo[d];
    n *= ext[d];
  }
  // Byte strides of the destination (C order over the box's shape).
  std::vector<int64_t> dst_strides(r);
  int64_t acc = static_cast<int64_t>(item);
  for (size_t d = r; d-- > 0;) {
    dst_strides[d] = acc;
    acc *= static_cast<int64_t>(box.end[d] - box.begin[d]);
  }
  const std::byte* src = p.data;
  for (size_t d = 0; d < r; ++d) {
    src += static_cast<int64_t>(lo[d] - p.begin[d]) * p.strides[d];
    dst += static_cast<int64_t>(lo[d] - box.begin[d]) * dst_strides[d];
  }
  if (r == 0) {
    std::memcpy(dst, src, item);
    return 1;
  }
  const size_t last = r - 1;
  const bool contiguous = p.strides[last] == static_cast<int64_t>(item);
  std::vector<uint64_t> idx(r, 0);
  for (;;) {
    if (contiguous) {
      std::memcpy(dst, src, ext[last] * item);
    } else {
      for (uint64_t i = 0; i < ext[last]; ++i) {
        std::memcpy(dst + i * item, src + static_cast<int64_t>(i) * p.strides[last], item);
      }
    }
    size_t d = last;
    for (;;) {
      if (d == 0) return n;
      --d;
      if (++idx[d] < ext[d]) {
        src += p.strides[d];
        dst += dst_strides[d];
        break;
      }
      src -= static_cast<int64_t>(ext[d] - 1) * p.strides[d];
      dst -= static_cast<int64_t>(ext[d] - 1) * dst_strides[d];
      idx[d] = 0;
    }
  }
}

}  // namespace jtpy
