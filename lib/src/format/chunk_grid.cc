#include "format/chunk_grid.h"

#include <algorithm>

#include "util/checked_math.h"

namespace jtree::format {

ChunkGrid::ChunkGrid(const Shape& shape, const Shape& chunk) : shape_(shape), chunk_(chunk) {
  grid_.resize(shape_.size());
  count_ = 1;
  for (size_t d = 0; d < shape_.size(); ++d) {
    grid_[d] = shape_[d] == 0 ? 0 : (shape_[d] - 1) / chunk_[d] + 1;
    count_ *= grid_[d];  // validated not to overflow before a grid is built
  }
}

ChunkGrid ChunkGrid::rectilinear(const Shape& shape, std::vector<Shape> ends) {
  ChunkGrid g(Shape{}, Shape{});
  g.shape_ = shape;
  g.ends_ = std::move(ends);
  g.grid_.resize(shape.size());
  g.count_ = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    g.grid_[d] = g.ends_[d].size();
    g.count_ *= g.grid_[d];  // validated not to overflow before a grid is built
  }
  return g;
}

ChunkGrid ChunkGrid::of(const Leaf& leaf) {
  if (leaf.chunk_bounds.empty()) return ChunkGrid(leaf.shape, leaf.chunk_shape);
  auto ends = split_chunk_bounds(leaf.shape, leaf.chunk_bounds);
  return ends ? rectilinear(leaf.shape, std::move(*ends)) : ChunkGrid(Shape{}, Shape{});
}

uint64_t ChunkGrid::begin(size_t d, uint64_t i) const {
  if (ends_.empty()) return i * chunk_[d];
  return i == 0 ? 0 : ends_[d][i - 1];
}

uint64_t ChunkGrid::end(size_t d, uint64_t i) const {
  if (ends_.empty()) return std::min((i + 1) * chunk_[d], shape_[d]);
  return ends_[d][i];
}

bool ChunkGrid::is_boundary(size_t d, uint64_t x) const {
  if (x == 0 || x == shape_[d]) return true;
  if (ends_.empty()) return x % chunk_[d] == 0;
  return std::binary_search(ends_[d].begin(), ends_[d].end(), x);
}

Shape ChunkGrid::max_chunk() const {
  if (ends_.empty()) return chunk_;
  Shape m(rank(), 0);
  for (size_t d = 0; d < rank(); ++d) {
    uint64_t prev = 0;
    for (uint64_t e : ends_[d]) {
      m[d] = std::max(m[d], e - prev);
      prev = e;
    }
  }
  return m;
}

Shape ChunkGrid::coord(uint64_t linear) const {
  Shape g(rank());
  for (size_t d = rank(); d-- > 0;) {
    g[d] = linear % grid_[d];
    linear /= grid_[d];
  }
  return g;
}

uint64_t ChunkGrid::linear(const Shape& g) const {
  uint64_t l = 0;
  for (size_t d = 0; d < rank(); ++d) l = l * grid_[d] + g[d];
  return l;
}

Box ChunkGrid::box(uint64_t linear_index) const {
  Shape g = coord(linear_index);
  Box b;
  b.begin.resize(rank());
  b.end.resize(rank());
  for (size_t d = 0; d < rank(); ++d) {
    b.begin[d] = begin(d, g[d]);
    b.end[d] = end(d, g[d]);
  }
  return b;
}

uint64_t ChunkGrid::elements(uint64_t linear_index) const {
  return box(linear_index).num_elements();
}

void ChunkGrid::overlapping(const Box& b, Shape& lo, Shape& hi) const {
  lo.assign(rank(), 0);
  hi.assign(rank(), 0);
  for (size_t d = 0; d < rank(); ++d) {
    if (b.begin[d] >= b.end[d]) continue;  // empty along d: lo == hi == 0
    if (ends_.empty()) {
      lo[d] = b.begin[d] / chunk_[d];
      hi[d] = (b.end[d] - 1) / chunk_[d] + 1;
      continue;
    }
    // Binary search: the first chunk ending after begin, the first ending at or after end.
    const Shape& e = ends_[d];
    lo[d] = static_cast<uint64_t>(std::upper_bound(e.begin(), e.end(), b.begin[d]) - e.begin());
    hi[d] = static_cast<uint64_t>(std::lower_bound(e.begin(), e.end(), b.end[d]) - e.begin()) + 1;
    hi[d] = std::min<uint64_t>(hi[d], e.size());
  }
}

