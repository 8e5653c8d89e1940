#include "write/chunk_writer.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "codec/checksum.h"
#include "codec/chunk_codec.h"
#include "codec/pack4.h"
#include "format/chunk_grid.h"
#include "format/validate.h"
#include "util/box_copy.h"
#include "util/scratch_cache.h"
#include "util/thread_pool.h"
#include "write/leaf_planner.h"

namespace jtree {

uint64_t random_u64() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

Status pad_to(Sink& sink, uint64_t alignment) {
  static const std::byte kZeros[4096] = {};
  uint64_t rem = sink.position() % alignment;
  if (rem == 0) return Status::success();
  uint64_t pad = alignment - rem;
  while (pad > 0) {
    uint64_t n = std::min<uint64_t>(pad, sizeof kZeros);
    JTREE_RETURN_IF_ERROR(sink.append({kZeros, n}));
    pad -= n;
  }
  return Status::success();
}

Status pad_segment_end(Sink& sink, const SegmentSpan& segment) {
  static const std::byte kZeros[64] = {};
  const uint64_t rem = segment.size % 64;
  return rem == 0 ? Status::success() : sink.append({kZeros, 64 - rem});
}

namespace {

void describe(format::ChunkRecord* record, uint64_t offset, uint64_t size, uint64_t checksum,
              uint32_t segment, ChunkEncoding encoding) {
  record->offset = offset;
  record->stored_size = size;
  record->checksum = checksum;
  record->segment = segment;
  record->encoding = static_cast<uint8_t>(encoding);
  record->flags = 0;
  record->reserved = 0;
}

}  // namespace

Status ChunkStream::begin() {
  // Checked here, where every writer (save, append, compact, segments) starts its chunks: a
  // zero would divide by zero in pad_to().
  if (alignment_ == 0 || (alignment_ & (alignment_ - 1)) != 0 || alignment_ > (1u << 30)) {
    return Status::invalid_argument("write option alignment " + std::to_string(alignment_) +
                                   " is not a power of two up to 1 GiB");
  }
  JTREE_RETURN_IF_ERROR(pad_to(sink_, alignment_));
  start_ = sink_.position();
  return Status::success();
}

Status ChunkStream::put(std::span<const std::byte> stored, ChunkEncoding encoding,
                        format::ChunkRecord* record) {
  uint64_t offset = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Raw chunks start aligned (mmap, O_DIRECT, DMA); compressed ones are packed tightly.
    if (encoding == ChunkEncoding::kRaw) JTREE_RETURN_IF_ERROR(pad_to(sink_, alignment_));
    offset = sink_.position() - start_;
    JTREE_RETURN_IF_ERROR(sink_.append(stored));
  }
  // The checksum goes into the index, not the stream: it is computed outside the lock, so one
  // thread hashes its chunk while another writes (writes into one file are serialized by the
  // kernel anyway).
  describe(record, offset, stored.size(), xxh3(stored, chunk_seed(salt_, offset)), segment_id_,
           encoding);
  return Status::success();
}

Status ChunkStream::put_raw_run(uint64_t count,
                                const std::function<Result<RunChunk>(uint64_t)>& chunk,
                                format::ChunkRecord* records, int threads) {
  // Views of the caller's arrays (the usual case) are all taken first: their offsets are then
  // known before any is written, so that other threads hash them while this one writes.
  std::vector<std::span<const std::byte>> views;
  views.reserve(count);
  std::optional<RunChunk> unstable;  // the first chunk that is not a view, kept for below
  for (uint64_t k = 0; k < count; ++k) {
    JTREE_ASSIGN_OR_RETURN(RunChunk c, chunk(k));
    if (!c.stable) {
      unstable = c;
      break;
    }
    views.push_back(c.bytes);
  }
  std::lock_guard<std::mutex> lock(mu_);
  JTREE_RETURN_IF_ERROR(pad_to(sink_, alignment_));
  if (views.size() == count) {
    uint64_t offset = sink_.position() - start_;
    for (uint64_t k = 0; k < count; ++k) {
      describe(&records[k], offset, views[k].size(), 0, segment_id_, ChunkEncoding::kRaw);
      offset += views[k].size();
    }
    // Item 0 writes every chunk in order; items 1..count hash one chunk each, meanwhile.
    return parallel_for(ThreadPool::shared(), count + 1, resolve_threads(threads),
                        [&](size_t i) -> Status {
                          if (i == 0) {
                            for (const auto& v : views) JTREE_RETURN_IF_ERROR(sink_.append(v));
                            return Status::success();
                          }
                          format::ChunkRecord& r = records[i - 1];
                          r.checksum = xxh3(views[i - 1], chunk_seed(salt_, r.offset));
                          return Status::success();
                        });
  }
  // Chunks gathered into a reused buffer: each written and hashed before the next is made.
  // The views and the unstable chunk already made are used as they are: making a chunk twice
  // would gather it twice, and call a fill function (a deferred leaf's) twice for it.
  for (uint64_t k = 0; k < count; ++k) {
    RunChunk c;
    if (k < views.size()) {
      c = RunChunk{views[k], true};
    } else if (k == views.size() && unstable) {
      c = *unstable;
    } else {
      JTREE_ASSIGN_OR_RETURN(c, chunk(k));
    }
    const uint64_t offset = sink_.position() - start_;
    JTREE_RETURN_IF_ERROR(sink_.append(c.bytes));
    describe(&records[k], offset, c.bytes.size(), xxh3(c.bytes, chunk_seed(salt_, offset)),
             segment_id_, ChunkEncoding::kRaw);
  }
  return Status::success();
}

