// Reader::mapped_leaf / map_leaves / mapped_box: leaves stored as their C-order array, handed
// out in place from the file's copy-on-write mapping (no copy), their checksums verified in
// parallel (for a box, only the chunks it overlaps).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <optional>

#include "format/chunk_grid.h"
#include "read/check_request.h"
#include "read/reader_impl.h"
#include "util/thread_pool.h"

namespace jtree {
namespace {

// Where a mappable leaf lies in the file: its chunks [first, first + count) are stored back to
// back from `offset`, `size` bytes in all.
struct LeafRun {
  uint64_t first = 0, count = 0, offset = 0, size = 0;
};

// The run of `leaf` when the mapping holds it as its C-order array in memory layout, else
// nullopt. Checks only what the index says (cheap: one pass over the leaf's entries); the
// bytes are checked by the checksums.
std::optional<LeafRun> leaf_run(const Reader::Impl& impl, const Leaf& l, uint64_t map_size) {
  if (l.storage != Storage::kChunked || is_4bit(l.dtype)) return std::nullopt;
  if (!format::chunks_concatenate_in_c_order(format::ChunkGrid::of(l))) return std::nullopt;
  const uint64_t count = Tree::chunk_count(l);
  const uint64_t item = dtype_info(l.dtype)->item_size;
  if (count == 0) return std::nullopt;
  LeafRun run{l.first_chunk, count, 0, 0};
  for (uint64_t k = 0; k < count; ++k) {
    const ChunkInfo c = impl.chunk(l.first_chunk + k);
    if (c.absent || c.encoding != ChunkEncoding::kRaw) return std::nullopt;
    if (k == 0) {
      run.offset = c.file_offset;
    } else if (c.file_offset != run.offset + run.size) {
      return std::nullopt;  // not back to back (an older writer, or a multi-process save)
    }
    run.size += c.stored_size;
  }
  // (Validation already bounds every chunk by the file; the map is the file as opened.)
  if (run.offset % item != 0 || run.size != l.memory_bytes() || run.offset > map_size ||
      run.size > map_size - run.offset) {
    return std::nullopt;
  }
  return run;
}

// Maps the pages of `bytes` in one system call (MADV_POPULATE_READ, Linux 5.14+) instead of
// one fault per page (or per 16 pages with the kernel's fault-around) as the hash touches
// them. A hint: where the kernel lacks it the hash faults them in as before.
void populate(std::span<const std::byte> bytes) {
#ifdef MADV_POPULATE_READ
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(bytes.data()) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(bytes.data()) + bytes.size();
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_READ);
#else
  (void)bytes;
#endif
}

// One mapped chunk to verify: leaf `leaf`'s local chunk `local`, index entry `global`.
struct MappedChunk {
  uint32_t leaf = 0;
  uint64_t local = 0, global = 0;
};

// Verifies `chunks` of the mapping `bytes` (whose first byte is the file's byte `base`) on
// options.threads workers, each chunk's pages mapped in one call first (the hash would fault
// them in one by one). Progress in stored bytes; the first damaged chunk fails the call.
Status verify_mapped(const Reader& r, const Reader::Impl& impl, std::span<const std::byte> bytes,
                     uint64_t base, std::span<const MappedChunk> chunks,
                     const ReadOptions& options) {
  if (chunks.empty()) return Status::success();
  std::mutex progress_mu;
  uint64_t done = 0, total = 0;
  if (options.progress) {
    for (const MappedChunk& m : chunks) total += impl.chunk(m.global).stored_size;
  }
  const int workers = resolve_threads(options.threads);
  return parallel_for(pool_for(workers), chunks.size(), workers, [&](size_t n) -> Status {
    const MappedChunk& m = chunks[n];
    const ChunkInfo c = impl.chunk(m.global);
    const std::span<const std::byte> stored = bytes.subspan(c.file_offset - base, c.stored_size);
    populate(stored);
    JTREE_RETURN_IF_ERROR(impl.verify_chunk(c, stored, m.leaf, m.local));
    if (options.progress) {
      std::lock_guard<std::mutex> lock(progress_mu);
      done += c.stored_size;
      if (!options.progress(done, total)) return Status::aborted(r.name() + ": read cancelled");
    }
    return Status::success();
  });
}

Status leaf_in_range(const Reader& r, uint32_t leaf) {
  if (leaf >= r.num_leaves()) {
    return Status::invalid_argument(r.name() + ": leaf number " + std::to_string(leaf) +
                                   " out of range (" + std::to_string(r.num_leaves()) +
                                   " leaves)");
  }
  return Status::success();
}

// The checks mapped_box and mapped_chunk make of their arguments.
Status check_map_request(const Reader& r, uint32_t leaf, const Box& box,
                         const ReadOptions& options) {
  JTREE_RETURN_IF_ERROR(check_read_options(r, options));
  JTREE_RETURN_IF_ERROR(leaf_in_range(r, leaf));
  const Shape& shape = r.leaf(leaf).shape;
  JTREE_RETURN_IF_ERROR(check_box_rank(r, leaf, box.begin.size()));
  JTREE_RETURN_IF_ERROR(check_box_rank(r, leaf, box.end.size()));
  for (size_t d = 0; d < shape.size(); ++d) {
    if (box.begin[d] > box.end[d] || box.end[d] > shape[d]) {
      return Status::invalid_argument(r.name() + ": leaf " + r.leaf_path(leaf) + ": slice [" +
                                     std::to_string(box.begin[d]) + ":" +
                                     std::to_string(box.end[d]) + "] out of bounds for dimension " +
                                     std::to_string(d) + " of extent " +
                                     std::to_string(shape[d]));
    }
  }
  return Status::success();
}

}  // namespace

