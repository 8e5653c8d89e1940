#include "read/region_runs.h"

namespace jtree {

void region_runs(const Shape& chunk_shape, const Shape& chunk_start, const Shape& dst_shape,
                 const Shape& dst_start, const Shape& region, size_t item,
                 std::vector<Run>& out) {
  const size_t rank = region.size();
  if (rank == 0) {
    out.push_back({0, 0, item});
    return;
  }
  for (uint64_t e : region) {
    if (e == 0) return;
  }
  size_t k = rank - 1;
  uint64_t len = region[k] * item;
  while (k > 0 && region[k] == chunk_shape[k] && region[k] == dst_shape[k]) {
    --k;
    len *= region[k];
  }
  std::vector<uint64_t> cs(rank), ds(rank);
  cs[rank - 1] = ds[rank - 1] = item;
  for (size_t d = rank - 1; d > 0; --d) {
    cs[d - 1] = cs[d] * chunk_shape[d];
    ds[d - 1] = ds[d] * dst_shape[d];
  }
  std::vector<uint64_t> idx(k, 0);  // over the dimensions before k
  for (;;) {
    uint64_t src = chunk_start[k] * cs[k], dst = dst_start[k] * ds[k];
    for (size_t d = 0; d < k; ++d) {
      src += (chunk_start[d] + idx[d]) * cs[d];
      dst += (dst_start[d] + idx[d]) * ds[d];
    }
    out.push_back({src, dst, len});
    size_t d = k;
    while (d-- > 0) {
      if (++idx[d] < region[d]) break;
      idx[d] = 0;
    }
    if (d == static_cast<size_t>(-1)) break;
  }
}

}  // namespace jtree
