// Reader::read_many, in its steps: every request checked and its box resolved, inline leaves
// copied from the header (resolve_requests); the chunked ones planned into fetch units
// (plan_reads, read_plan.cc); the units read in parallel (UnitReader), each by the first of
// four strategies that applies: straight into place (read_in_place), streamed in
// cache-sized pieces (stream_raw, local files), as the byte runs wanted (fetch_runs, remote
// objects read without verification), or fetched into a buffer and decoded
// (fetch_and_deliver). A cold local load (read/cold_reads.h) reads every unit by a fifth one,
// with O_DIRECT (fetch_direct), more of them at once. From a remote object, the chunks that go
// whole into one place are read as one stream cut into fetch-size requests instead
// (read_stream), each verified once all its pieces landed.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>

#include "codec/checksum.h"
#include "codec/pack4.h"
#include "read/check_request.h"
#include "read/cold_reads.h"
#include "read/read_plan.h"
#include "read/read_scratch.h"
#include "read/reader_impl.h"
#include "read/region_runs.h"
#include "util/box_copy.h"
#include "util/huge_pages.h"
#include "util/scratch_cache.h"
#include "util/thread_pool.h"

namespace jtree {
namespace {

// Pieces in which raw chunks are read and hashed: small enough to stay in the cache between
// the read, the hash and the copy out.
constexpr size_t kPiece = 1 << 20;

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

// Step 1: checks every request and resolves its box (check_request), in order, stopping at the
// first bad one; inline leaves are copied from the header right away (they need no fetch).
Result<std::vector<Box>> resolve_requests(const Reader& reader, const ReadTree& t,
                                          std::span<const ReadRequest> requests) {
  std::vector<Box> boxes;
  boxes.reserve(requests.size());
  for (const ReadRequest& req : requests) {
    JTREE_ASSIGN_OR_RETURN(Box b,
                           check_request(reader, req.leaf, req.box, req.dst.size(), "destination"));
    if (t.leaf(req.leaf).storage == Storage::kInline) read_inline(t.leaf(req.leaf), b, req.dst);
    boxes.push_back(std::move(b));
  }
  return boxes;
}

// Step 3: the fetch units of one planned read_many call, each read into its destinations. run()
// is called from the pool's threads, one unit each (units share no destination bytes).
class UnitReader {
 public:
  // `direct`: the file's O_DIRECT alignment for a cold load read with O_DIRECT, else null.
  UnitReader(const Reader::Impl& impl, std::span<const ReadRequest> requests,
             std::span<const Box> boxes, const ReadPlan& plan, const ReadOptions& options,
             const io::DirectReadSupport* direct)
      : impl_(impl),
        t_(impl.file.tree),
        requests_(requests),
        boxes_(boxes),
        plan_(plan),
        options_(options),
        local_(impl.source->preferred_fetch_bytes() == 0),
        direct_(direct),
        total_bytes_(plan.fetch_bytes) {
    regular_.resize(plan.units.size());
    for (uint32_t u = 0; u < regular_.size(); ++u) regular_[u] = u;
  }

  // Remote objects: the units whose every chunk goes whole into one place (whole_chunk_dst)
  // are read as one stream cut into requests of the fetch size (`fetch`), chunk ends ignored
  // (cut_stream); the other units as planned. Local files keep their units. Called once,
  // before run().
  void stream_whole_chunks(const ReadOptions& fetch) {
    if (local_) return;
    whole_dst_.resize(plan_.jobs.size());
    std::vector<uint32_t> streamed;
    regular_.clear();
    for (uint32_t u = 0; u < plan_.units.size(); ++u) {
      const FetchUnit& unit = plan_.units[u];
      bool whole = true;
      for (uint32_t j : unit.jobs) {
        const auto dst = whole_chunk_dst(plan_.jobs[j]);
        whole = whole && dst.has_value();
        if (dst) whole_dst_[j] = *dst;
      }
      if (!whole) {
        regular_.push_back(u);
        continue;
      }
      streamed.insert(streamed.end(), unit.jobs.begin(), unit.jobs.end());
    }
    stream_ = cut_stream(plan_, streamed, fetch);
    left_ = std::make_unique<std::atomic<uint64_t>[]>(plan_.jobs.size());
    for (uint32_t j : streamed) left_[j].store(plan_.jobs[j].stored_size);
    total_bytes_ = 0;
    for (uint32_t u : regular_) total_bytes_ += plan_.units[u].size;
    for (const StreamUnit& u : stream_) total_bytes_ += u.size;
  }