Result<MappedLeaf> Reader::mapped_leaf(uint32_t leaf, const ReadOptions& options) const {
  JTREE_ASSIGN_OR_RETURN(std::vector<MappedLeaf> one, map_leaves(std::span(&leaf, 1), options));
  return std::move(one[0]);
}

Result<std::vector<MappedLeaf>> Reader::map_leaves(std::span<const uint32_t> leaves,
                                                   const ReadOptions& options) const {
  const ReadTree& t = impl_->file.tree;
  JTREE_RETURN_IF_ERROR(check_read_options(*this, options));
  std::vector<MappedLeaf> out(leaves.size());
  for (uint32_t l : leaves) JTREE_RETURN_IF_ERROR(leaf_in_range(*this, l));
  const std::shared_ptr<const MappedFile> whole = impl_->source->mapped_file();
  if (!whole) return out;
  std::vector<std::optional<LeafRun>> runs(leaves.size());
  uint64_t lo = UINT64_MAX, hi = 0;
  for (size_t i = 0; i < leaves.size(); ++i) {
    runs[i] = leaf_run(*impl_, t.leaf(leaves[i]), whole->bytes().size());
    if (!runs[i]) continue;
    lo = std::min(lo, runs[i]->offset);
    hi = std::max(hi, runs[i]->offset + runs[i]->size);
  }
  if (lo >= hi) return out;
  // A mapping of its own for this call, not views of the shared one: arrays written by one
  // load are then never seen by another load, nor by what a later call verifies (as for
  // mapped_box). One mmap per call, whatever the number of leaves.
  const std::shared_ptr<const MappedFile> map = impl_->source->map_range(lo, hi - lo);
  if (!map) return out;  // (the mapping failed: the caller reads instead)
  const std::span<std::byte> bytes = map->bytes();

  std::vector<MappedChunk> chunks;
  for (size_t i = 0; i < leaves.size(); ++i) {
    const std::optional<LeafRun>& run = runs[i];
    if (!run) continue;
    out[i].bytes = bytes.subspan(run->offset - lo, run->size);
    out[i].owner = map;
    if (options.verify_checksums) {
      for (uint64_t k = 0; k < run->count; ++k) chunks.push_back({leaves[i], k, run->first + k});
    }
  }
  JTREE_RETURN_IF_ERROR(verify_mapped(*this, *impl_, bytes, lo, chunks, options));
  return out;
}

