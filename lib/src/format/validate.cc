#include "format/validate.h"

#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "format/chunk_grid.h"
#include "util/checked_math.h"
#include "util/thread_pool.h"

namespace jtree::format {
namespace {

constexpr uint64_t kMaxChunkFormatBytes = 0xFFFFFFFFull;  // plane sizes are u32
constexpr uint32_t kKnownLeafFlags = kLeafFlagScalar;

bool is_payload_kind(LeafKind k) {
  return k == LeafKind::kArray || k == LeafKind::kStr || k == LeafKind::kBytes ||
         k == LeafKind::kByteArray || k == LeafKind::kCustomLeaf || k == LeafKind::kPickle;
}

// check_leaf<false> builds no message: it is given this tree, which it does not look at.
const Tree kNoTree;

Status leaf_error(const Tree& t, size_t i, const std::string& what) {
  return Status::corruption("leaf " + t.leaf_path(static_cast<uint32_t>(i)) + ": " + what);
}

}  // namespace

bool big_int_canonical(std::string_view b, int64_t int_value) {
  // At least 9 bytes (8 always fit int64), and minimal: the last byte is not a mere sign
  // extension of the one before (00 after a clear top bit, FF after a set one). Such a value
  // lies outside int64, where int_value cannot hold it, so int_value must be 0.
  if (b.size() < 9 || int_value != 0) return false;
  const auto last = static_cast<uint8_t>(b[b.size() - 1]);
  const bool prev_neg = (static_cast<uint8_t>(b[b.size() - 2]) & 0x80) != 0;
  return !((last == 0x00 && !prev_neg) || (last == 0xFF && prev_neg));
}

bool bools_valid(std::span<const std::byte> data) {
  uint8_t any_high = 0;  // branch-free: bits 1-7 of every byte ORed together
  for (std::byte b : data) any_high |= static_cast<uint8_t>(b) & 0xFE;
  return any_high == 0;
}

bool bools_valid(std::string_view data) {
  return bools_valid(std::as_bytes(std::span(data.data(), data.size())));
}

namespace {

bool filter_ok(Filter f, DType d) {
  auto info = dtype_info(d);
  if (f == Filter::kNone) return true;
  if (is_4bit(d)) return false;
  if (f == Filter::kFloatSplit) return info->float_component > 0;
  return true;
}

// The leaf checks, written once for two callers. With kMessages, a failure returns the full
// Status naming the leaf's path (which needs a finalized tree). Without, it returns a bare
// Status of the right code and builds no message: the decoder runs that version on every leaf
// while the leaf is in the cache, before the tree is finalized, and only when a leaf fails is
// the check run again with messages (validate_leaves), so both report exactly the same.
#define JTREE_LEAF_FAIL(code, message_expr)             \
  do {                                                  \
    if constexpr (kMessages) return (message_expr);     \
    else return false;                                  \
  } while (0)

template <bool kMessages>
using LeafResult = std::conditional_t<kMessages, Status, bool>;

template <bool kMessages>
LeafResult<kMessages> leaf_ok() {
  if constexpr (kMessages) return Status::success();
  else return true;
}

template <bool kMessages>
LeafResult<kMessages> check_leaf(const Tree& t, const Leaf& l, size_t i, const Limits& limits,
                                 uint64_t* chunks) {
  *chunks = 0;
  if (l.flags & ~kKnownLeafFlags) {
    JTREE_LEAF_FAIL(kCorruption, leaf_error(t, i, "unknown flag bits"));
  }
  if (!l.type_name.empty() && l.kind != LeafKind::kCustomLeaf) {
    JTREE_LEAF_FAIL(kCorruption,
                    leaf_error(t, i, "type name on a leaf that is not a custom leaf"));
  }
  if (l.kind == LeafKind::kCustomLeaf && l.type_name.empty()) {
    JTREE_LEAF_FAIL(kCorruption, leaf_error(t, i, "custom leaf without a registered name"));
  }
  if (!l.big_int.empty() && l.kind != LeafKind::kInt) {
    JTREE_LEAF_FAIL(kCorruption, leaf_error(t, i, "integer bytes on a leaf that is not an int"));
  }
  if (!l.big_int.empty() && !big_int_canonical(l.big_int, l.int_value)) {
    JTREE_LEAF_FAIL(kCorruption,
                    leaf_error(t, i, "big_int of " + std::to_string(l.big_int.size()) +
                                         " bytes is not the minimal encoding of an integer "
                                         "outside int64 (or int_value is set too)"));
  }
  if (!is_payload_kind(l.kind)) {
    // Scalars carry nothing else: no payload, no hidden bytes.
    if (l.storage != Storage::kNone || l.dtype != DType::kInvalid || !l.shape.empty() ||
        !l.chunk_shape.empty() || !l.chunk_bounds.empty() || !l.inline_data.empty() ||
        l.filter != Filter::kNone ||
        l.codec != Codec::kRaw || l.level != 0) {
      JTREE_LEAF_FAIL(kCorruption,
                      leaf_error(t, i, "payload fields on a " +
                                           std::string(leaf_kind_name(l.kind)) + " leaf"));
    }
    if (l.big_int.size() > limits.max_string_bytes) {
      JTREE_LEAF_FAIL(kResourceExhausted,
                      Status::resource_exhausted("leaf " + t.leaf_path(static_cast<uint32_t>(i)) +
                                                ": integer of " +
                                                std::to_string(l.big_int.size()) +
                                                " bytes over the string limit"));
    }
    return leaf_ok<kMessages>();
  }
  if (l.storage == Storage::kNone) {
    JTREE_LEAF_FAIL(kCorruption, leaf_error(t, i, "payload leaf without storage"));
  }
  if (l.dtype == DType::kInvalid) {
    JTREE_LEAF_FAIL(kCorruption, leaf_error(t, i, "payload leaf without a dtype"));
  }
  if (l.kind != LeafKind::kArray && (l.dtype != DType::kUInt8 || l.shape.size() != 1)) {
    JTREE_LEAF_FAIL(kCorruption, leaf_error(t, i, std::string(leaf_kind_name(l.kind)) +
                                                      " payload must be 1-d uint8"));
  }
  if (l.flags & kLeafFlagScalar && (l.kind != LeafKind::kArray || !l.shape.empty())) {
    JTREE_LEAF_FAIL(kCorruption, leaf_error(t, i, "scalar flag on a leaf that is not a 0-d array"));
  }
  auto elements = checked_product(l.shape, kMaxElements);
  if (!elements) JTREE_LEAF_FAIL(kCorruption, leaf_error(t, i, "shape too large"));
  const uint64_t stored = stored_bytes(l.dtype, *elements);

  if (l.storage == Storage::kInline) {
    if (!l.chunk_shape.empty() || !l.chunk_bounds.empty() || l.filter != Filter::kNone ||
        l.codec != Codec::kRaw || l.level != 0) {
      JTREE_LEAF_FAIL(kCorruption, leaf_error(t, i, "chunk fields on an inline leaf"));
    }
    if (l.inline_data.size() != stored) {
      JTREE_LEAF_FAIL(kCorruption,
                      leaf_error(t, i, "inline data is " + std::to_string(l.inline_data.size()) +
                                           " bytes; dtype " + std::string(dtype_name(l.dtype)) +
                                           " x shape needs " + std::to_string(stored)));
    }
    if (l.dtype == DType::kBool && !bools_valid(l.inline_data)) {
      JTREE_LEAF_FAIL(kCorruption, leaf_error(t, i, "bool payload byte other than 0 or 1"));
    }
    return leaf_ok<kMessages>();
  }

  // Chunked: a regular grid (chunk_shape) or a rectilinear one (chunk_bounds, version 2). The
  // largest chunk: the chunk shape itself for a regular grid (not copied: this runs for every
  // leaf of a file as it is opened).
  Shape rectilinear_max;
  const Shape* max_chunk = &l.chunk_shape;
  std::optional<uint64_t> n;
  if (!l.chunk_bounds.empty()) {
    if (!l.chunk_shape.empty()) {
      JTREE_LEAF_FAIL(kCorruption, leaf_error(t, i, "both a chunk shape and chunk bounds"));
    }
    auto ends = split_chunk_bounds(l.shape, l.chunk_bounds);
    if (!ends) {
      JTREE_LEAF_FAIL(kCorruption,
                      leaf_error(t, i, "chunk bounds are not, for each dimension, strictly "
                                       "increasing ends that finish at its extent"));
    }
    n = rectilinear_chunk_count(*ends);
    rectilinear_max = ChunkGrid::rectilinear(l.shape, std::move(*ends)).max_chunk();
    max_chunk = &rectilinear_max;
  } else {
    if (l.chunk_shape.size() != l.shape.size()) {
      JTREE_LEAF_FAIL(kCorruption,
                      leaf_error(t, i, "chunk shape rank " + std::to_string(l.chunk_shape.size()) +
                                           " differs from shape rank " +
                                           std::to_string(l.shape.size())));
    }
    for (size_t d = 0; d < l.shape.size(); ++d) {
      if (l.chunk_shape[d] == 0 || l.chunk_shape[d] > std::max<uint64_t>(l.shape[d], 1)) {
        JTREE_LEAF_FAIL(kCorruption,
                        leaf_error(t, i, "chunk shape dimension " + std::to_string(d) + " is " +
                                             std::to_string(l.chunk_shape[d]) +
                                             " for an extent of " + std::to_string(l.shape[d])));
      }
    }
    n = grid_chunk_count(l.shape, l.chunk_shape);
  }
  auto chunk_elements = checked_product(*max_chunk, kMaxElements);
  uint64_t chunk_bytes = chunk_elements ? stored_bytes(l.dtype, *chunk_elements) : UINT64_MAX;
  if (chunk_bytes > std::min(limits.max_chunk_bytes, kMaxChunkFormatBytes)) {
    JTREE_LEAF_FAIL(kResourceExhausted,
                    Status::resource_exhausted(
                        "leaf " + t.leaf_path(static_cast<uint32_t>(i)) + ": chunks of " +
                        std::to_string(chunk_bytes) + " bytes, over the limit of " +
                        std::to_string(std::min(limits.max_chunk_bytes, kMaxChunkFormatBytes))));
  }
  if (!filter_ok(l.filter, l.dtype)) {
    JTREE_LEAF_FAIL(kCorruption,
                    leaf_error(t, i, "filter " + std::string(filter_name(l.filter)) +
                                         " cannot apply to dtype " + std::string(dtype_name(l.dtype))));
  }
  if (l.codec == Codec::kRaw && (l.filter != Filter::kNone || l.level != 0)) {
    JTREE_LEAF_FAIL(kCorruption, leaf_error(t, i, "filter or level on a raw leaf"));
  }
  if (!n) JTREE_LEAF_FAIL(kCorruption, leaf_error(t, i, "chunk grid too large"));
  if (*n == 0) {
    JTREE_LEAF_FAIL(kCorruption, leaf_error(t, i, "empty array stored as chunks (must be inline)"));
  }
  *chunks = *n;
  return leaf_ok<kMessages>();
}

#undef JTREE_LEAF_FAIL

}  // namespace

size_t planes_of(const Leaf& leaf) {
  if (leaf.filter == Filter::kNone) return 1;
  return std::max<size_t>(1, dtype_info(leaf.dtype)->stored_bits / 8);
}

void for_each_chunk_raw_size_general(const Leaf& leaf,
                                     const std::function<void(uint64_t, uint64_t)>& fn) {
  // (Rectilinear grids and ranks over 16 only: the inline version walks the others.)
  const ChunkGrid grid = ChunkGrid::of(leaf);
  for (uint64_t k = 0; k < grid.count(); ++k) fn(k, stored_bytes(leaf.dtype, grid.elements(k)));
}

uint64_t chunk_raw_size(const Leaf& leaf, uint64_t local) {
  if (!leaf.chunk_bounds.empty()) {
    return stored_bytes(leaf.dtype, ChunkGrid::of(leaf).elements(local));
  }
  ChunkGrid grid(leaf.shape, leaf.chunk_shape);
  return stored_bytes(leaf.dtype, grid.elements(local));
}

Result<uint64_t> validate_leaves(Tree& tree, const Limits& limits) {
  uint64_t total = 0;
  for (size_t i = 0; i < tree.leaves.size(); ++i) {
    uint64_t n = 0;
    JTREE_RETURN_IF_ERROR(check_leaf<true>(tree, tree.leaves[i], i, limits, &n));
    tree.leaves[i].first_chunk = total;
    auto sum = checked_add(total, n);
    if (!sum) return Status::corruption("header: chunk count overflows");
    total = *sum;
  }
  return total;
}

uint16_t leaf_min_read_version(const Leaf& leaf) {
  // Scalar leaves carry dtype Invalid (0): only payloads can use a version-2 dtype. A
  // rectilinear chunk grid (chunk_bounds) is version 2 as well.
  if (!leaf.chunk_bounds.empty()) return 2;
  return static_cast<uint8_t>(leaf.dtype) >= kFirstVersion2DTypeCode ? 2 : 1;
}

uint16_t tree_min_read_version(const Tree& tree) {
  uint16_t v = 1;
  for (const Leaf& l : tree.leaves) v = std::max(v, leaf_min_read_version(l));
  return v;
}

bool leaf_spec_valid(const Leaf& leaf, const Limits& limits, uint64_t* chunks) {
  // The tree and the leaf number are used only by messages, which this version does not build.
  return check_leaf<false>(kNoTree, leaf, 0, limits, chunks);
}

Status validate_index(const Tree& tree, const IndexData& index, uint64_t expected_chunks,
                      uint64_t file_size, std::span<const Region> metadata, FileKind kind,
                      uint64_t generation) {
  std::vector<uint32_t> ids;
  for (size_t i = 0; i < tree.leaves.size(); ++i) {
    if (tree.leaves[i].storage == Storage::kChunked) ids.push_back(static_cast<uint32_t>(i));
  }
  ChunkedLeaves leaves{ids, [&](uint32_t i, Leaf& out) { out = tree.leaves[i]; },
                       [&](uint32_t i) { return tree.leaf_path(i); }};
  return validate_index(leaves, index, expected_chunks, file_size, metadata, kind, generation);
}

Status validate_index(const ChunkedLeaves& leaves, const IndexData& index,
                      uint64_t expected_chunks, uint64_t file_size,
                      std::span<const Region> metadata, FileKind kind, uint64_t generation) {
  if (index.generation != generation) {
    return Status::corruption("index: generation " + std::to_string(index.generation) +
                              " but the footer says " + std::to_string(generation));
  }
  if (index.chunks.size() != expected_chunks) {
    return Status::corruption("index lists " + std::to_string(index.chunks.size()) +
                              " chunks; the header's leaves have " +
                              std::to_string(expected_chunks));
  }
  if (index.segment_info.has_value() != (kind == FileKind::kSegment)) {
    return Status::corruption("index: segment info present only in segment files");
  }
  if (index.segment_info && index.segment_info->process_index >= index.segment_info->process_count) {
    // Section 11: 0 <= process_index < process_count (a commit would look for segments that
    // cannot exist, or take this one for another process's).
    return Status::corruption("index: segment of process " +
                              std::to_string(index.segment_info->process_index) + " of " +
                              std::to_string(index.segment_info->process_count) +
                              " (the process index must be below the count)");
  }
  // A save writes at most one segment per chunk (+1: an empty one), and each append adds at most
  // one segment while earlier ones stay listed (section 10.2) even when all their chunks were
  // replaced: at most chunks + generation + 1 segments.
  if (index.segments.size() > index.chunks.size() + 1 &&
      index.segments.size() - index.chunks.size() - 1 > generation) {
    return Status::corruption("index: " + std::to_string(index.segments.size()) +
                              " segments for " + std::to_string(index.chunks.size()) +
                              " chunks in generation " + std::to_string(generation));
  }
  // Segments: inside the file after the preamble, clear of metadata and of each other.
  std::vector<std::pair<uint64_t, uint64_t>> spans;  // (offset, end)
  for (size_t s = 0; s < index.segments.size(); ++s) {
    const SegmentSpan& seg = index.segments[s];
    if (seg.file_offset < kPreambleSize || !range_within(seg.file_offset, seg.size, file_size)) {
      return Status::corruption("index: segment " + std::to_string(s) + " [" +
                                std::to_string(seg.file_offset) + ", +" +
                                std::to_string(seg.size) + ") lies outside the data region");
    }
    for (const Region& m : metadata) {
      if (seg.file_offset < m.offset + m.size && m.offset < seg.file_offset + seg.size) {
        return Status::corruption("index: segment " + std::to_string(s) + " overlaps the " +
                                  m.what);
      }
    }
    if (seg.size) spans.emplace_back(seg.file_offset, seg.file_offset + seg.size);
  }
  std::sort(spans.begin(), spans.end());
  for (size_t k = 1; k < spans.size(); ++k) {
    if (spans[k].first < spans[k - 1].second) return Status::corruption("index: segments overlap");
  }

  // Chunks, leaf by leaf. Each leaf is decoded again here (a reader that keeps no Tree has
  // only the header): for a tree of many leaves that is a good part of an open, so ranges of
  // leaves are checked in parallel, each with its own scratch leaf (bench's small
  // file, 10,000 chunked leaves: 1.25 -> 0.93 ms on 2 vCPUs). The first error in leaf order is
  // the one reported, whatever the timing: the same as a serial pass's.
  constexpr size_t kLeavesPerRange = 2048;
  const size_t ranges = (leaves.ids.size() + kLeavesPerRange - 1) / kLeavesPerRange;
  std::vector<Status> errors(ranges);
  // (offset, end) of every chunk, at the chunk's place in the index: each range fills the
  // places of its own leaves' chunks (consecutive, and no other range's), so nothing is
  // gathered afterwards. Absent chunks keep the marker and are dropped before the sort.
  constexpr std::pair<uint64_t, uint64_t> kAbsent{UINT64_MAX, UINT64_MAX};
  spans.assign(index.chunks.size(), kAbsent);
  auto check_range = [&](size_t r) -> Status {
    Status err;
    Leaf leaf;
    const size_t end = std::min(leaves.ids.size(), (r + 1) * kLeavesPerRange);
    for (size_t n = r * kLeavesPerRange; n < end && err.ok(); ++n) {
      const uint32_t li = leaves.ids[n];
      leaves.decode(li, leaf);
      const uint64_t planes = planes_of(leaf);
      for_each_chunk_raw_size(leaf, [&](uint64_t k, uint64_t raw) {
        if (!err.ok()) return;
        const ChunkRecord& c = index.chunks[leaf.first_chunk + k];
        auto fail = [&](const std::string& what) {
          err = Status::corruption("leaf " + leaves.path(li) +
                                   ": chunk " + std::to_string(k) + ": " + what);
        };
        if (c.reserved != 0 || (c.flags & ~kChunkAbsent) != 0) return fail("reserved bits set");
        if (c.flags & kChunkAbsent) {
          if (kind != FileKind::kSegment) return fail("absent chunk in a complete file");
          if (c.offset || c.stored_size || c.checksum || c.segment || c.encoding) {
            return fail("absent chunk with data fields set");
          }
          return;
        }
        if (c.segment >= index.segments.size()) return fail("segment number out of range");
        const SegmentSpan& seg = index.segments[c.segment];
        if (!range_within(c.offset, c.stored_size, seg.size)) {
          return fail("stored bytes [" + std::to_string(c.offset) + ", +" +
                      std::to_string(c.stored_size) + ") outside its segment of " +
                      std::to_string(seg.size) + " bytes");
        }
        switch (c.encoding) {
          case 0:  // Raw
            if (c.stored_size != raw) {
              return fail("raw chunk of " + std::to_string(c.stored_size) + " bytes; " +
                          "its shape needs " + std::to_string(raw));
            }
            break;
          case 1:  // Planes
            if (leaf.codec == Codec::kRaw) return fail("compressed chunk in a raw leaf");
            if (c.stored_size < 4 * planes || c.stored_size > raw + 4 * planes ||
                raw % planes != 0) {
              return fail("compressed chunk of " + std::to_string(c.stored_size) +
                          " bytes cannot hold " + std::to_string(raw) + " raw bytes in " +
                          std::to_string(planes) + " planes");
            }
            break;
          default:
            return fail("unknown encoding " + std::to_string(c.encoding));
        }
        spans[leaf.first_chunk + k] = {seg.file_offset + c.offset,
                                       seg.file_offset + c.offset + c.stored_size};
      });
    }
    errors[r] = std::move(err);
    return Status::success();  // (ranked below by range, not by which range failed first)
  };
  JTREE_RETURN_IF_ERROR(parallel_for(ThreadPool::shared(), ranges, ranges > 1 ? 0 : 1,
                                     check_range));
  for (const Status& e : errors) JTREE_RETURN_IF_ERROR(e);
  std::erase(spans, kAbsent);
  // Written in completion order, chunks are nearly sorted already.
  if (!std::is_sorted(spans.begin(), spans.end())) std::sort(spans.begin(), spans.end());
  for (size_t k = 1; k < spans.size(); ++k) {
    if (spans[k].first < spans[k - 1].second) {
      return Status::corruption("index: chunks overlap at file offset " +
                                std::to_string(spans[k].first));
    }
  }
  return Status::success();
}

}  // namespace jtree::format
