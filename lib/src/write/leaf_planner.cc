#include "write/leaf_planner.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "codec/chunk_codec.h"
#include "codec/pack4.h"
#include "codec/plane_codec.h"
#include "format/chunk_grid.h"
#include "format/layout.h"
#include "format/validate.h"
#include "jtree/shard.h"
#include "util/box_copy.h"
#include "util/checked_math.h"

namespace jtree {
namespace {

constexpr uint32_t kMaxRank = 64;
// Chunks the default Limits accept (a writer must not make files default readers refuse).
const uint64_t kMaxChunkBytes = Limits{}.max_chunk_bytes;

Status leaf_error(const Tree& t, size_t i, const std::string& what) {
  return Status::invalid_argument("leaf " + t.leaf_path(static_cast<uint32_t>(i)) + ": " + what);
}

// A compression level the codec accepts (PlaneCodec::levels).
Status check_level(const codec::PlaneCodec& c, int level) {
  const auto [lo, hi] = c.levels();
  if (level >= lo && level <= hi) return Status::success();
  return Status::invalid_argument("level " + std::to_string(level) + " is not a " +
                                 std::string(c.name()) + " level (" + std::to_string(lo) +
                                 " to " + std::to_string(hi) + ")");
}

bool is_payload_kind(LeafKind k) {
  return k == LeafKind::kArray || k == LeafKind::kStr || k == LeafKind::kBytes ||
         k == LeafKind::kByteArray || k == LeafKind::kCustomLeaf || k == LeafKind::kPickle;
}

// Scalars carry no payload fields.
void normalize_scalar(Leaf& l) {
  l.storage = Storage::kNone;
  l.dtype = DType::kInvalid;
  l.shape.clear();
  l.chunk_shape.clear();
  l.chunk_bounds.clear();
  l.inline_data.clear();
  l.filter = Filter::kNone;
  l.codec = Codec::kRaw;
  l.level = 0;
}

const LeafInput kNoInput;

const LeafInput& input_of(const Leaf& l) { return l.input ? *l.input : kNoInput; }

// Gathers a whole array into stored form (inline leaves).
Status gather_inline(const Tree& t, size_t i, Leaf& l, uint64_t elements) {
  const LeafInput& in = input_of(l);
  const auto info = *dtype_info(l.dtype);
  std::string mem(elements * info.item_size, '\0');
  auto* dst = reinterpret_cast<std::byte*>(mem.data());
  const Box all = Box::all(l.shape);
  if (elements > 0) {
    if (in.fill) {
      Status st = in.fill(all, {dst, mem.size()});
      if (!st.ok()) return st.with_prefix("leaf " + t.leaf_path(static_cast<uint32_t>(i)));
    } else {
      const auto strides = in.source.strides.empty() ? c_strides(l.shape, info.item_size)
                                                     : in.source.strides;
      gather_strided(in.source.data, strides, all, info.item_size,
                     in.source.byteswap ? swap_unit(l.dtype) : 0, dst);
    }
  }
  if (l.dtype == DType::kBool && !format::bools_valid(mem)) {
    // (a file holding them would be refused by readers: FORMAT.md section 6.3)
    return Status::invalid_argument("leaf " + t.leaf_path(static_cast<uint32_t>(i)) +
                                   ": a bool element holds a byte other than 0 or 1");
  }
  if (is_4bit(l.dtype)) {
    std::string packed(stored_bytes(l.dtype, elements), '\0');
    codec::pack4({dst, elements}, {reinterpret_cast<std::byte*>(packed.data()), packed.size()});
    mem = std::move(packed);
  }
  l.inline_data = std::move(mem);
  return Status::success();
}

// The shard shape along each dimension, clamped to the array (a shard never exceeds it).
Shape clamped_shard_shape(const Shape& shape, const Shape& shard_shape) {
  Shape s(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    s[d] = std::clamp<uint64_t>(shard_shape[d], 1, std::max<uint64_t>(shape[d], 1));
  }
  return s;
}

// Largest divisor of n that is at most limit (at least 1).
uint64_t divisor_at_most(uint64_t n, uint64_t limit) {
  for (uint64_t k = std::min(n, limit); k > 1; --k) {
    if (n % k == 0) return k;
  }
  return 1;
}

// A chunk grid for a sharded array: C-order slabs of about `target` bytes inside one shard,
// each extent dividing the shard's, so that chunk and shard boundaries line up.
Shape sharded_chunk_shape(const Shape& shape, const Shape& shard_shape, uint32_t bits,
                          uint64_t target) {
  const Shape shard = clamped_shard_shape(shape, shard_shape);
  Shape c = format::default_chunk_shape(shard, bits, target);
  for (size_t d = 0; d < c.size(); ++d) c[d] = divisor_at_most(shard[d], c[d]);
  return c;
}

// A chunk grid given the boxes of blocks of an array (every process's blocks of a sharded
// array, or every rank's part of a serving layout): lines at every block edge, so that every
// chunk lies inside one block, and every process computes the same grid from the same blocks.
// The cells between edges are cut into near-equal pieces of at most the extents
// default_chunk_shape picks for the largest cell (C-order slabs of about `target` bytes),
// which gives about one chunk per block more than an unsharded grid. The regular grid of the
// edges' gcd is kept when it has no more chunks (even splits keep their regular grid and
// format version 1); else the grid is rectilinear (chunk_bounds, version 2).
void blocks_chunk_grid(Leaf& l, const std::vector<Box>& blocks, uint32_t bits, uint64_t target) {
  const size_t r = l.shape.size();
  std::vector<Shape> edges(r);
  Shape largest_cell(r, 1), gcd_shard(r);
  for (size_t d = 0; d < r; ++d) {
    Shape& e = edges[d];
    e = {0, l.shape[d]};
    for (const Box& b : blocks) {
      e.push_back(std::min(b.begin[d], l.shape[d]));
      e.push_back(std::min(b.end[d], l.shape[d]));
    }
    std::sort(e.begin(), e.end());
    e.erase(std::unique(e.begin(), e.end()), e.end());
    uint64_t g = 0;
    for (size_t k = 1; k < e.size(); ++k) {
      largest_cell[d] = std::max(largest_cell[d], e[k] - e[k - 1]);
      if (e[k] != l.shape[d]) g = std::gcd(g, e[k]);  // the last chunk may be clipped
    }
    gcd_shard[d] = g == 0 ? std::max<uint64_t>(l.shape[d], 1) : g;
  }
  const Shape piece = format::default_chunk_shape(largest_cell, bits, target);
  std::vector<Shape> ends(r);
  for (size_t d = 0; d < r; ++d) {
    for (size_t k = 1; k < edges[d].size(); ++k) {
      const uint64_t a = edges[d][k - 1], len = edges[d][k] - a;
      const uint64_t pieces = (len + piece[d] - 1) / piece[d];
      // Near-equal pieces: the first len % pieces of them one longer than the rest.
      const uint64_t q = len / pieces, longer = len % pieces;
      for (uint64_t p = 1; p <= pieces; ++p) ends[d].push_back(a + q * p + std::min(p, longer));
    }
  }
  const Shape regular = sharded_chunk_shape(l.shape, gcd_shard, bits, target);
  const auto regular_count = format::grid_chunk_count(l.shape, regular);
  const auto rect_count = format::rectilinear_chunk_count(ends);
  if (regular_count && (!rect_count || *regular_count <= *rect_count)) {
    l.chunk_shape = regular;
    return;
  }
  l.chunk_bounds = format::join_chunk_bounds(ends);
}

// The grid of an unsharded leaf: cut at the edges of every rank's part when the file is laid
// out for serving (WriteOptions::shard_layout) and the rules split the leaf, else the default
// C-order slabs.
Status serving_chunk_grid(const Tree& t, size_t i, Leaf& l, const WriteOptions& options,
                          uint32_t bits, uint64_t target) {
  if (options.shard_layout && l.kind == LeafKind::kArray && !l.shape.empty()) {
    auto boxes = shard_layout_boxes(t.leaf_path(static_cast<uint32_t>(i)), l.shape,
                                    *options.shard_layout);
    if (!boxes.ok()) return boxes.status();
    if (!boxes->empty()) {
      blocks_chunk_grid(l, *boxes, bits, target);
      return Status::success();
    }
  }
  l.chunk_shape = format::default_chunk_shape(l.shape, bits, target);
  return Status::success();
}

Status check_shards(const Tree& t, size_t i, const Leaf& l, const LeafInput& in) {
  if (l.kind != LeafKind::kArray) return leaf_error(t, i, "only arrays can be sharded");
  if (!in.shard_shape.empty() && in.shard_shape.size() != l.shape.size()) {
    return leaf_error(t, i, "shard shape of rank " + std::to_string(in.shard_shape.size()) +
                                " for an array of rank " + std::to_string(l.shape.size()));
  }
  for (const Box& b : in.blocks) {
    if (b.begin.size() != l.shape.size() || b.end.size() != l.shape.size()) {
      return leaf_error(t, i, "block box of the wrong rank");
    }
    for (size_t d = 0; d < l.shape.size(); ++d) {
      if (b.begin[d] > b.end[d] || b.end[d] > l.shape[d]) {
        return leaf_error(t, i, "block box outside the array along dimension " +
                                    std::to_string(d));
      }
    }
  }
  if (!in.shards) return Status::success();
  for (const Shard& sh : *in.shards) {
    if (sh.box.begin.size() != l.shape.size() || sh.box.end.size() != l.shape.size()) {
      return leaf_error(t, i, "shard box of the wrong rank");
    }
    for (size_t d = 0; d < l.shape.size(); ++d) {
      if (sh.box.begin[d] > sh.box.end[d] || sh.box.end[d] > l.shape[d]) {
        return leaf_error(t, i, "shard box outside the array along dimension " +
                                    std::to_string(d));
      }
    }
    if (sh.box.num_elements() > 0 && sh.view.data == nullptr) {
      return leaf_error(t, i, "shard without data");
    }
    if (!sh.view.strides.empty() && sh.view.strides.size() != l.shape.size()) {
      return leaf_error(t, i, "shard strides of the wrong rank");
    }
  }
  return Status::success();
}

// Every chunk must lie in one shard: shard boundaries on chunk boundaries.
Status check_alignment(const Tree& t, size_t i, const Leaf& l, const LeafInput& in) {
  if (!in.shard_shape.empty() && in.blocks.empty()) {
    const Shape shard = clamped_shard_shape(l.shape, in.shard_shape);
    for (size_t d = 0; d < l.shape.size(); ++d) {
      if (shard[d] < l.shape[d] && shard[d] % l.chunk_shape[d] != 0) {
        return leaf_error(t, i, "chunk extent " + std::to_string(l.chunk_shape[d]) +
                                    " does not divide the shard extent " +
                                    std::to_string(shard[d]) + " along dimension " +
                                    std::to_string(d));
      }
    }
  }
  if (!in.shards) return Status::success();
  const format::ChunkGrid grid = format::ChunkGrid::of(l);
  for (const Shard& sh : *in.shards) {
    for (size_t d = 0; d < l.shape.size(); ++d) {
      if (!grid.is_boundary(d, sh.box.begin[d]) || !grid.is_boundary(d, sh.box.end[d])) {
        return leaf_error(t, i, "shard box [" + std::to_string(sh.box.begin[d]) + ", " +
                                    std::to_string(sh.box.end[d]) + ") along dimension " +
                                    std::to_string(d) + " is not on chunk boundaries");
      }
    }
  }
  return Status::success();
}

Status plan_leaf(Tree& t, size_t i, const WriteOptions& options) {
  Leaf& l = t.leaves[i];
  if (l.kind < LeafKind::kArray || l.kind > LeafKind::kPickle) {
    return leaf_error(t, i, "unknown leaf kind");
  }
  if (l.kind == LeafKind::kCustomLeaf && l.type_name.empty()) {
    return leaf_error(t, i, "custom leaf without a registered name");
  }
  if (l.kind != LeafKind::kCustomLeaf) l.type_name.clear();
  if (l.kind != LeafKind::kInt) l.big_int.clear();
  if (!is_payload_kind(l.kind)) {
    normalize_scalar(l);
    return Status::success();
  }
  if (l.kind != LeafKind::kArray) {
    // Text and bytes: the payload is the owned string, as 1-d uint8.
    l.dtype = DType::kUInt8;
    l.shape = {l.inline_data.size()};  // the chunk writer reads it from inline_data
  }
  const LeafInput& in = input_of(l);
  auto info = dtype_info(l.dtype);
  if (!info) return leaf_error(t, i, "unknown dtype " + std::string(dtype_name(l.dtype)));
  if (l.shape.size() > kMaxRank) return leaf_error(t, i, "rank above 64");
  auto elements = checked_product(l.shape, format::kMaxElements);
  if (!elements) return leaf_error(t, i, "shape too large");
  if (l.flags & kLeafFlagScalar && !l.shape.empty()) {
    return leaf_error(t, i, "scalar flag on an array of rank > 0");
  }
  const bool sharded = in.shards.has_value() || !in.shard_shape.empty() || !in.blocks.empty();
  if (sharded) JTREE_RETURN_IF_ERROR(check_shards(t, i, l, in));
  if (l.kind == LeafKind::kArray && *elements > 0 && !in.shards) {
    if (!in.fill && in.source.data == nullptr) return leaf_error(t, i, "array without data");
    if (!in.source.strides.empty() && in.source.strides.size() != l.shape.size()) {
      return leaf_error(t, i, "strides of rank " + std::to_string(in.source.strides.size()) +
                                  " for shape of rank " + std::to_string(l.shape.size()));
    }
  }
  const uint64_t stored = stored_bytes(l.dtype, *elements);
  l.chunk_shape.clear();
  l.chunk_bounds.clear();
  l.filter = Filter::kNone;
  l.codec = Codec::kRaw;
  l.level = 0;

  // Sharded data is never inline: the header must be the same in every process, and no process
  // holds all of it.
  if ((stored <= options.inline_threshold && !sharded) || *elements == 0) {
    l.storage = Storage::kInline;
    if (l.kind == LeafKind::kArray) return gather_inline(t, i, l, *elements);
    return Status::success();
  }

  l.storage = Storage::kChunked;
  const uint64_t target = in.options.target_chunk_bytes.value_or(options.target_chunk_bytes);
  if (!in.options.chunk_shape.empty()) {
    if (in.options.chunk_shape.size() != l.shape.size()) {
      return leaf_error(t, i, "chunk shape of rank " +
                                  std::to_string(in.options.chunk_shape.size()) +
                                  " for an array of rank " + std::to_string(l.shape.size()));
    }
    l.chunk_shape = in.options.chunk_shape;
    for (size_t d = 0; d < l.shape.size(); ++d) {
      if (l.chunk_shape[d] == 0) return leaf_error(t, i, "chunk shape with a zero dimension");
      l.chunk_shape[d] = std::min(l.chunk_shape[d], std::max<uint64_t>(l.shape[d], 1));
    }
  } else if (!in.blocks.empty() && !l.shape.empty()) {
    blocks_chunk_grid(l, in.blocks, info->stored_bits, target);
  } else if (!in.shard_shape.empty()) {
    l.chunk_shape = sharded_chunk_shape(l.shape, in.shard_shape, info->stored_bits, target);
  } else {
    JTREE_RETURN_IF_ERROR(serving_chunk_grid(t, i, l, options, info->stored_bits, target));
  }
  if (sharded) JTREE_RETURN_IF_ERROR(check_alignment(t, i, l, in));
  auto chunk_elements = checked_product(format::ChunkGrid::of(l).max_chunk());
  if (!chunk_elements || stored_bytes(l.dtype, *chunk_elements) > kMaxChunkBytes) {
    return leaf_error(t, i, "chunks larger than " + std::to_string(kMaxChunkBytes) + " bytes");
  }
  l.codec = in.options.codec.value_or(options.codec);
  // A filter and a level for compressed leaves (unknown codecs keep none: encoding refuses them).
  if (codec::find_plane_codec(l.codec) != nullptr) {
    l.filter = in.options.filter.value_or(default_filter(l.dtype));
    if (!codec::filter_allowed(l.filter, l.dtype)) {
      return leaf_error(t, i, "filter " + std::string(filter_name(l.filter)) +
                                  " cannot apply to dtype " + std::string(info->name));
    }
    const int level = in.options.level.value_or(options.level);
    if (Status st = check_level(*codec::find_plane_codec(l.codec), level); !st.ok()) {
      return leaf_error(t, i, st.message());
    }
    l.level = static_cast<int8_t>(level);  // (inside [-128, 127]: PlaneCodec::levels)
  }
  return Status::success();
}

}  // namespace

size_t swap_unit(DType dtype) {
  auto info = *dtype_info(dtype);
  if (dtype == DType::kComplex64 || dtype == DType::kComplex128) return info.item_size / 2;
  return info.item_size > 1 ? info.item_size : 0;
}

bool is_c_contiguous(const ArrayView& view, const Shape& shape, size_t item) {
  if (view.strides.empty()) return true;
  const auto c = c_strides(shape, item);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] > 1 && view.strides[d] != c[d]) return false;
  }
  return true;
}