Result<MappedLeaf> Reader::mapped_chunk(uint32_t leaf, const Box& box,
                                        const ReadOptions& options) const {
  JTREE_RETURN_IF_ERROR(check_map_request(*this, leaf, box, options));
  const Leaf& l = impl_->file.tree.leaf(leaf);
  MappedLeaf out;
  if (l.storage != Storage::kChunked || is_4bit(l.dtype) || box.num_elements() == 0) return out;
  const std::shared_ptr<const MappedFile> whole = impl_->source->mapped_file();
  if (!whole) return out;
  const format::ChunkGrid grid = format::ChunkGrid::of(l);
  Shape glo, ghi;
  grid.overlapping(box, glo, ghi);
  for (size_t d = 0; d < glo.size(); ++d) {
    if (ghi[d] != glo[d] + 1) return out;  // more than one chunk
  }
  const uint64_t k = grid.linear(glo);
  const Box cb = grid.box(k);
  if (cb.begin != box.begin || cb.end != box.end) return out;  // a part of the chunk
  const ChunkInfo c = impl_->chunk(l.first_chunk + k);
  const uint64_t item = dtype_info(l.dtype)->item_size;
  if (c.absent || c.encoding != ChunkEncoding::kRaw || c.file_offset % item != 0 ||
      c.stored_size != box.num_elements() * item) {
    return out;
  }
  const std::shared_ptr<const MappedFile> map = impl_->source->map_range(c.file_offset,
                                                                         c.stored_size);
  if (!map) return out;
  if (options.verify_checksums) {
    const MappedChunk one{leaf, k, l.first_chunk + k};
    JTREE_RETURN_IF_ERROR(
        verify_mapped(*this, *impl_, map->bytes(), c.file_offset, std::span(&one, 1), options));
  }
  out.bytes = map->bytes();
  out.owner = map;
  return out;
}

Result<MappedLeaf> Reader::mapped_box(uint32_t leaf, const Box& box,
                                      const ReadOptions& options) const {
  JTREE_RETURN_IF_ERROR(check_map_request(*this, leaf, box, options));
  const Leaf& l = impl_->file.tree.leaf(leaf);
  const size_t rank = l.shape.size();
  MappedLeaf out;
  const std::shared_ptr<const MappedFile> whole = impl_->source->mapped_file();
  if (!whole) return out;
  const std::optional<LeafRun> run = leaf_run(*impl_, l, whole->bytes().size());
  if (!run) return out;
  for (size_t d = 0; d < rank; ++d) {
    if (box.begin[d] == box.end[d]) {  // empty: nothing to view or verify
      out.owner = whole;
      return out;
    }
  }

  // The box's first and one-past-last byte in the leaf's C-order layout. (Bounded by the
  // leaf's size, which leaf_run checked against the map: no overflow.)
  const uint64_t item = dtype_info(l.dtype)->item_size;
  uint64_t stride = item, first = 0, last = 0;
  for (size_t d = rank; d-- > 0;) {
    first += box.begin[d] * stride;
    last += (box.end[d] - 1) * stride;
    stride *= l.shape[d];
  }
  // The file bytes to map: the box's, and every chunk it overlaps when they are verified.
  uint64_t lo = run->offset + first, hi = run->offset + last + item;
  std::vector<MappedChunk> chunks;
  if (options.verify_checksums) {
    // The chunks the box overlaps: grid coordinates [glo, ghi), counted like an odometer.
    const format::ChunkGrid grid = format::ChunkGrid::of(l);
    Shape glo, ghi;
    grid.overlapping(box, glo, ghi);
    for (Shape g = glo;;) {
      const uint64_t k = grid.linear(g);
      chunks.push_back({leaf, k, run->first + k});
      const ChunkInfo c = impl_->chunk(run->first + k);
      lo = std::min(lo, c.file_offset);
      hi = std::max(hi, c.file_offset + c.stored_size);
      size_t d = rank;
      while (d > 0 && ++g[d - 1] == ghi[d - 1]) {
        g[d - 1] = glo[d - 1];
        --d;
      }
      if (d == 0) break;
    }
  }
  // A mapping of its own, not a view of the shared one: a write into this box (or into a
  // whole mapped leaf) is then never seen by another box, nor by what a later call verifies.
  const std::shared_ptr<const MappedFile> map = impl_->source->map_range(lo, hi - lo);
  if (!map) return out;  // (the mapping failed: read instead)
  JTREE_RETURN_IF_ERROR(verify_mapped(*this, *impl_, map->bytes(), lo, chunks, options));
  out.bytes = map->bytes().subspan(run->offset + first - lo, last + item - first);
  out.owner = map;
  return out;
}

}  // namespace jtree