SegmentSpan ChunkStream::span() const {
  return SegmentSpan{start_, sink_.position() - start_, salt_};
}

namespace {

// Chunks [local, local + count) of a leaf: one chunk, or every chunk of a leaf written as a
// raw run (ChunkStream::put_raw_run).
struct Task {
  uint32_t leaf;
  uint64_t local;
  uint64_t count = 1;
};

// A worker's scratch set for one task (util/scratch_cache.h): gathered elements, packed 4-bit
// elements, encoded chunk, codec scratch.
struct Buffers {
  ScratchBytes gathered, packed, scratch, encoded;
  size_t bytes() const {
    return gathered.capacity() + packed.capacity() + scratch.capacity() + encoded.capacity();
  }
};
using WriteScratchCache = ScratchCache<Buffers>;

// Where one chunk's elements are in this process: the whole array, or the shard holding it.
struct ChunkOrigin {
  const std::byte* base = nullptr;  // element [0, ..., 0] of that array or shard
  std::vector<int64_t> strides;     // its byte strides
  Shape begin;                      // its box's origin in the global array
  Shape extent;                     // its shape
  bool byteswap = false;
  const FillFn* fill = nullptr;     // a producer of the global array instead
};

// The origin of `box` of `leaf`, or nullopt when this process does not hold it. In a
// multi-process save (`process_index` set), leaves without shards are replicated: process 0
// writes them.
std::optional<ChunkOrigin> origin_of(const Leaf& leaf, const Box& box, size_t item,
                                     std::optional<uint32_t> process_index) {
  static const LeafInput kNoInput;
  const LeafInput& in = leaf.input ? *leaf.input : kNoInput;
  if (!in.shards && process_index.value_or(0) != 0) return std::nullopt;
  ChunkOrigin o;
  if (leaf.kind != LeafKind::kArray) {  // text/bytes payload: contiguous, from inline_data
    o.base = reinterpret_cast<const std::byte*>(leaf.inline_data.data());
    o.begin = Shape(leaf.shape.size(), 0);
    o.extent = leaf.shape;
    o.strides = c_strides(o.extent, item);
    return o;
  }
  if (!in.shards) {
    if (in.fill) {
      o.fill = &in.fill;
      return o;
    }
    o.base = in.source.data;
    o.begin = Shape(leaf.shape.size(), 0);
    o.extent = leaf.shape;
    o.strides = in.source.strides.empty() ? c_strides(o.extent, item) : in.source.strides;
    o.byteswap = in.source.byteswap;
    return o;
  }
  for (const Shard& sh : *in.shards) {
    bool inside = true;
    for (size_t d = 0; d < box.begin.size() && inside; ++d) {
      inside = sh.box.begin[d] <= box.begin[d] && box.end[d] <= sh.box.end[d];
    }
    if (!inside) continue;
    o.base = sh.view.data;
    o.begin = sh.box.begin;
    o.extent = sh.box.shape();
    o.strides = sh.view.strides.empty() ? c_strides(o.extent, item) : sh.view.strides;
    o.byteswap = sh.view.byteswap;
    return o;
  }
  return std::nullopt;
}

// The raw (stored-form) bytes of one chunk: a view into the caller's memory when the chunk is
// a contiguous run of it, else gathered into `b`.
// Bool elements other than 0 and 1 would make a file that readers refuse (FORMAT.md section
// 6.3): they are refused here, where the bytes of every chunk pass.
Result<std::span<const std::byte>> checked(const Leaf& leaf, std::span<const std::byte> raw) {
  if (leaf.dtype == DType::kBool && !format::bools_valid(raw)) {
    return Status::invalid_argument("a bool element holds a byte other than 0 or 1");
  }
  return raw;
}

Result<std::span<const std::byte>> chunk_bytes(const Leaf& leaf, const Box& box,
                                               const ChunkOrigin& o, Buffers& b) {
  const size_t item = dtype_info(leaf.dtype)->item_size;
  const uint64_t elements = box.num_elements();
  const bool four_bit = is_4bit(leaf.dtype);
  Box rel = box;
  if (!o.fill) {
    for (size_t d = 0; d < rel.begin.size(); ++d) {
      rel.begin[d] -= o.begin[d];
      rel.end[d] -= o.begin[d];
    }
  }
  if (!o.fill && !four_bit && !o.byteswap && o.strides == c_strides(o.extent, item)) {
    auto off = contiguous_offset(o.extent, rel.begin, rel.shape());
    if (off) return checked(leaf, std::span<const std::byte>(o.base + *off * item, elements * item));
  }
  grow(b.gathered, elements * item);
  std::span<std::byte> mem(b.gathered.data(), elements * item);
  if (o.fill) {
    Status st = (*o.fill)(box, mem);
    if (!st.ok()) return st;
  } else {
    gather_strided(o.base, o.strides, rel, item, o.byteswap ? swap_unit(leaf.dtype) : 0,
                   mem.data());
  }
  if (!four_bit) return checked(leaf, mem);
  const uint64_t packed = stored_bytes(leaf.dtype, elements);
  grow(b.packed, packed);
  codec::pack4(mem, {b.packed.data(), packed});
  return std::span<const std::byte>(b.packed.data(), packed);
}

// Whether this writer holds every chunk of `leaf` (always, outside a multi-process save; in
// one, when its blocks cover the leaf: one process holding all blocks, or a leaf only process
// 0 writes), so that it can write them as one raw run.
bool holds_every_chunk(const Leaf& leaf, const format::ChunkGrid& grid,
                       std::optional<uint32_t> process_index) {
  if (!process_index) return true;
  const size_t item = dtype_info(leaf.dtype)->item_size;
  for (uint64_t k = 0; k < grid.count(); ++k) {
    if (!origin_of(leaf, grid.box(k), item, process_index)) return false;
  }
  return true;
}

// Every chunk of a leaf saved without compression, as one raw run in grid order.
Status write_raw_run(const Tree& tree, uint32_t l, const format::ChunkGrid& grid,
                     ChunkStream& stream, std::vector<format::ChunkRecord>& records,
                     Buffers& b, int threads, std::optional<uint32_t> process_index) {
  const Leaf& leaf = tree.leaves[l];
  const size_t item = dtype_info(leaf.dtype)->item_size;
  auto chunk = [&](uint64_t k) -> Result<ChunkStream::RunChunk> {
    const Box box = grid.box(k);
    const auto origin = origin_of(leaf, box, item, process_index);
    auto where = [&] { return "leaf " + tree.leaf_path(l) + ": chunk " + std::to_string(k); };
    if (!origin) {
      return Status::invalid_argument(where() + ": no data (the shards given do not cover it)");
    }
    auto raw = chunk_bytes(leaf, box, *origin, b);
    if (!raw.ok()) return raw.status().with_prefix(where());
    // A view of the caller's array stays valid; gathered or packed bytes do not.
    const bool stable = raw->data() != b.gathered.data() && raw->data() != b.packed.data();
    return ChunkStream::RunChunk{*raw, stable};
  };
  return stream.put_raw_run(grid.count(), chunk, &records[leaf.first_chunk], threads);
}

}  // namespace