Filter default_filter(DType dtype) {
  auto info = *dtype_info(dtype);
  if (info.float_component > 0) return Filter::kFloatSplit;
  if (!is_4bit(dtype) && info.stored_bits > 8) return Filter::kShuffle;
  return Filter::kNone;
}

Status WriteOptions::check() const {
  const WriteOptions& options = *this;
  if (options.alignment == 0 || (options.alignment & (options.alignment - 1)) != 0 ||
      options.alignment > (1u << 20)) {
    return Status::invalid_argument("alignment must be a power of two up to 1 MiB, not " +
                                   std::to_string(options.alignment));
  }
  if (options.target_chunk_bytes == 0) {
    return Status::invalid_argument("chunk bytes (target_chunk_bytes) must be positive");
  }
  if (options.shard_layout) {
    if (options.shard_layout->world == 0) {
      return Status::invalid_argument("shard_layout: the world size must be >= 1");
    }
    for (const SplitRule& rule : options.shard_layout->rules) {
      if (rule.pattern.empty()) {
        return Status::invalid_argument("shard_layout: a split rule has an empty pattern");
      }
    }
  }
  if (options.max_bytes_in_flight == 0) {
    return Status::invalid_argument("max_bytes_in_flight must be positive");
  }
  if (options.threads < 0) {
    return Status::invalid_argument("threads must be >= 0 (0: the machine's hardware threads), "
                                   "not " + std::to_string(options.threads));
  }
  if (!(options.min_gain >= 0 && options.min_gain <= 1)) {
    return Status::invalid_argument("min_gain must be in [0, 1], not " +
                                   std::to_string(options.min_gain));
  }
  if (const codec::PlaneCodec* c = codec::find_plane_codec(options.codec)) {
    JTREE_RETURN_IF_ERROR(check_level(*c, options.level));
  }
  return Status::success();
}

Status plan_leaves(Tree& tree, const WriteOptions& options) {
  JTREE_RETURN_IF_ERROR(options.check());
  for (size_t i = 0; i < tree.leaves.size(); ++i) {
    if (tree.leaves[i].reuse()) continue;
    JTREE_RETURN_IF_ERROR(plan_leaf(tree, i, options));
  }
  return Status::success();
}

}  // namespace jtree