  // The number of reads run() takes.
  size_t size() const { return regular_.size() + stream_.size(); }

  // Reads item `i` (a planned unit, then the stream's requests), then reports progress (a
  // progress callback that returns false cancels).
  Status run(size_t i) {
    uint64_t bytes = 0;
    if (i < regular_.size()) {
      const FetchUnit& unit = plan_.units[regular_[i]];
      ReadScratchCache::Lease scratch(ReadScratchCache::shared());
      JTREE_RETURN_IF_ERROR(read_unit(unit, *scratch));
      bytes = unit.size;
    } else {
      const StreamUnit& unit = stream_[i - regular_.size()];
      JTREE_RETURN_IF_ERROR(read_stream(unit));
      bytes = unit.size;
    }
    if (options_.progress) {
      std::lock_guard<std::mutex> lock(progress_mu_);
      done_bytes_ += bytes;
      if (!options_.progress(done_bytes_, total_bytes_)) {
        return Status::aborted(impl_.source->name() + ": read cancelled");
      }
    }
    return Status::success();
  }

 private:
  // Where a chunk goes whole as one run, read straight into place (read_in_place and
  // read_stream): a raw chunk (not 4-bit) with one target that takes all of it as one run of
  // its destination; nullopt otherwise.
  std::optional<std::span<std::byte>> whole_chunk_dst(const ChunkJob& job) const {
    const Leaf& leaf = t_.leaf(job.leaf);
    if (job.targets.size() != 1 || is_4bit(leaf.dtype) || job.stored_size == 0) {
      return std::nullopt;
    }
    const ChunkTarget& tg = job.targets[0];
    if (impl_.chunk(job.chunk).encoding != ChunkEncoding::kRaw || tg.region != job.box.shape()) {
      return std::nullopt;
    }
    auto off = contiguous_offset(boxes_[tg.request].shape(), tg.dst_start, tg.region);
    if (!off) return std::nullopt;
    const size_t item = dtype_info(leaf.dtype)->item_size;
    const std::span<std::byte> dst = requests_[tg.request].dst;
    if (job.stored_size != job.box.num_elements() * item ||
        dst.size() < *off * item + job.stored_size) {
      return std::nullopt;  // (a damaged raw size: the other strategies name it)
    }
    return dst.subspan(*off * item, job.stored_size);
  }

  // A request of the stream (stream_whole_chunks): its chunk pieces fetched straight into
  // place in one read (adjacent ranges: one request); each chunk whose last piece this was
  // is then verified where it landed.
  Status read_stream(const StreamUnit& unit) {
    std::vector<ReadRange> ranges;
    ranges.reserve(unit.pieces.size());
    for (const ChunkPiece& p : unit.pieces) {
      ranges.push_back({plan_.jobs[p.job].file_offset + p.begin,
                        whole_dst_[p.job].subspan(p.begin, p.size)});
    }
    JTREE_RETURN_IF_ERROR(impl_.source->read(ranges));
    for (const ChunkPiece& p : unit.pieces) {
      // (acq_rel: the thread that lands a chunk's last piece sees the others' bytes)
      if (left_[p.job].fetch_sub(p.size, std::memory_order_acq_rel) != p.size) continue;
      if (!options_.verify_checksums) continue;
      const ChunkJob& job = plan_.jobs[p.job];
      JTREE_RETURN_IF_ERROR(
          impl_.verify_chunk(impl_.chunk(job.chunk), whole_dst_[p.job], job.leaf, job.local));
    }
    return Status::success();
  }

