#include "cuda/direct_plan.h"

#include <algorithm>

#include "format/chunk_grid.h"
#include "jtree/dtype.h"

namespace jtree::staging {

namespace {

// The dimension along which `box` has several chunks (rank when it is one chunk) when the box is
// a union of whole chunks that are contiguous slabs of its C-order bytes: whole chunks, several
// along at most one dimension, extent 1 along every dimension before it. nullopt otherwise.
std::optional<size_t> slab_dimension(const format::ChunkGrid& grid, const Box& box, Shape& lo,
                                     Shape& hi) {
  const size_t rank = grid.rank();
  if (box.begin.size() != rank || box.end.size() != rank) return std::nullopt;
  grid.overlapping(box, lo, hi);
  size_t cut = rank;
  for (size_t d = 0; d < rank; ++d) {
    if (hi[d] <= lo[d]) return std::nullopt;
    // Whole chunks only: a part of a chunk cannot be checked against its checksum.
    if (box.begin[d] != grid.begin(d, lo[d]) || box.end[d] != grid.end(d, hi[d] - 1)) {
      return std::nullopt;
    }
    if (hi[d] - lo[d] > 1) {
      if (cut != rank) return std::nullopt;
      cut = d;
    }
  }
  for (size_t d = 0; d < cut && cut < rank; ++d) {
    if (box.end[d] - box.begin[d] != 1) return std::nullopt;
  }
  return cut;
}

}  // namespace

std::optional<FileRun> piece_file_run(const Reader& reader, uint32_t leaf, const Box& box,
                                      uint64_t bytes) {
  const Leaf& l = reader.leaf(leaf);
  if (l.storage != Storage::kChunked || is_4bit(l.dtype) || bytes == 0) return std::nullopt;
  const format::ChunkGrid grid = format::ChunkGrid::of(l);
  Shape lo, hi;
  const std::optional<size_t> slab = slab_dimension(grid, box, lo, hi);
  if (!slab) return std::nullopt;
  const size_t cut = *slab, rank = grid.rank();
  const uint64_t item = dtype_info(l.dtype)->item_size;
  FileRun run;
  Shape g = lo;
  const uint64_t n = cut < rank ? hi[cut] - lo[cut] : 1;
  for (uint64_t i = 0; i < n; ++i) {
    if (cut < rank) g[cut] = lo[cut] + i;
    const uint64_t local = grid.linear(g);
    const ChunkInfo c = reader.chunk(l.first_chunk + local);
    if (c.absent || c.encoding != ChunkEncoding::kRaw ||
        c.stored_size != grid.elements(local) * item) {
      return std::nullopt;
    }
    if (i == 0) {
      run.offset = c.file_offset;
    } else if (c.file_offset != run.offset + run.bytes) {
      return std::nullopt;  // not back to back (padding, an older writer, several processes)
    }
    run.bytes += c.stored_size;
    run.chunks.push_back({local, c});
  }
  if (run.bytes != bytes) return std::nullopt;
  return run;
}

std::vector<Piece> split_at_chunks(const Reader& reader, uint32_t leaf, const Piece& piece) {
  const Leaf& l = reader.leaf(leaf);
  if (l.storage != Storage::kChunked || piece.bytes == 0) return {};
  const format::ChunkGrid grid = format::ChunkGrid::of(l);
  Shape lo, hi;
  const std::optional<size_t> slab = slab_dimension(grid, piece.box, lo, hi);
  if (!slab || *slab == grid.rank()) return {};
  const size_t k = *slab;
  const uint64_t per_index = piece.bytes / (piece.box.end[k] - piece.box.begin[k]);
  std::vector<Piece> out;
  for (uint64_t i = lo[k]; i < hi[k]; ++i) {
    Piece p = piece;
    p.box.begin[k] = grid.begin(k, i);
    p.box.end[k] = grid.end(k, i);
    p.dst_offset = piece.dst_offset + (p.box.begin[k] - piece.box.begin[k]) * per_index;
    p.bytes = (p.box.end[k] - p.box.begin[k]) * per_index;
    out.push_back(std::move(p));
  }
  return out;
}

namespace {

// Adds the file extents of the chunks of `box` of leaf `l` (their grid coordinates [lo, hi),
// row-major) to `out`.
void add_box_extents(const Reader& reader, const Leaf& l, const format::ChunkGrid& grid,
                     const Box& box, std::vector<io::FileExtent>& out) {
  Shape lo, hi;
  grid.overlapping(box, lo, hi);
  for (size_t d = 0; d < lo.size(); ++d) {
    if (hi[d] <= lo[d]) return;  // (an empty box reads nothing)
  }
  Shape g = lo;
  for (;;) {
    const ChunkInfo c = reader.chunk(l.first_chunk + grid.linear(g));
    if (!c.absent && c.stored_size > 0) out.push_back({c.file_offset, c.stored_size});
    size_t d = g.size();
    while (d > 0) {  // the next coordinate, the last dimension fastest
      --d;
      if (++g[d] < hi[d]) break;
      g[d] = lo[d];
      if (d == 0) return;
    }
    if (g.empty()) return;  // (rank 0: one chunk)
  }
}

}  // namespace

std::vector<io::FileExtent> load_extents(const Reader& reader,
                                         std::span<const DeviceRequest> requests,
                                         std::span<const Box> boxes) {
  std::vector<io::FileExtent> all;
  for (size_t i = 0; i < requests.size() && i < boxes.size(); ++i) {
    const Leaf& l = reader.leaf(requests[i].leaf);
    if (l.storage != Storage::kChunked) continue;
    add_box_extents(reader, l, format::ChunkGrid::of(l), boxes[i], all);
  }
  return io::merge_extents(std::move(all));
}

}  // namespace jtree::staging
