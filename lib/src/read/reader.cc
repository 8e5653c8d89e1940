#include "jtree/reader.h"

#include <algorithm>
#include <cstring>
#include <mutex>

#include "codec/checksum.h"
#include "codec/pack4.h"
#include "format/chunk_grid.h"
#include "format/validate.h"
#include "read/check_request.h"
#include "read/read_plan.h"
#include "read/reader_impl.h"
#include "util/box_copy.h"
#include "util/thread_pool.h"

namespace jtree {

// ---- Impl helpers ----------------------------------------------------------------------------

ChunkInfo Reader::Impl::chunk(uint64_t i) const {
  const format::ChunkRecord& r = file.index.chunks[i];
  ChunkInfo c;
  c.absent = (r.flags & format::kChunkAbsent) != 0;
  if (!c.absent) {
    const SegmentSpan& seg = file.index.segments[r.segment];
    c.file_offset = seg.file_offset + r.offset;
    c.seed = chunk_seed(seg.salt, r.offset);
  }
  c.stored_size = r.stored_size;
  c.checksum = r.checksum;
  c.segment = r.segment;
  c.encoding = static_cast<ChunkEncoding>(r.encoding);
  return c;
}

int Reader::Impl::fetch_parallelism(const ReadOptions& ro) const {
  const int wanted = std::max(resolve_threads(ro.threads), source->preferred_concurrency());
  const uint64_t per_worker = std::max<uint64_t>(ro.max_fetch_bytes, 1);
  return static_cast<int>(std::clamp<uint64_t>(ro.max_bytes_in_flight / per_worker, 1,
                                               static_cast<uint64_t>(wanted)));
}

ReadOptions Reader::Impl::fetch_options(const ReadOptions& ro) const {
  // Local files: neighbouring chunks are fetched together only up to 1 MiB (a read there
  // costs a system call, not a round trip; larger fetches only need larger buffers).
  constexpr uint64_t kLocalFetchBytes = 1 << 20;
  ReadOptions fetch = ro;
  const uint64_t pref = source->preferred_fetch_bytes();
  fetch.max_fetch_bytes = std::min(fetch.max_fetch_bytes, pref == 0 ? kLocalFetchBytes : pref);
  return fetch;
}

codec::ChunkFormat Reader::Impl::format_of(const Leaf& leaf) {
  codec::ChunkFormat f;
  f.dtype = leaf.dtype;
  f.filter = leaf.filter;
  f.codec = leaf.codec;
  f.level = leaf.level;
  return f;
}

std::string Reader::Impl::chunk_where(uint32_t leaf, uint64_t local) const {
  return source->name() + ": leaf " + file.tree.leaf_path(leaf) + ": chunk " +
         std::to_string(local);
}

Status Reader::Impl::checksum_error(const ChunkInfo& c, uint32_t leaf, uint64_t local) const {
  return Status::Corruption(chunk_where(leaf, local) + ": checksum mismatch (file offset " +
                            std::to_string(c.file_offset) + ", " + std::to_string(c.stored_size) +
                            " bytes)");
}

Status Reader::Impl::verify_chunk(const ChunkInfo& c, std::span<const std::byte> stored,
                                  uint32_t leaf, uint64_t local) const {
  return xxh3(stored, c.seed) == c.checksum ? Status::OK() : checksum_error(c, leaf, local);
}

// ---- Reader ----------------------------------------------------------------------------------

Reader::Reader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Reader::~Reader() = default;

Result<std::shared_ptr<Reader>> Reader::Open(std::string_view path_or_url,
                                             const OpenOptions& options) {
  JTREE_ASSIGN_OR_RETURN(std::shared_ptr<Source> source, open_source(path_or_url, options));
  return Open(std::move(source), options);
}

Result<std::shared_ptr<Reader>> Reader::Open(std::shared_ptr<Source> source,
                                             const OpenOptions& options) {
  auto impl = std::make_unique<Impl>();
  JTREE_ASSIGN_OR_RETURN(impl->file, open_file(*source, options));
  impl->source = std::move(source);
  impl->options = options;
  return std::shared_ptr<Reader>(new Reader(std::move(impl)));
}

const std::string& Reader::name() const { return impl_->source->name(); }
const Tree& Reader::tree() const { return impl_->file.tree.tree(); }
uint32_t Reader::num_nodes() const { return impl_->file.tree.num_nodes(); }
uint32_t Reader::num_leaves() const { return impl_->file.tree.num_leaves(); }
NodeView Reader::node(uint32_t i) const { return impl_->file.tree.node(i); }
const Leaf& Reader::leaf(uint32_t i) const { return impl_->file.tree.leaf(i); }
Leaf Reader::decode_leaf(uint32_t i) const {
  Leaf l;
  impl_->file.tree.decode_leaf(i, l);
  return l;
}
std::vector<uint32_t> Reader::children(uint32_t i) const { return impl_->file.tree.children(i); }
uint32_t Reader::subtree_end(uint32_t i) const {
  return impl_->file.tree.navigation().subtree_end[i];
}
uint32_t Reader::parent(uint32_t i) const { return impl_->file.tree.navigation().parent[i]; }
std::string Reader::path(uint32_t i) const { return impl_->file.tree.path(i); }
std::string Reader::leaf_path(uint32_t i) const { return impl_->file.tree.leaf_path(i); }
Result<uint32_t> Reader::find(std::string_view path) const {
  auto node = impl_->file.tree.find(path);
  if (!node.ok()) return node.status().WithPrefix(name());
  return node;
}
const std::vector<std::pair<std::string, std::string>>& Reader::metadata() const {
  return impl_->file.tree.metadata();
}
const FileInfo& Reader::info() const { return impl_->file.info; }
const OpenOptions& Reader::options() const { return impl_->options; }
ChunkInfo Reader::chunk(uint64_t i) const {
  ChunkInfo c = impl_->chunk(i);
  // Raw size from the owning leaf: the last chunked leaf whose first chunk is at or before i
  // (leaves are in chunk order).
  const ReadTree& t = impl_->file.tree;
  const auto chunked = t.chunked_leaves();
  auto it = std::upper_bound(chunked.begin(), chunked.end(), i, [&](uint64_t v, uint32_t l) {
    return v < t.first_chunk(l);
  });
  if (it != chunked.begin()) {
    const Leaf& leaf = t.leaf(*std::prev(it));
    c.raw_size = format::chunk_raw_size(leaf, i - leaf.first_chunk);
  }
  return c;
}
IoStats Reader::io_stats() const { return impl_->source->stats(); }
std::shared_ptr<Source> Reader::source() const { return impl_->source; }

Result<uint32_t> Reader::find_leaf(std::string_view path) const {
  auto node = find(path);
  if (!node.ok()) return node.status();
  const NodeView n = this->node(*node);
  if (n.kind != NodeKind::kLeaf) {
    return Status::InvalidArgument(name() + ": key path '" + std::string(path) + "' is a " +
                                   std::string(node_kind_name(n.kind)) + ", not a leaf");
  }
  return n.leaf;
}

Status Reader::read(uint32_t leaf, std::span<std::byte> dst, const ReadOptions& options) const {
  ReadRequest r{leaf, std::nullopt, dst};
  return read_many(std::span(&r, 1), options);
}

Status Reader::read_box(uint32_t leaf, const Box& box, std::span<std::byte> dst,
                        const ReadOptions& options) const {
  ReadRequest r{leaf, box, dst};
  return read_many(std::span(&r, 1), options);
}

namespace {

// Per-thread buffers reused across chunks: fetched bytes, decoded chunk, unpacked chunk, codec
// scratch.
struct Scratch {
  std::vector<std::byte> fetch, raw, unpacked, codec;
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

void grow(std::vector<std::byte>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

// Copies an inline leaf's box into the destination.
void read_inline(const Leaf& leaf, const Box& box, std::span<std::byte> dst) {
  const auto* src = reinterpret_cast<const std::byte*>(leaf.inline_data.data());
  std::vector<std::byte> unpacked;
  if (is_4bit(leaf.dtype)) {
    unpacked.resize(leaf.num_elements());
    codec::unpack4({src, leaf.inline_data.size()}, unpacked);
    src = unpacked.data();
  }
  const size_t item = dtype_info(leaf.dtype)->item_size;
  copy_region(src, leaf.shape, box.begin, dst.data(), box.shape(), Shape(box.begin.size(), 0),
              box.shape(), item);
}

// Pieces in which raw chunks are read and hashed: small enough to stay in the cache between
// the read, the hash and the copy out.
constexpr size_t kPiece = 1 << 20;

// One contiguous run of a chunk's region: bytes [src, src + len) of the chunk go to bytes
// [dst, dst + len) of the destination.
struct Run {
  uint64_t src, dst, len;
};

// The runs of `region` (at `chunk_start` of a C-order chunk of `chunk_shape`) placed at
// `dst_start` of a C-order destination of `dst_shape`, in increasing chunk order: trailing
// dimensions whole in both merge into one run.
void region_runs(const Shape& chunk_shape, const Shape& chunk_start, const Shape& dst_shape,
                 const Shape& dst_start, const Shape& region, size_t item,
                 std::vector<Run>& out) {
  const size_t rank = region.size();
  if (rank == 0) {
    out.push_back({0, 0, item});
    return;
  }
  for (uint64_t e : region) {
    if (e == 0) return;
  }
  size_t k = rank - 1;
  uint64_t len = region[k] * item;
  while (k > 0 && region[k] == chunk_shape[k] && region[k] == dst_shape[k]) {
    --k;
    len *= region[k];
  }
  std::vector<uint64_t> cs(rank), ds(rank);
  cs[rank - 1] = ds[rank - 1] = item;
  for (size_t d = rank - 1; d > 0; --d) {
    cs[d - 1] = cs[d] * chunk_shape[d];
    ds[d - 1] = ds[d] * dst_shape[d];
  }
  std::vector<uint64_t> idx(k, 0);  // over the dimensions before k
  for (;;) {
    uint64_t src = chunk_start[k] * cs[k], dst = dst_start[k] * ds[k];
    for (size_t d = 0; d < k; ++d) {
      src += (chunk_start[d] + idx[d]) * cs[d];
      dst += (dst_start[d] + idx[d]) * ds[d];
    }
    out.push_back({src, dst, len});
    size_t d = k;
    while (d-- > 0) {
      if (++idx[d] < region[d]) break;
      idx[d] = 0;
    }
    if (d == static_cast<size_t>(-1)) break;
  }
}

}  // namespace

Status Reader::read_many(std::span<const ReadRequest> requests,
                         const ReadOptions& options) const {
  const ReadTree& t = impl_->file.tree;
  std::vector<Box> boxes;
  boxes.reserve(requests.size());
  for (const ReadRequest& req : requests) {
    JTREE_ASSIGN_OR_RETURN(Box b,
                           check_request(*this, req.leaf, req.box, req.dst.size(), "destination"));
    if (t.leaf(req.leaf).storage == Storage::kInline) read_inline(t.leaf(req.leaf), b, req.dst);
    boxes.push_back(std::move(b));
  }
  // Fetches no larger than the backend wants (remote ones: a few MiB, so that decoding
  // overlaps the transfers).
  const ReadOptions fetch = impl_->fetch_options(options);
  const bool local = impl_->source->preferred_fetch_bytes() == 0;
  auto planned = plan_reads(t, impl_->file.index, requests, boxes, fetch);
  if (!planned.ok()) return planned.status().WithPrefix(name());
  const ReadPlan& plan = *planned;
  if (plan.units.empty()) return Status::OK();

  std::mutex progress_mu;
  uint64_t done_bytes = 0;
  const Impl& impl = *impl_;

  // Decodes one fetched chunk into every destination it serves.
  auto deliver = [&](const ChunkJob& job, std::span<const std::byte> stored) -> Status {
    const Leaf& leaf = t.leaf(job.leaf);
    const ChunkInfo info = impl.chunk(job.chunk);
    if (options.verify_checksums) {
      JTREE_RETURN_IF_ERROR(impl.verify_chunk(info, stored, job.leaf, job.local));
    }
    const codec::ChunkFormat fmt = Impl::format_of(leaf);
    const Shape chunk_shape = job.box.shape();
    const uint64_t elements = job.box.num_elements();
    const uint64_t raw_size = stored_bytes(leaf.dtype, elements);
    const size_t item = dtype_info(leaf.dtype)->item_size;
    const bool four_bit = is_4bit(leaf.dtype);
    Scratch& s = scratch();
    // Fast path: one destination that takes the whole chunk as one run.
    if (job.targets.size() == 1 && job.targets[0].region == chunk_shape) {
      const ChunkTarget& tg = job.targets[0];
      auto off = contiguous_offset(boxes[tg.request].shape(), tg.dst_start, tg.region);
      if (off) {
        std::span<std::byte> dst = requests[tg.request].dst.subspan(*off * item, elements * item);
        Status st;
        if (!four_bit) {
          st = codec::decode_chunk(stored, info.encoding, fmt, dst, s.codec);
        } else {
          grow(s.raw, raw_size);
          st = codec::decode_chunk(stored, info.encoding, fmt, {s.raw.data(), raw_size}, s.codec);
          if (st.ok()) codec::unpack4({s.raw.data(), raw_size}, dst);
        }
        return st.ok() ? st : st.WithPrefix(impl.chunk_where(job.leaf, job.local));
      }
    }
    grow(s.raw, raw_size);
    Status st = codec::decode_chunk(stored, info.encoding, fmt, {s.raw.data(), raw_size}, s.codec);
    if (!st.ok()) return st.WithPrefix(impl.chunk_where(job.leaf, job.local));
    const std::byte* src = s.raw.data();
    if (four_bit) {
      grow(s.unpacked, elements);
      codec::unpack4({s.raw.data(), raw_size}, {s.unpacked.data(), elements});
      src = s.unpacked.data();
    }
    for (const ChunkTarget& tg : job.targets) {
      copy_region(src, chunk_shape, tg.chunk_start, requests[tg.request].dst.data(),
                  boxes[tg.request].shape(), tg.dst_start, tg.region, item);
    }
    return Status::OK();
  };

  // Zero-copy path: a lone raw chunk whose one destination is a single run is read by the
  // backend straight into place and verified there. Returns false when it does not apply.
  auto read_in_place = [&](const FetchUnit& unit, Status* st) -> bool {
    const ChunkJob& job = plan.jobs[unit.jobs[0]];
    const Leaf& leaf = t.leaf(job.leaf);
    if (unit.jobs.size() != 1 || job.targets.size() != 1 || is_4bit(leaf.dtype)) return false;
    const ChunkInfo info = impl.chunk(job.chunk);
    const ChunkTarget& tg = job.targets[0];
    if (info.encoding != ChunkEncoding::kRaw || tg.region != job.box.shape()) return false;
    auto off = contiguous_offset(boxes[tg.request].shape(), tg.dst_start, tg.region);
    if (!off) return false;
    const size_t item = dtype_info(leaf.dtype)->item_size;
    std::span<std::byte> dst = requests[tg.request].dst.subspan(*off * item, job.stored_size);
    if (!options.verify_checksums) {
      ReadRange range{job.file_offset, dst};
      *st = impl.source->read(std::span(&range, 1));
      return true;
    }
    // Read in pieces and hash each right after it lands, while it is in the cache: hashing
    // the whole chunk afterwards would read it from memory a second time.
    Xxh3Stream hash(info.seed);
    for (size_t done = 0; done < dst.size(); done += kPiece) {
      auto piece = dst.subspan(done, std::min(kPiece, dst.size() - done));
      ReadRange range{job.file_offset + done, piece};
      *st = impl.source->read(std::span(&range, 1));
      if (!st->ok()) return true;
      hash.update(piece);
    }
    if (hash.digest() != info.checksum) *st = impl.checksum_error(info, job.leaf, job.local);
    return true;
  };

  // Local files, a lone raw chunk of which only parts are wanted (a slice), or whose parts go
  // to several places: the chunk is read in cache-sized pieces into one small buffer, each
  // piece hashed as it lands and its wanted bytes copied out, so that no buffer of the
  // chunk's size is filled (and faulted in) only to be copied from once. Without
  // verification, only the wanted bytes are read. Returns false when it does not apply.
  auto stream_raw = [&](const FetchUnit& unit, Status* st) -> bool {
    if (!local || unit.jobs.size() != 1) return false;
    const ChunkJob& job = plan.jobs[unit.jobs[0]];
    const Leaf& leaf = t.leaf(job.leaf);
    if (is_4bit(leaf.dtype)) return false;
    const ChunkInfo info = impl.chunk(job.chunk);
    if (info.encoding != ChunkEncoding::kRaw) return false;
    const size_t item = dtype_info(leaf.dtype)->item_size;
    if (job.stored_size != job.box.num_elements() * item) {
      *st = Status::Corruption(impl.chunk_where(job.leaf, job.local) + ": raw chunk of " +
                               std::to_string(job.stored_size) + " bytes, expected " +
                               std::to_string(job.box.num_elements() * item));
      return true;
    }
    const Shape chunk_shape = job.box.shape();
    struct Target {
      std::byte* dst;
      std::vector<Run> runs;
      size_t next = 0;
    };
    std::vector<Target> targets(job.targets.size());
    size_t num_runs = 0;
    for (size_t i = 0; i < job.targets.size(); ++i) {
      const ChunkTarget& tg = job.targets[i];
      targets[i].dst = requests[tg.request].dst.data();
      region_runs(chunk_shape, tg.chunk_start, boxes[tg.request].shape(), tg.dst_start,
                  tg.region, item, targets[i].runs);
      num_runs += targets[i].runs.size();
    }
    if (!options.verify_checksums && num_runs <= 64) {
      for (const Target& tg : targets) {
        for (const Run& r : tg.runs) {
          ReadRange range{job.file_offset + r.src, {tg.dst + r.dst, r.len}};
          *st = impl.source->read(std::span(&range, 1));
          if (!st->ok()) return true;
        }
      }
      return true;
    }
    Scratch& s = scratch();
    grow(s.fetch, std::min<uint64_t>(kPiece, job.stored_size));
    Xxh3Stream hash(info.seed);
    for (uint64_t done = 0; done < job.stored_size; done += kPiece) {
      const uint64_t n = std::min<uint64_t>(kPiece, job.stored_size - done);
      const uint64_t end = done + n;
      bool wanted = options.verify_checksums;
      for (const Target& tg : targets) {
        wanted |= tg.next < tg.runs.size() && tg.runs[tg.next].src < end;
      }
      if (!wanted) continue;  // (only without verification: nothing of it is needed)
      ReadRange range{job.file_offset + done, {s.fetch.data(), n}};
      *st = impl.source->read(std::span(&range, 1));
      if (!st->ok()) return true;
      if (options.verify_checksums) hash.update({s.fetch.data(), n});
      for (Target& tg : targets) {
        while (tg.next < tg.runs.size()) {
          const Run& r = tg.runs[tg.next];
          if (r.src >= end) break;
          const uint64_t a = std::max(r.src, done), b = std::min(r.src + r.len, end);
          if (a < b) std::memcpy(tg.dst + r.dst + (a - r.src), s.fetch.data() + (a - done), b - a);
          if (r.src + r.len > end) break;
          ++tg.next;
        }
      }
    }
    if (options.verify_checksums && hash.digest() != info.checksum) {
      *st = impl.checksum_error(info, job.leaf, job.local);
    }
    return true;
  };

  auto fetch_and_deliver = [&](const FetchUnit& unit) -> Status {
    Status st;
    if (read_in_place(unit, &st)) return st;
    if (stream_raw(unit, &st)) return st;
    Scratch& s = scratch();
    grow(s.fetch, unit.size);
    ReadRange range{unit.offset, {s.fetch.data(), unit.size}};
    JTREE_RETURN_IF_ERROR(impl.source->read(std::span(&range, 1)));
    for (uint32_t j : unit.jobs) {
      const ChunkJob& job = plan.jobs[j];
      JTREE_RETURN_IF_ERROR(
          deliver(job, {s.fetch.data() + (job.file_offset - unit.offset), job.stored_size}));
    }
    return Status::OK();
  };

  auto run_unit = [&](size_t u) -> Status {
    const FetchUnit& unit = plan.units[u];
    JTREE_RETURN_IF_ERROR(fetch_and_deliver(unit));
    if (options.progress) {
      std::lock_guard<std::mutex> lock(progress_mu);
      done_bytes += unit.size;
      if (!options.progress(done_bytes, plan.fetch_bytes)) {
        return Status::Aborted(name() + ": read cancelled");
      }
    }
    return Status::OK();
  };

  const int parallelism = impl.fetch_parallelism(fetch);
  return parallel_for(pool_for(parallelism), plan.units.size(), parallelism, run_unit);
}

Result<std::string> Reader::read_bytes(uint32_t leaf, const ReadOptions& options) const {
  const ReadTree& t = impl_->file.tree;
  if (leaf >= t.num_leaves()) {
    return Status::InvalidArgument(name() + ": leaf number out of range");
  }
  const Leaf& l = t.leaf(leaf);
  if (!l.is_payload() || dtype_info(l.dtype)->item_size != 1 || is_4bit(l.dtype)) {
    return Status::InvalidArgument(name() + ": leaf " + t.leaf_path(leaf) +
                                   " is not a byte payload");
  }
  if (l.storage == Storage::kInline) return l.inline_data;
  const uint64_t n = l.memory_bytes();
  JTREE_RETURN_IF_ERROR(reserve_memory(n, "leaf " + t.leaf_path(leaf)));
  std::string out(n, '\0');
  JTREE_RETURN_IF_ERROR(
      read(leaf, {reinterpret_cast<std::byte*>(out.data()), out.size()}, options));
  return out;
}

Status Reader::reserve_memory(uint64_t bytes, std::string_view what) const {
  const Limits& limits = impl_->options.limits;
  if (bytes > limits.max_leaf_bytes) {
    return Status::ResourceExhausted(name() + ": " + std::string(what) + " needs " +
                                     std::to_string(bytes) + " bytes, over the limit of " +
                                     std::to_string(limits.max_leaf_bytes) + " per leaf");
  }
  // Compare-and-add: concurrent reservations never overshoot the total together.
  uint64_t before = impl_->reserved_bytes.load(std::memory_order_relaxed);
  do {
    if (bytes > limits.max_total_bytes - std::min(before, limits.max_total_bytes)) {
      return Status::ResourceExhausted(
          name() + ": " + std::string(what) + " needs " + std::to_string(bytes) +
          " bytes; with the " + std::to_string(before) +
          " already allocated for this file that is over the limit of " +
          std::to_string(limits.max_total_bytes) + " in total");
    }
  } while (!impl_->reserved_bytes.compare_exchange_weak(before, before + bytes,
                                                        std::memory_order_relaxed));
  return Status::OK();
}

}  // namespace jtree
