// resolve_index (jtree/slice.h): NumPy's basic indexing, resolved into a box.
#include <string>

#include "jtree/slice.h"

namespace jtree {
namespace {

// Positions are computed in 128 bits: an extent may be up to 2^64 - 1 (an empty array's other
// dimensions), an index down to -2^63, and Python's clamping needs -1 as well.
__extension__ typedef __int128 Wide;

std::string str(Wide v) {
  if (v >= 0) return std::to_string(static_cast<uint64_t>(v));
  return "-" + std::to_string(static_cast<uint64_t>(-v));
}

// Python's PySlice_AdjustIndices for one bound: negative counts from the end, then clamped to
// [0, n] (step > 0) or [-1, n - 1] (step < 0).
Wide adjust(Wide v, Wide n, bool backwards) {
  if (v < 0) {
    v += n;
    if (v < 0) v = backwards ? -1 : 0;
  } else if (v >= n) {
    v = backwards ? n - 1 : n;
  }
  return v;
}

}  // namespace

bool ResolvedIndex::is_box() const {
  for (const IndexAxis& a : axes) {
    if (a.kind == IndexItem::Kind::kNewAxis) return false;
    if (a.kind == IndexItem::Kind::kSlice && a.step != 1 && a.count > 1) return false;
  }
  return true;
}

Result<ResolvedIndex> resolve_index(std::span<const IndexItem> index, const Shape& shape) {
  using Kind = IndexItem::Kind;
  size_t ellipses = 0, real = 0;
  for (const IndexItem& it : index) {
    if (it.kind == Kind::kEllipsis) ++ellipses;
    if (it.kind == Kind::kInt || it.kind == Kind::kSlice) ++real;
  }
  if (ellipses > 1) {
    return Status::invalid_argument("an index can only have a single ellipsis ('...')");
  }
  if (real > shape.size()) {
    return Status::invalid_argument("too many indices: " + std::to_string(real) +
                                   " for an array of rank " + std::to_string(shape.size()));
  }
  // The items with '...' (or, without one, the end) replaced by the full slices left over.
  std::vector<IndexItem> items;
  items.reserve(index.size() + shape.size());
  const IndexItem full{};
  for (const IndexItem& it : index) {
    if (it.kind == Kind::kEllipsis) {
      items.insert(items.end(), shape.size() - real, full);
    } else {
      items.push_back(it);
    }
  }
  if (ellipses == 0) items.insert(items.end(), shape.size() - real, full);

  ResolvedIndex out;
  out.box = Box::all(shape);
  size_t d = 0;
  for (const IndexItem& it : items) {
    IndexAxis axis{it.kind};
    if (it.kind == Kind::kNewAxis) {
      out.axes.push_back(axis);
      out.shape.push_back(1);
      continue;
    }
    const Wide n = shape[d];
    if (it.kind == Kind::kInt) {
      if (!it.start) return Status::invalid_argument("an int index without its value");
      const Wide i = *it.start < 0 ? *it.start + n : Wide{*it.start};
      if (i < 0 || i >= n) {
        return Status::invalid_argument("index " + std::to_string(*it.start) +
                                       " is out of bounds for axis " + std::to_string(d) +
                                       " with size " + str(n));
      }
      out.box.begin[d] = static_cast<uint64_t>(i);
      out.box.end[d] = static_cast<uint64_t>(i) + 1;
    } else if (it.kind == Kind::kSlice) {
      const int64_t step = it.step.value_or(1);
      if (step == 0) return Status::invalid_argument("slice step cannot be zero");
      const bool back = step < 0;
      const Wide start = it.start ? adjust(*it.start, n, back) : (back ? n - 1 : 0);
      const Wide stop = it.stop ? adjust(*it.stop, n, back) : (back ? -1 : n);
      Wide count = 0;
      if (!back && start < stop) count = (stop - start - 1) / step + 1;
      if (back && stop < start) count = (start - stop - 1) / -Wide{step} + 1;
      axis.step = step;
      axis.count = static_cast<uint64_t>(count);
      if (count == 0) {
        out.box.begin[d] = out.box.end[d] = 0;
      } else {
        const Wide last = start + (count - 1) * step;
        const Wide low = back ? last : start;
        const Wide high = back ? start : last;
        out.box.begin[d] = static_cast<uint64_t>(low);
        out.box.end[d] = static_cast<uint64_t>(high) + 1;
        axis.offset = static_cast<uint64_t>(start - low);
      }
      out.shape.push_back(axis.count);
    } else {
      return Status::invalid_argument("index item of unknown kind " +
                                     std::to_string(static_cast<int>(it.kind)));
    }
    out.axes.push_back(axis);
    ++d;
  }
  return out;
}

}  // namespace jtree