std::optional<std::vector<Shape>> split_chunk_bounds(const Shape& shape, const Shape& bounds) {
  std::vector<Shape> ends(shape.size());
  size_t k = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return std::nullopt;
    uint64_t prev = 0;
    while (true) {
      if (k == bounds.size()) return std::nullopt;
      const uint64_t v = bounds[k++];
      if (v <= prev || v > shape[d]) return std::nullopt;
      ends[d].push_back(v);
      prev = v;
      if (v == shape[d]) break;
    }
  }
  if (k != bounds.size()) return std::nullopt;
  return ends;
}

std::optional<uint64_t> rectilinear_chunk_count(const std::vector<Shape>& ends, uint64_t limit) {
  uint64_t n = 1;
  for (const Shape& e : ends) {
    auto r = checked_mul(n, static_cast<uint64_t>(e.size()));
    if (!r || *r > limit) return std::nullopt;
    n = *r;
  }
  return n;
}

Shape join_chunk_bounds(const std::vector<Shape>& ends) {
  Shape flat;
  for (const Shape& e : ends) flat.insert(flat.end(), e.begin(), e.end());
  return flat;
}

std::optional<uint64_t> grid_chunk_count(const Shape& shape, const Shape& chunk, uint64_t limit) {
  if (shape.size() != chunk.size()) return std::nullopt;
  uint64_t n = 1;
  bool empty = false;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (chunk[d] == 0) return std::nullopt;
    uint64_t g = shape[d] == 0 ? 0 : (shape[d] - 1) / chunk[d] + 1;
    if (g == 0) {
      empty = true;
      continue;
    }
    auto r = checked_mul(n, g);
    if (!r || *r > limit) return std::nullopt;
    n = *r;
  }
  return empty ? 0 : n;
}

Shape default_chunk_shape(const Shape& shape, uint32_t stored_bits, uint64_t target_bytes) {
  const size_t r = shape.size();
  Shape chunk(r);
  for (size_t d = 0; d < r; ++d) chunk[d] = std::max<uint64_t>(shape[d], 1);
  const uint64_t target_bits = std::max<uint64_t>(target_bytes, 1) * 8;
  // bits of one slice at dimension d: product of the dims after d times the element bits.
  uint64_t inner_bits = stored_bits;
  for (size_t d = r; d-- > 0;) {
    auto whole = checked_mul(inner_bits, std::max<uint64_t>(shape[d], 1));
    if (whole && *whole <= target_bits) {  // this dimension fits whole: keep going outwards
      inner_bits = *whole;
      continue;
    }
    // Cut dimension d into pieces of `rows` slices; dimensions before it get extent 1.
    chunk[d] = std::clamp<uint64_t>(target_bits / inner_bits, 1, chunk[d]);
    for (size_t e = 0; e < d; ++e) chunk[e] = 1;
    break;
  }
  return chunk;
}

bool chunks_concatenate_in_c_order(const Shape& shape, const Shape& chunk) {
  if (chunk.size() != shape.size()) return false;
  size_t k = shape.size();  // the last dimension the grid cuts
  while (k > 0 && chunk[k - 1] == shape[k - 1]) --k;
  if (k == 0) return true;  // one chunk
  for (size_t d = 0; d + 1 < k; ++d) {
    if (chunk[d] != 1) return false;
  }
  return true;
}

bool chunks_concatenate_in_c_order(const ChunkGrid& grid) {
  if (grid.regular()) return chunks_concatenate_in_c_order(grid.shape(), grid.chunk());
  const Shape& s = grid.shape();
  const Shape& g = grid.grid();
  size_t k = s.size();  // one past the last dimension the grid cuts
  while (k > 0 && g[k - 1] == 1) --k;
  if (k == 0) return true;
  for (size_t d = 0; d + 1 < k; ++d) {
    if (g[d] != s[d]) return false;  // every chunk of extent 1
  }
  return true;
}

}  // namespace jtree::format