  // The first strategy that applies to the unit.
  Status read_unit(const FetchUnit& unit, ReadScratch& s) {
    if (direct_ != nullptr) return fetch_direct(unit, s);
    if (std::optional<Status> st = read_in_place(unit)) return *st;
    if (std::optional<Status> st = stream_raw(unit, s)) return *st;
    if (std::optional<Status> st = fetch_runs(unit)) return *st;
    return fetch_and_deliver(unit, s);
  }

  // A raw chunk's stored size is its box's bytes: Corruption naming the chunk otherwise.
  Status check_raw_size(const ChunkJob& job, size_t item) const {
    if (job.stored_size == job.box.num_elements() * item) return Status::success();
    return Status::corruption(impl_.chunk_where(job.leaf, job.local) + ": raw chunk of " +
                              std::to_string(job.stored_size) + " bytes, expected " +
                              std::to_string(job.box.num_elements() * item));
  }

  // Appends the runs of chunk job `job` that its targets want.
  void runs_of(const ChunkJob& job, size_t item, std::vector<Run>& runs, size_t target) const {
    const ChunkTarget& tg = job.targets[target];
    region_runs(job.box.shape(), tg.chunk_start, boxes_[tg.request].shape(), tg.dst_start,
                tg.region, item, runs);
  }

  // Strategy 1, zero copy: a lone raw chunk whose one destination is a single run is read by
  // the backend straight into place and verified there. nullopt when it does not apply.
  std::optional<Status> read_in_place(const FetchUnit& unit) {
    if (unit.jobs.size() != 1) return std::nullopt;
    const ChunkJob& job = plan_.jobs[unit.jobs[0]];
    const std::optional<std::span<std::byte>> whole = whole_chunk_dst(job);
    if (!whole) return std::nullopt;
    const std::span<std::byte> dst = *whole;
    const ChunkInfo info = impl_.chunk(job.chunk);
    if (!options_.verify_checksums) {
      ReadRange range{job.file_offset, dst};
      return impl_.source->read(std::span(&range, 1));
    }
    // Local files: read in pieces and hash each right after it lands, while it is in the
    // cache (hashing the whole chunk afterwards would read it from memory a second time).
    // Remote ones: the whole chunk in one request (a piece each would be a round trip each:
    // four ranged GETs in sequence per 4 MiB chunk), hashed once it is here.
    const size_t piece_bytes = local_ ? kPiece : std::max<size_t>(dst.size(), 1);
    Xxh3Stream hash(info.seed);
    for (size_t done = 0; done < dst.size(); done += piece_bytes) {
      auto piece = dst.subspan(done, std::min(piece_bytes, dst.size() - done));
      ReadRange range{job.file_offset + done, piece};
      Status st = impl_.source->read(std::span(&range, 1));
      if (!st.ok()) return st;
      hash.update(piece);
    }
    if (hash.digest() != info.checksum) return impl_.checksum_error(info, job.leaf, job.local);
    return Status::success();
  }

