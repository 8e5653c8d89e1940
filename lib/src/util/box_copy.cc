#include "util/box_copy.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace jtree {

std::vector<int64_t> c_strides(const Shape& shape, size_t item) {
  std::vector<int64_t> s(shape.size());
  int64_t acc = static_cast<int64_t>(item);
  for (size_t d = shape.size(); d-- > 0;) {
    s[d] = acc;
    acc *= static_cast<int64_t>(std::max<uint64_t>(shape[d], 1));
  }
  return s;
}

std::optional<uint64_t> contiguous_offset(const Shape& outer, const Shape& start,
                                          const Shape& region) {
  const size_t r = outer.size();
  // Find the first dimension with extent > 1; every later one must span the whole outer
  // extent; the region is then one run.
  size_t k = 0;
  while (k < r && region[k] == 1) ++k;
  for (size_t d = k + 1; d < r; ++d) {
    if (region[d] != outer[d]) return std::nullopt;
  }
  uint64_t off = 0;
  for (size_t d = 0; d < r; ++d) off = off * outer[d] + start[d];
  return off;
}

void copy_region(const std::byte* src, const Shape& src_shape, const Shape& src_start,
                 std::byte* dst, const Shape& dst_shape, const Shape& dst_start,
                 const Shape& region, size_t item) {
  const size_t r = region.size();
  for (size_t d = 0; d < r; ++d) {
    if (region[d] == 0) return;
  }
  // Merge trailing dimensions that are whole in src, dst and region into one run.
  size_t k = r;  // dims [k, r) form the contiguous run
  uint64_t run = 1;
  while (k > 0 && region[k - 1] == src_shape[k - 1] && region[k - 1] == dst_shape[k - 1]) {
    --k;
    run *= region[k];
  }
  if (k > 0) {  // the first partial dim contributes its region extent to the run
    --k;
    run *= region[k];
  }
  const size_t run_bytes = run * item;
  // Element strides of the outer dims.
  std::vector<uint64_t> ss(r), ds(r);
  uint64_t sa = 1, da = 1;
  for (size_t d = r; d-- > 0;) {
    ss[d] = sa;
    ds[d] = da;
    sa *= src_shape[d];
    da *= dst_shape[d];
  }
  uint64_t s_off = 0, d_off = 0;
  for (size_t d = 0; d < r; ++d) {
    s_off += src_start[d] * ss[d];
    d_off += dst_start[d] * ds[d];
  }
  if (k == 0) {
    std::memcpy(dst + d_off * item, src + s_off * item, run_bytes);
    return;
  }
  std::vector<uint64_t> idx(k, 0);
  for (;;) {
    std::memcpy(dst + d_off * item, src + s_off * item, run_bytes);
    size_t d = k;
    while (d-- > 0) {
      if (++idx[d] < region[d]) {
        s_off += ss[d];
        d_off += ds[d];
        break;
      }
      s_off -= (region[d] - 1) * ss[d];
      d_off -= (region[d] - 1) * ds[d];
      idx[d] = 0;
    }
    if (d == static_cast<size_t>(-1)) return;
  }
}

namespace {

void copy_swapped(std::byte* dst, const std::byte* src, size_t item, size_t unit) {
  for (size_t w = 0; w < item; w += unit) {
    for (size_t b = 0; b < unit; ++b) dst[w + b] = src[w + unit - 1 - b];
  }
}

}  // namespace

void gather_strided(const std::byte* base, std::span<const int64_t> strides, const Box& box,
                    size_t item, size_t swap_unit, std::byte* dst) {
  const size_t r = box.begin.size();
  const Shape ext = box.shape();
  for (uint64_t e : ext) {
    if (e == 0) return;
  }
  const std::byte* p = base;
  for (size_t d = 0; d < r; ++d) p += static_cast<int64_t>(box.begin[d]) * strides[d];
  if (r == 0) {
    if (swap_unit) copy_swapped(dst, p, item, swap_unit);
    else std::memcpy(dst, p, item);
    return;
  }
  const size_t last = r - 1;
  const uint64_t inner = ext[last];
  const int64_t inner_stride = strides[last];
  const bool inner_contig = inner_stride == static_cast<int64_t>(item) && swap_unit == 0;
  std::vector<uint64_t> idx(r, 0);
  for (;;) {
    if (inner_contig) {
      std::memcpy(dst, p, inner * item);
      dst += inner * item;
    } else {
      const std::byte* q = p;
      for (uint64_t i = 0; i < inner; ++i, q += inner_stride, dst += item) {
        if (swap_unit) copy_swapped(dst, q, item, swap_unit);
        else std::memcpy(dst, q, item);
      }
    }
    size_t d = last;
    while (d-- > 0) {
      if (++idx[d] < ext[d]) {
        p += strides[d];
        break;
      }
      p -= static_cast<int64_t>(ext[d] - 1) * strides[d];
      idx[d] = 0;
    }
    if (d == static_cast<size_t>(-1)) return;
  }
}

}  // namespace jtree
