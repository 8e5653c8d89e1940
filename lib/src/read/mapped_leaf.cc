// Reader::mapped_leaf / map_leaves: leaves stored as their C-order array, handed out in place
// from the file's copy-on-write mapping (no copy), their checksums verified in parallel.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <optional>

#include "format/chunk_grid.h"
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

}  // namespace

Result<MappedLeaf> Reader::mapped_leaf(uint32_t leaf, const ReadOptions& options) const {
  JTREE_ASSIGN_OR_RETURN(std::vector<MappedLeaf> one, map_leaves(std::span(&leaf, 1), options));
  return std::move(one[0]);
}

Result<std::vector<MappedLeaf>> Reader::map_leaves(std::span<const uint32_t> leaves,
                                                   const ReadOptions& options) const {
  const ReadTree& t = impl_->file.tree;
  std::vector<MappedLeaf> out(leaves.size());
  for (uint32_t l : leaves) {
    if (l >= t.num_leaves()) {
      return Status::InvalidArgument(name() + ": leaf number " + std::to_string(l) +
                                     " out of range (" + std::to_string(t.num_leaves()) +
                                     " leaves)");
    }
  }
  std::shared_ptr<const MappedFile> map = impl_->source->mapped_file();
  if (!map) return out;
  const std::span<std::byte> bytes = map->bytes();

  // Every chunk to verify: (leaf position in `leaves`, local chunk number).
  std::vector<std::pair<size_t, uint64_t>> chunks;
  std::vector<std::optional<LeafRun>> runs(leaves.size());
  for (size_t i = 0; i < leaves.size(); ++i) {
    runs[i] = leaf_run(*impl_, t.leaf(leaves[i]), bytes.size());
    if (!runs[i]) continue;
    out[i].bytes = bytes.subspan(runs[i]->offset, runs[i]->size);
    out[i].owner = map;
    if (options.verify_checksums) {
      for (uint64_t k = 0; k < runs[i]->count; ++k) chunks.emplace_back(i, k);
    }
  }
  if (chunks.empty()) return out;

  std::mutex progress_mu;
  uint64_t done = 0, total = 0;
  if (options.progress) {
    for (const auto& [i, k] : chunks) total += impl_->chunk(runs[i]->first + k).stored_size;
  }
  const int workers = resolve_threads(options.threads);
  Status st = parallel_for(pool_for(workers), chunks.size(), workers, [&](size_t n) -> Status {
    const auto [i, k] = chunks[n];
    const ChunkInfo c = impl_->chunk(runs[i]->first + k);
    const std::span<const std::byte> stored = bytes.subspan(c.file_offset, c.stored_size);
    populate(stored);
    JTREE_RETURN_IF_ERROR(impl_->verify_chunk(c, stored, leaves[i], k));
    if (options.progress) {
      std::lock_guard<std::mutex> lock(progress_mu);
      done += c.stored_size;
      if (!options.progress(done, total)) return Status::Aborted(name() + ": read cancelled");
    }
    return Status::OK();
  });
  if (!st.ok()) return st;
  return out;
}

}  // namespace jtree