Status write_chunks(const Tree& tree, ChunkStream& stream,
                    std::vector<format::ChunkRecord>& records, const WriteOptions& options,
                    WriteStats* stats, std::optional<uint32_t> process_index) {
  std::vector<Task> tasks;
  std::vector<format::ChunkGrid> grids;  // one per leaf (empty grid for others)
  grids.reserve(tree.leaves.size());
  uint64_t total_raw = 0, max_chunk = 1;
  for (uint32_t l = 0; l < tree.leaves.size(); ++l) {
    const Leaf& leaf = tree.leaves[l];
    const bool write = leaf.storage == Storage::kChunked && !leaf.reuse();
    grids.emplace_back(write ? format::ChunkGrid::of(leaf) : format::ChunkGrid({}, Shape{}));
    if (!write) continue;
    const uint64_t count = grids.back().count();
    // Leaves saved without compression are written as one run, so that they lie in the file
    // as their array (mappable). In a segment only when this process holds every chunk.
    if (leaf.codec == Codec::kRaw && count > 1 &&
        holds_every_chunk(leaf, grids.back(), process_index)) {
      tasks.push_back({l, 0, count});
    } else {
      for (uint64_t k = 0; k < count; ++k) tasks.push_back({l, k});
    }
    total_raw += stored_bytes(leaf.dtype, leaf.num_elements());
    uint64_t chunk_elems = 1;
    for (uint64_t c : grids.back().max_chunk()) chunk_elems *= c;
    max_chunk = std::max(max_chunk, memory_bytes(leaf.dtype, chunk_elems));
  }
  if (tasks.empty()) return Status::success();

  // Plane choices shared by the chunks of a leaf and by the leaves of a dtype and filter, so
  // that small planes are tried both ways once, not once per chunk (codec::PlaneChoices).
  std::unique_ptr<codec::PlaneChoices[]> choices(new codec::PlaneChoices[tree.leaves.size()]);
  std::map<std::pair<DType, Filter>, std::array<std::atomic<uint8_t>, 16>> kinds;
  for (uint32_t l = 0; l < tree.leaves.size(); ++l) {
    const Leaf& leaf = tree.leaves[l];
    if (leaf.storage == Storage::kChunked && leaf.codec != Codec::kRaw) {
      choices[l].kind = &kinds[{leaf.dtype, leaf.filter}];
    }
  }

  // Each worker holds at most one chunk's gathered and encoded bytes: bound the workers so
  // that workers x 2 x chunk stays within the budget.
  int workers = resolve_threads(options.threads);
  workers = static_cast<int>(std::clamp<uint64_t>(
      options.max_bytes_in_flight / (2 * max_chunk), 1, static_cast<uint64_t>(workers)));

  std::mutex progress_mu;
  uint64_t done = 0;
  auto count_chunk = [&](uint64_t raw, uint64_t stored) {
    stats->chunks++;
    stats->raw_bytes += raw;
    stats->stored_bytes += stored;
    done += raw;
  };
  WriteScratchCache::Use use(WriteScratchCache::shared());  // (sets kept while the tasks run)
  Status st = parallel_for(ThreadPool::shared(), tasks.size(), workers, [&](size_t i) -> Status {
    const Task& task = tasks[i];
    const Leaf& leaf = tree.leaves[task.leaf];
    WriteScratchCache::Lease lease(WriteScratchCache::shared());
    Buffers& b = *lease;
    auto where = [&] {
      return "leaf " + tree.leaf_path(task.leaf) + ": chunk " + std::to_string(task.local);
    };
    if (task.count > 1) {
      JTREE_RETURN_IF_ERROR(
          write_raw_run(tree, task.leaf, grids[task.leaf], stream, records, b, workers,
                        process_index));
      std::lock_guard<std::mutex> lock(progress_mu);
      for (uint64_t k = 0; k < task.count; ++k) {
        const uint64_t n = records[leaf.first_chunk + k].stored_size;
        count_chunk(n, n);
      }
      if (options.progress && !options.progress(done, total_raw)) {
        return Status::aborted("save cancelled");
      }
      return Status::success();
    }
    const Box box = grids[task.leaf].box(task.local);
    const auto origin = origin_of(leaf, box, dtype_info(leaf.dtype)->item_size, process_index);
    format::ChunkRecord& record = records[leaf.first_chunk + task.local];
    if (!origin) {
      if (!process_index) {
        return Status::invalid_argument(where() + ": no data (the shards given do not cover it)");
      }
      record = format::ChunkRecord{};
      record.flags = format::kChunkAbsent;
      return Status::success();
    }
    auto raw = chunk_bytes(leaf, box, *origin, b);
    if (!raw.ok()) return raw.status().with_prefix(where());
    codec::ChunkFormat fmt{leaf.dtype, leaf.filter, leaf.codec, leaf.level, options.min_gain,
                           &choices[task.leaf]};
    b.encoded.clear();
    auto enc = codec::encode_chunk(*raw, fmt, b.encoded, b.scratch);
    if (!enc.ok()) return enc.status().with_prefix(where());
    std::span<const std::byte> stored = *enc == ChunkEncoding::kRaw
                                            ? *raw
                                            : std::span<const std::byte>(b.encoded);
    JTREE_RETURN_IF_ERROR(stream.put(stored, *enc, &record));
    std::lock_guard<std::mutex> lock(progress_mu);
    count_chunk(raw->size(), stored.size());
    if (options.progress && !options.progress(done, total_raw)) {
      return Status::aborted("save cancelled");
    }
    return Status::success();
  });
  return st;
}

}  // namespace jtree