  // Strategy 2, local files: a lone raw chunk of which only parts are wanted (a slice), or
  // whose parts go to several places, is read in cache-sized pieces into one small buffer,
  // each piece hashed as it lands and its wanted bytes copied out, so that no buffer of the
  // chunk's size is filled (and faulted in) only to be copied from once. Without
  // verification, only the wanted bytes are read. nullopt when it does not apply.
  std::optional<Status> stream_raw(const FetchUnit& unit, ReadScratch& s) {
    if (!local_ || unit.jobs.size() != 1) return std::nullopt;
    const ChunkJob& job = plan_.jobs[unit.jobs[0]];
    const Leaf& leaf = t_.leaf(job.leaf);
    if (is_4bit(leaf.dtype)) return std::nullopt;
    const ChunkInfo info = impl_.chunk(job.chunk);
    if (info.encoding != ChunkEncoding::kRaw) return std::nullopt;
    const size_t item = dtype_info(leaf.dtype)->item_size;
    JTREE_RETURN_IF_ERROR(check_raw_size(job, item));
    struct Target {
      std::byte* dst;
      std::vector<Run> runs;
      size_t next = 0;
    };
    std::vector<Target> targets(job.targets.size());
    size_t num_runs = 0;
    for (size_t i = 0; i < job.targets.size(); ++i) {
      targets[i].dst = requests_[job.targets[i].request].dst.data();
      runs_of(job, item, targets[i].runs, i);
      num_runs += targets[i].runs.size();
    }
    if (!options_.verify_checksums && num_runs <= 64) {
      for (const Target& tg : targets) {
        for (const Run& r : tg.runs) {
          ReadRange range{job.file_offset + r.src, {tg.dst + r.dst, r.len}};
          Status st = impl_.source->read(std::span(&range, 1));
          if (!st.ok()) return st;
        }
      }
      return Status::success();
    }
    grow(s.fetch, std::min<uint64_t>(kPiece, job.stored_size));
    Xxh3Stream hash(info.seed);
    for (uint64_t done = 0; done < job.stored_size; done += kPiece) {
      const uint64_t n = std::min<uint64_t>(kPiece, job.stored_size - done);
      const uint64_t end = done + n;
      bool wanted = options_.verify_checksums;
      for (const Target& tg : targets) {
        wanted |= tg.next < tg.runs.size() && tg.runs[tg.next].src < end;
      }
      if (!wanted) continue;  // (only without verification: nothing of it is needed)
      ReadRange range{job.file_offset + done, {s.fetch.data(), n}};
      Status st = impl_.source->read(std::span(&range, 1));
      if (!st.ok()) return st;
      if (options_.verify_checksums) hash.update({s.fetch.data(), n});
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
    if (options_.verify_checksums && hash.digest() != info.checksum) {
      return impl_.checksum_error(info, job.leaf, job.local);
    }
    return Status::success();
  }

  // Strategy 3, remote objects read without verification: a unit of raw chunks is fetched as
  // the byte runs its destinations want, straight into them, in one read() (the backend
  // merges runs closer than its coalesce gap and fetches the rest in parallel), not as the
  // unit's whole span: a rank's rows of a chunk move only those rows. With verification the
  // whole chunk is fetched, since its checksum covers all of it (spec/FORMAT.md section 8).
  // nullopt when it does not apply (local files: stream_raw; a compressed or 4-bit chunk).
  std::optional<Status> fetch_runs(const FetchUnit& unit) {
    if (local_ || options_.verify_checksums) return std::nullopt;
    std::vector<ReadRange> ranges;
    std::vector<Run> runs;
    for (uint32_t j : unit.jobs) {
      const ChunkJob& job = plan_.jobs[j];
      const Leaf& leaf = t_.leaf(job.leaf);
      if (is_4bit(leaf.dtype) || impl_.chunk(job.chunk).encoding != ChunkEncoding::kRaw) {
        return std::nullopt;
      }
      const size_t item = dtype_info(leaf.dtype)->item_size;
      JTREE_RETURN_IF_ERROR(check_raw_size(job, item));
      for (size_t i = 0; i < job.targets.size(); ++i) {
        runs.clear();
        runs_of(job, item, runs, i);
        std::byte* dst = requests_[job.targets[i].request].dst.data();
        for (const Run& r : runs) {
          ranges.push_back({job.file_offset + r.src, {dst + r.dst, r.len}});
        }
      }
    }
    return impl_.source->read(ranges);
  }

  // Strategy 4, every other unit: its bytes fetched into a scratch buffer with one read,
  // then each chunk in it delivered.
  Status fetch_and_deliver(const FetchUnit& unit, ReadScratch& s) {
    grow(s.fetch, unit.size);
    ReadRange range{unit.offset, {s.fetch.data(), unit.size}};
    JTREE_RETURN_IF_ERROR(impl_.source->read(std::span(&range, 1)));
    for (uint32_t j : unit.jobs) {
      const ChunkJob& job = plan_.jobs[j];
      JTREE_RETURN_IF_ERROR(
          deliver(job, {s.fetch.data() + (job.file_offset - unit.offset), job.stored_size}, s));
    }
    return Status::success();
  }

  // Strategy 0, a cold local load (read/cold_reads.h): the unit's bytes, widened to the
  // O_DIRECT alignment, read with O_DIRECT into a scratch buffer backed by huge pages (large
  // device requests), then each chunk delivered from there (raw ones copied out).
  Status fetch_direct(const FetchUnit& unit, ReadScratch& s) {
    constexpr uint64_t kHugePage = uint64_t{2} << 20;
    const uint64_t align = cold::part_alignment(*direct_);
    const uint64_t begin = unit.offset / align * align;
    const uint64_t length = (unit.offset + unit.size + align - 1) / align * align - begin;
    grow(s.direct, length + kHugePage);
    const uintptr_t at = reinterpret_cast<uintptr_t>(s.direct.data());
    std::byte* buffer = s.direct.data() + ((kHugePage - at % kHugePage) % kHugePage);
    advise_huge_pages(buffer, length);  // (before the read first touches it)
    const cold::Part part{begin, length, unit.offset + unit.size - begin, buffer};
    JTREE_RETURN_IF_ERROR(cold::read_part(*impl_.source, part));
    for (uint32_t j : unit.jobs) {
      const ChunkJob& job = plan_.jobs[j];
      JTREE_RETURN_IF_ERROR(
          deliver(job, {buffer + (job.file_offset - begin), job.stored_size}, s));
    }
    return Status::success();
  }

  // Verifies one fetched chunk, then decodes it into every destination it serves: straight
  // into the one destination that takes the whole chunk, or the one part of it it wants
  // (rows of a slice), as one run; else into a scratch buffer copied out region by region.
  Status deliver(const ChunkJob& job, std::span<const std::byte> stored, ReadScratch& s) {
    const Leaf& leaf = t_.leaf(job.leaf);
    const ChunkInfo info = impl_.chunk(job.chunk);
    if (options_.verify_checksums) {
      JTREE_RETURN_IF_ERROR(impl_.verify_chunk(info, stored, job.leaf, job.local));
    }
    const codec::ChunkFormat fmt = Reader::Impl::format_of(leaf);
    const Shape chunk_shape = job.box.shape();
    const uint64_t elements = job.box.num_elements();
    const uint64_t raw_size = stored_bytes(leaf.dtype, elements);
    const size_t item = dtype_info(leaf.dtype)->item_size;
    const bool four_bit = is_4bit(leaf.dtype);
    // One destination that takes the whole chunk, or one run of it (rows of a slice), as one
    // run: decoded straight into place, only that part (no buffer of the decoded chunk).
    // 4-bit chunks: whole ones only, decoded then unpacked.
    if (job.targets.size() == 1) {
      const ChunkTarget& tg = job.targets[0];
      const auto from = contiguous_offset(chunk_shape, tg.chunk_start, tg.region);
      const auto to = contiguous_offset(boxes_[tg.request].shape(), tg.dst_start, tg.region);
      if (from && to && (!four_bit || tg.region == chunk_shape)) {
        uint64_t n = 1;  // (inside one chunk: cannot overflow)
        for (uint64_t d : tg.region) n *= d;
        const std::span<std::byte> dst = requests_[tg.request].dst.subspan(*to * item, n * item);
        Status st;
        if (!four_bit) {
          st = codec::decode_chunk_range(stored, info.encoding, fmt, raw_size, *from * item, dst,
                                         s.codec);
        } else {
          grow(s.raw, raw_size);
          st = codec::decode_chunk(stored, info.encoding, fmt, {s.raw.data(), raw_size}, s.codec);
          if (st.ok()) codec::unpack4({s.raw.data(), raw_size}, dst);
        }
        return st.ok() ? st : st.with_prefix(impl_.chunk_where(job.leaf, job.local));
      }
    }
    grow(s.raw, raw_size);
    Status st = codec::decode_chunk(stored, info.encoding, fmt, {s.raw.data(), raw_size}, s.codec);
    if (!st.ok()) return st.with_prefix(impl_.chunk_where(job.leaf, job.local));
    const std::byte* src = s.raw.data();
    if (four_bit) {
      grow(s.unpacked, elements);
      codec::unpack4({s.raw.data(), raw_size}, {s.unpacked.data(), elements});
      src = s.unpacked.data();
    }
    for (const ChunkTarget& tg : job.targets) {
      copy_region(src, chunk_shape, tg.chunk_start, requests_[tg.request].dst.data(),
                  boxes_[tg.request].shape(), tg.dst_start, tg.region, item);
    }
    return Status::success();
  }

  const Reader::Impl& impl_;
  const ReadTree& t_;
  const std::span<const ReadRequest> requests_;
  const std::span<const Box> boxes_;
  const ReadPlan& plan_;
  const ReadOptions& options_;
  // A local file (no preferred fetch size): stream_raw applies, and raw chunks are read in
  // cache-sized pieces.
  const bool local_;
  // Set for a cold load read with O_DIRECT (fetch_direct): the file's alignment.
  const io::DirectReadSupport* const direct_;
  // The reads: plan_.units by index (all of them unless stream_whole_chunks took some), then
  // the stream's requests; their bytes, for progress.
  std::vector<uint32_t> regular_;
  std::vector<StreamUnit> stream_;
  uint64_t total_bytes_ = 0;
  // Of each job read by the stream: where it lands, and its bytes not landed yet.
  std::vector<std::span<std::byte>> whole_dst_;
  std::unique_ptr<std::atomic<uint64_t>[]> left_;
  std::mutex progress_mu_;
  uint64_t done_bytes_ = 0;
};

// Whether a planned read of a local file reads with O_DIRECT (cold::use_direct, asked about
// the plan's fetch units only); `direct` is then the file's alignment.
bool is_cold(const Source& source, const ReadPlan& plan, io::DirectReadSupport& direct) {
  if (source.preferred_fetch_bytes() != 0) return false;  // (remote: no O_DIRECT)
  std::vector<io::FileExtent> extents;
  extents.reserve(plan.units.size());
  for (const FetchUnit& u : plan.units) extents.push_back({u.offset, u.size});
  return cold::use_direct(source, io::merge_extents(std::move(extents)), direct);
}

}  // namespace

Status Reader::read_many(std::span<const ReadRequest> requests,
                         const ReadOptions& options) const {
  const ReadTree& t = impl_->file.tree;
  JTREE_RETURN_IF_ERROR(check_read_options(*this, options));
  JTREE_ASSIGN_OR_RETURN(const std::vector<Box> boxes, resolve_requests(*this, t, requests));
  // Step 2: the plan, with fetches no larger than the backend wants (remote ones: a few MiB,
  // so that decoding overlaps the transfers).
  ReadOptions fetch = impl_->fetch_options(options);
  auto planned = plan_reads(t, impl_->file.index, requests, boxes, fetch);
  if (!planned.ok()) return planned.status().with_prefix(name());
  // A cold local load: planned again with fetches of O_DIRECT's part size, read with
  // O_DIRECT, more reads in flight than CPU threads (read/cold_reads.h).
  io::DirectReadSupport direct;
  const bool cold_load = is_cold(*impl_->source, *planned, direct);
  if (cold_load) {
    fetch.max_fetch_bytes =
        std::min({options.max_fetch_bytes, cold::kPartBytes, options.max_bytes_in_flight});
    planned = plan_reads(t, impl_->file.index, requests, boxes, fetch);
    if (!planned.ok()) return planned.status().with_prefix(name());
  }
  const ReadPlan& plan = *planned;
  if (plan.units.empty()) return Status::success();
  // Step 3: the units on the thread pool, their scratch sets kept while the call runs.
  ReadScratchCache::Use scratch(ReadScratchCache::shared());
  UnitReader units(*impl_, requests, boxes, plan, options, cold_load ? &direct : nullptr);
  units.stream_whole_chunks(fetch);
  const int parallelism =
      cold_load ? cold::queue_depth(options) : impl_->fetch_parallelism(fetch);
  return parallel_for(pool_for(parallelism), units.size(), parallelism,
                      [&units](size_t u) { return units.run(u); });
}

}  // namespace jtree
