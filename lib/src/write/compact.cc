// compact(): rewrite the current generation into a new file without dead bytes. Chunks are
// copied as stored (no re-encoding) after their checksums are verified.
#include <mutex>

#include "codec/checksum.h"
#include "format/layout.h"
#include "jtree/reader.h"
#include "jtree/writer.h"
#include "util/scratch_cache.h"
#include "util/thread_pool.h"
#include "write/chunk_writer.h"
#include "write/finish_generation0.h"
#include "write/metadata_writer.h"
#include "write/save_internal.h"

namespace jtree {
namespace {

Status compact_into(const Reader& reader, Sink& sink, const WriteOptions& options,
                    WriteStats* stats) {
  Tree tree = reader.tree();
  JTREE_ASSIGN_OR_RETURN(std::vector<std::byte> header, header_bytes(tree, options.writer));
  const format::VersionInfo version = version_for(tree);
  JTREE_RETURN_IF_ERROR(write_head(sink, header, version));

  format::IndexData index;
  const uint64_t n = reader.info().num_chunks;
  index.chunks.resize(n);
  ChunkStream stream(sink, options.alignment, random_u64(), 0);
  JTREE_RETURN_IF_ERROR(stream.begin());

  uint64_t total = 0, done = 0;
  for (uint64_t i = 0; i < n; ++i) total += reader.chunk(i).stored_size;
  std::mutex mu;
  const uint64_t max_chunk = std::max<uint64_t>(reader.options().limits.max_chunk_bytes, 1);
  const int wanted =
      std::max(resolve_threads(options.threads), reader.source()->preferred_concurrency());
  const int workers = static_cast<int>(std::clamp<uint64_t>(
      options.max_bytes_in_flight / max_chunk, 1, static_cast<uint64_t>(wanted)));
  // Chunks [first, first + count): one chunk, or every chunk of a Raw-codec leaf, copied as one
  // run so that the leaf stays stored as its array (mappable, spec section 8.2).
  struct Task {
    uint64_t first, count;
  };
  std::vector<uint64_t> run_at(n, 1);  // chunks in the task starting at chunk i
  for (const Leaf& l : tree.leaves) {
    if (l.storage == Storage::kChunked && l.codec == Codec::kRaw && l.first_chunk < n) {
      run_at[l.first_chunk] = std::clamp<uint64_t>(Tree::chunk_count(l), 1, n - l.first_chunk);
    }
  }
  std::vector<Task> tasks;
  for (uint64_t i = 0; i < n; i += run_at[i]) tasks.push_back({i, run_at[i]});
  // Reads chunk i into `buf` and checks it.
  auto fetch = [&](uint64_t i, ScratchBytes& buf) -> Result<ChunkInfo> {
    const ChunkInfo c = reader.chunk(i);
    buf.resize(c.stored_size);
    ReadRange r{c.file_offset, buf};
    JTREE_RETURN_IF_ERROR(reader.source()->read(std::span(&r, 1)));
    if (xxh3(buf, c.seed) != c.checksum) {
      return Status::corruption(reader.name() + ": chunk " + std::to_string(i) +
                                ": checksum mismatch; not compacting a damaged file");
    }
    return c;
  };
  // A task's chunk buffer is a scratch set of its own (util/scratch_cache.h).
  struct ChunkBuffer {
    ScratchBytes bytes_;
    size_t bytes() const { return bytes_.capacity(); }
  };
  using Cache = ScratchCache<ChunkBuffer>;
  Cache::Use use(Cache::shared());  // (sets kept while the tasks run)
  Status st = parallel_for(pool_for(workers), tasks.size(), workers, [&](size_t t) -> Status {
    const Task task = tasks[t];
    Cache::Lease lease(Cache::shared());
    ScratchBytes& buf = lease->bytes_;
    uint64_t bytes = 0;
    bool all_raw = task.count > 1;
    for (uint64_t i = task.first; all_raw && i < task.first + task.count; ++i) {
      all_raw = reader.chunk(i).encoding == ChunkEncoding::kRaw;
    }
    if (all_raw) {
      auto chunk = [&](uint64_t k) -> Result<ChunkStream::RunChunk> {
        JTREE_RETURN_IF_ERROR(fetch(task.first + k, buf).status());
        return ChunkStream::RunChunk{buf, false};
      };
      JTREE_RETURN_IF_ERROR(stream.put_raw_run(task.count, chunk, &index.chunks[task.first]));
      for (uint64_t k = 0; k < task.count; ++k) bytes += index.chunks[task.first + k].stored_size;
    } else {
      for (uint64_t i = task.first; i < task.first + task.count; ++i) {
        JTREE_ASSIGN_OR_RETURN(ChunkInfo c, fetch(i, buf));
        JTREE_RETURN_IF_ERROR(stream.put(buf, c.encoding, &index.chunks[i]));
        bytes += c.stored_size;
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    stats->chunks += task.count;
    stats->stored_bytes += bytes;
    done += bytes;
    if (options.progress && !options.progress(done, total)) {
      return Status::aborted("compact cancelled");
    }
    return Status::success();
  });
  JTREE_RETURN_IF_ERROR(st);
  if (n > 0) index.segments.push_back(stream.span());
  return finish_generation0(sink, index, header, version, tree.leaves.size(), stats);
}

}  // namespace

Result<WriteStats> compact(std::string_view path, std::string_view out_path,
                           const WriteOptions& options) {
  OpenOptions oo;
  oo.use_mmap = false;
  oo.remote = options.remote;
  JTREE_ASSIGN_OR_RETURN(std::shared_ptr<Reader> reader, Reader::open(path, oo));
  if (reader->info().is_segment) {
    return Status::invalid_argument(std::string(path) + ": cannot compact a segment file");
  }
  if (!out_path.empty()) JTREE_RETURN_IF_ERROR(check_save_target(out_path, options));
  SinkOptions so;
  so.overwrite = out_path.empty() ? true : options.overwrite;
  so.sync = options.sync;
  so.remote = options.remote;
  JTREE_ASSIGN_OR_RETURN(std::unique_ptr<Sink> sink,
                         create_sink(out_path.empty() ? path : out_path, so));
  WriteStats stats;
  Status st = compact_into(*reader, *sink, options, &stats);
  if (!st.ok()) {
    sink->abort();
    return st.with_prefix(sink->name());
  }
  return stats;
}

}  // namespace jtree
