// The execution of a load to a device (staged_load.h). Pieces that are runs of whole raw
// chunks are read with O_DIRECT straight into the pinned buffers (io/direct_read.h: a cold
// file is then read once, disk to pinned memory, without a page-cache copy and without
// evicting the page cache), or, with zero copy, copied to the device straight from the file's
// registered page-cache pages (no buffer, no copy into pinned memory); the rest through
// Reader::read_many.
#include "cuda/staged_load.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "codec/checksum.h"
#include "cuda/staging_ring.h"
#include "io/direct_read.h"
#include "util/guarded.h"
#include "util/thread_pool.h"

namespace jtree::staging {
namespace {

// O_DIRECT reads are issued in parts of at most this size, on the read's worker threads, so
// that one large piece keeps several requests in flight at the device.
constexpr uint64_t kDirectPartBytes = 8 << 20;

// Buffer loads filled at once when reading through the page cache: enough to keep the read's
// workers busy. O_DIRECT and zero copy fill every slot at once instead (docs/gpu.md).
constexpr size_t kBufferedFillers = 4;

// One load in progress: the plan, the ring and the turn-taking of the fillers (the caller's
// thread and helpers), which claim batches in order. Batch b uses slot b % num_slots and waits
// for its turn there (the slot's previous batch has queued its copies); before refilling the
// buffer, the filler waits for those copies (the slot is settled), so no buffer is overwritten
// under a running copy. Several buffers are read at once because each read_many ends with its
// slowest chunk: the other fillers keep the read's workers busy meanwhile.
class StagedLoad {
 public:
  StagedLoad(const Reader& reader, std::span<const DeviceRequest> requests,
             const StagedLoadPlan& plan, CopyEngine& engine, const DeviceOptions& options,
             StagingReport& report)
      : reader_(reader),
        requests_(requests),
        plan_(plan),
        engine_(engine),
        options_(options),
        report_(report),
        read_options_(without_progress(options.read)),
        direct_threads_(resolve_threads(options.read.threads)),
        source_(reader.source()),
        ring_(engine, plan.num_slots),
        turn_(plan.num_slots) {
    for (size_t i = 0; i < turn_.size(); ++i) turn_[i] = i;
  }

  // Fills every batch on filler_count() threads, then waits for the last copies.
  Status run() {
    std::vector<std::thread> helpers;
    try {
      for (size_t i = 1; i < filler_count(); ++i) helpers.emplace_back([this] { filler(); });
    } catch (const std::system_error&) {
      // (No thread to be had: the caller fills every buffer alone.)
    }
    filler();
    for (std::thread& t : helpers) t.join();
    if (failed_) return failure_;  // (the ring's destructor waits for the queued copies)
    for (size_t i = 0; i < ring_.size(); ++i) {
      const size_t batch = ring_.slot(i).batch;
      if (Status st = ring_.settle(i); !st.ok()) return st.with_prefix(where(batch));
    }
    return Status::success();
  }

 private:
  // Progress is reported per buffer load (in filler), not by each read_many.
  static ReadOptions without_progress(ReadOptions o) {
    o.progress = nullptr;
    return o;
  }

  // O_DIRECT reads wait on the disk, which wants many requests in flight, and registering
  // pages (zero copy) is the kernel's work per page, which threads share: both fill every slot
  // at once. Reads from the page cache keep the workers busy with kBufferedFillers.
  size_t filler_count() const {
    if (plan_.direct.on || plan_.zero_copy.on) return plan_.num_slots;
    return std::min(kBufferedFillers, plan_.num_slots);
  }

  // Another filler failed: the rest of a buffer load is skipped (the load returns its error).
  bool stopped() const { return stop_.load(std::memory_order_relaxed); }

  // "<file>: leaf <path> (and N more pieces)": the file and the first leaf of batch b, for
  // its errors.
  std::string leaves_of(size_t b) const {
    const Batch& batch = plan_.batches[b];
    const size_t first = batch.mapped ? batch.parts[0].piece : batch.first;
    std::string s = reader_.name() + ": leaf " +
                    reader_.leaf_path(requests_[plan_.pieces[first].request].leaf);
    const size_t more = (batch.mapped ? batch.parts.size() : batch.last - batch.first) - 1;
    if (more > 0) s += " (and " + std::to_string(more) + " more pieces)";
    return s;
  }
  // leaves_of(b) and the engine: the prefix of a copy's error.
  std::string where(size_t b) const { return leaves_of(b) + ": copy to " + engine_.name(); }

  // Piece p's destination.
  std::byte* destination(size_t p) const {
    const Piece& piece = plan_.pieces[p];
    return static_cast<std::byte*>(requests_[piece.request].dst) + piece.dst_offset;
  }

  // Claims batches in order until none is left or the load failed; records the first error
  // (and stops the other fillers with it) and reports progress after each buffer load.
  void filler() {
    std::vector<ReadRequest> reads;  // (reused from one buffer load to the next)
    std::unique_lock<std::mutex> lock(mu_);
    while (!failed_ && next_batch_ < plan_.batches.size()) {
      const size_t b = next_batch_++;
      const size_t slot = b % plan_.num_slots;
      turn_cv_.wait(lock, [&] { return failed_ || turn_[slot] == b; });
      if (failed_) break;
      lock.unlock();
      // (An exception, std::bad_alloc say, fails the load: on a helper it would end the process.)
      Status st = guarded([&] { return fill(b, reads); }, [&] { return leaves_of(b); });
      lock.lock();
      turn_[slot] = b + plan_.num_slots;
      if (st.ok() && !failed_) st = report_progress(b);
      if (!st.ok() && !failed_) {
        failed_ = true;
        stop_.store(true, std::memory_order_relaxed);
        failure_ = std::move(st);
      }
      turn_cv_.notify_all();
    }
  }

  // Counts batch b as done and calls the caller's progress (under mu_: never concurrently with
  // itself). Aborted when it cancels the load.
  Status report_progress(size_t b) {
    done_ += plan_.batches[b].bytes;
    if (options_.read.progress && !options_.read.progress(done_, plan_.total)) {
      return Status::aborted(reader_.name() + ": load to " + engine_.name() + " cancelled");
    }
    return Status::success();
  }

  // Fills one buffer load and queues its copies; the slot is this thread's alone meanwhile.
  Status fill(size_t b, std::vector<ReadRequest>& reads) {
    if (plan_.batches[b].mapped) return fill_mapped(b);
    return fill_staged(b, reads);
  }

  // A batch read into its slot's buffer: its pieces read through Reader::read_many, those it
  // reads with O_DIRECT straight into the buffer, then the copies queued.
  Status fill_staged(size_t b, std::vector<ReadRequest>& reads) {
    const Batch& batch = plan_.batches[b];
    const size_t si = b % plan_.num_slots;
    if (Status st = ring_.ensure(si, plan_.buffer_bytes); !st.ok()) {
      return st.with_prefix(leaves_of(b));
    }
    StagingRing::Slot& slot = ring_.slot(si);
    // Backpressure: the buffer is refilled only once its previous copies have completed.
    if (Status st = ring_.settle(si); !st.ok()) return st.with_prefix(where(slot.batch));
    std::byte* const base = slot.buffer.data();
    const bool aligned = buffer_aligned_for_direct(base);
    const bool use_direct = !batch.direct.empty() && aligned && !direct_refused_.load();
    JTREE_RETURN_IF_ERROR(read_buffered(batch, base, use_direct, false, reads));
    if (use_direct) JTREE_RETURN_IF_ERROR(read_direct_or_fall_back(batch, base, reads));
    return queue_copies(b, slot, [&](size_t p) { return base + batch.offsets[p - batch.first]; });
  }

  // Whether O_DIRECT may read into the buffer at `base`. (CUDA's pinned buffers are
  // page-aligned; an engine whose buffers are not aligned for O_DIRECT gets buffered reads,
  // and a note says why.)
  bool buffer_aligned_for_direct(const std::byte* base) {
    if (!plan_.direct.on) return false;
    const uint64_t align = plan_.direct.support.memory_align;
    if (reinterpret_cast<uintptr_t>(base) % align == 0) return true;
    report_.set_note(report_.direct_io_note, "pinned buffers from " + engine_.name() +
                                                 " are not aligned to " + std::to_string(align) +
                                                 " bytes for O_DIRECT");
    return false;
  }

  // Reads through Reader::read_many the pieces of a staged batch that are (`direct_ones`) or
  // are not read with O_DIRECT in it (`use_direct`: whether it uses O_DIRECT at all), each
  // into its place in the buffer at `base`.
  Status read_buffered(const Batch& batch, std::byte* base, bool use_direct, bool direct_ones,
                       std::vector<ReadRequest>& reads) {
    reads.clear();
    uint64_t bytes = 0;
    for (size_t p = batch.first; p < batch.last; ++p) {
      if ((plan_.is_direct[p] && use_direct) != direct_ones) continue;
      const Piece& piece = plan_.pieces[p];
      reads.push_back({requests_[piece.request].leaf, piece.box,
                       {base + batch.offsets[p - batch.first], piece.bytes}});
      bytes += piece.bytes;
    }
    if (reads.empty()) return Status::success();
    JTREE_RETURN_IF_ERROR(reader_.read_many(reads, read_options_));
    report_.buffered_bytes.fetch_add(bytes);
    return Status::success();
  }

  // Reads a batch's O_DIRECT pieces into the buffer at `base`. Where the kernel refuses after
  // all (NotSupported) under DirectIo::kAuto, this batch's direct pieces and the rest of the
  // load are read buffered, and a note says why.
  Status read_direct_or_fall_back(const Batch& batch, std::byte* base,
                                  std::vector<ReadRequest>& reads) {
    Status st = read_direct_pieces(batch, base);
    if (st.is_not_supported() && options_.direct_io == DirectIo::kAuto) {
      direct_refused_.store(true);
      report_.set_note(report_.direct_io_note, "O_DIRECT stopped mid-load: " + st.message());
      return read_buffered(batch, base, true, true, reads);
    }
    JTREE_RETURN_IF_ERROR(st);
    uint64_t bytes = 0;
    for (const DirectRead& d : batch.direct) bytes += plan_.pieces[d.piece].bytes;
    report_.direct_bytes.fetch_add(bytes);
    return Status::success();
  }

  // One O_DIRECT read: `length` bytes from `file_offset` into the buffer at `buffer_offset`,
  // of which the first `needed` must be there (the rest is alignment slack, possibly past EOF).
  struct DirectPart {
    uint64_t buffer_offset, file_offset, length, needed;
  };

  // A batch's O_DIRECT reads cut into parts of at most kDirectPartBytes.
  std::vector<DirectPart> direct_parts(const Batch& batch) const {
    std::vector<DirectPart> parts;
    for (const DirectRead& d : batch.direct) {
      const uint64_t needed = plan_.runs[d.piece]->offset + plan_.pieces[d.piece].bytes -
                              d.file_offset;
      for (uint64_t at = 0; at < d.length; at += kDirectPartBytes) {
        const uint64_t len = std::min(kDirectPartBytes, d.length - at);
        parts.push_back({d.buffer_offset + at, d.file_offset + at, len,
                         needed > at ? std::min(len, needed - at) : 0});
      }
    }
    return parts;
  }

  // Reads a batch's O_DIRECT pieces into the buffer at `base` (in parts, on the read's
  // workers) and verifies their chunks there. A refusal of the kernel (NotSupported: the
  // alignment was wrong after all) comes back as is.
  Status read_direct_pieces(const Batch& batch, std::byte* base) {
    const std::vector<DirectPart> parts = direct_parts(batch);
    JTREE_RETURN_IF_ERROR(parallel_for(
        pool_for(direct_threads_), parts.size(), direct_threads_, [&](size_t i) -> Status {
          const DirectPart& part = parts[i];
          JTREE_ASSIGN_OR_RETURN(
              uint64_t n, io::read_direct(*source_, part.file_offset,
                                          {base + part.buffer_offset, part.length}));
          if (n < part.needed) {
            return Status::io_error(reader_.name() + ": unexpected end of file at offset " +
                                    std::to_string(part.file_offset + n) + " (O_DIRECT read)");
          }
          return Status::success();
        }));
    if (!read_options_.verify_checksums) return Status::success();
    std::vector<size_t> checked;
    for (const DirectRead& d : batch.direct) checked.push_back(d.piece);
    return verify_runs(checked, [&](size_t p) { return base + batch.offsets[p - batch.first]; });
  }

  // Verifies the chunks of the file runs of pieces `checked`, piece p's bytes being at
  // start(p), on the read's workers. The error is worded as Reader::read_many words it.
  template <class Start>
  Status verify_runs(const std::vector<size_t>& checked, Start start) {
    struct Check {
      size_t piece;
      const RunChunk* chunk;
    };
    std::vector<Check> checks;
    for (size_t p : checked) {
      for (const RunChunk& c : plan_.runs[p]->chunks) checks.push_back({p, &c});
    }
    return parallel_for(
        pool_for(direct_threads_), checks.size(), direct_threads_, [&](size_t i) -> Status {
          const size_t p = checks[i].piece;
          const ChunkInfo& c = checks[i].chunk->info;
          const std::byte* stored = start(p) + (c.file_offset - plan_.runs[p]->offset);
          if (xxh3({stored, c.stored_size}, c.seed) == c.checksum) return Status::success();
          const uint32_t leaf = requests_[plan_.pieces[p].request].leaf;
          return Status::corruption(reader_.name() + ": leaf " + reader_.leaf_path(leaf) +
                                    ": chunk " + std::to_string(checks[i].chunk->local) +
                                    ": checksum mismatch (file offset " +
                                    std::to_string(c.file_offset) + ", " +
                                    std::to_string(c.stored_size) + " bytes)");
        });
  }

  // Queues the copies of a staged batch b's pieces, piece p's bytes being at src(p), on the
  // slot's stream; nothing when another filler failed meanwhile.
  template <class Src>
  Status queue_copies(size_t b, StagingRing::Slot& slot, Src src) {
    if (stopped()) return Status::success();
    const Batch& batch = plan_.batches[b];
    slot.batch = b;
    for (size_t p = batch.first; p < batch.last; ++p) {
      slot.pending = true;
      Status st = engine_.copy_async(destination(p), src(p), plan_.pieces[p].bytes, slot.stream);
      if (!st.ok()) return st.with_prefix(where(b));
    }
    return Status::success();
  }

  // Queues the copies of mapped batch b's parts, part k's bytes [at, at + n) being at
  // src(k, at): from the mapping, or (staged after all) from the slot's buffer, `step` bytes
  // at a time, each step filled first by fill_step(k, at, n).
  template <class FillStep, class Src>
  Status copy_parts(size_t b, StagingRing::Slot& slot, uint64_t step, FillStep fill_step,
                    Src src) {
    const Batch& batch = plan_.batches[b];
    for (size_t k = 0; k < batch.parts.size(); ++k) {
      const MappedPart& part = batch.parts[k];
      std::byte* dst = destination(part.piece) + part.dst_offset;
      for (uint64_t at = 0; at < part.bytes; at += step) {
        const uint64_t n = std::min(step, part.bytes - at);
        JTREE_RETURN_IF_ERROR(fill_step(k, at, n));
        if (stopped()) return Status::success();
        slot.batch = b;
        slot.pending = true;
        Status st = engine_.copy_async(dst + at, src(k, at), n, slot.stream);
        if (!st.ok()) return st.with_prefix(where(b));
      }
    }
    return Status::success();
  }

  // A zero-copy batch: its file pages registered, its parts copied from the mapping, the chunks
  // of its pieces verified meanwhile (hashed from the mapping). The registration ends when the
  // slot is next settled. Where registering fails (kAuto) the parts are staged instead.
  Status fill_mapped(size_t b) {
    const Batch& batch = plan_.batches[b];
    const size_t si = b % plan_.num_slots;
    const std::byte* const map = plan_.zero_copy.map.data();
    if (Status st = ring_.ensure(si, 0); !st.ok()) return st.with_prefix(leaves_of(b));
    StagingRing::Slot& slot = ring_.slot(si);
    if (Status st = ring_.settle(si); !st.ok()) return st.with_prefix(where(slot.batch));
    Status reg = zero_copy_refused_.load()
                     ? Status::not_supported("")
                     : engine_.register_host(map + batch.map_begin,
                                             batch.map_end - batch.map_begin);
    if (reg.ok()) {
      slot.registered = map + batch.map_begin;
      JTREE_RETURN_IF_ERROR(copy_parts(
          b, slot, UINT64_MAX, [](size_t, uint64_t, uint64_t) { return Status::success(); },
          [&](size_t k, uint64_t at) { return map + batch.parts[k].file_offset + at; }));
      // (Another filler failed meanwhile: nothing more was queued, nothing is counted.)
      if (stopped()) return Status::success();
      report_.zero_copy_bytes.fetch_add(batch.bytes);
    } else {
      JTREE_RETURN_IF_ERROR(note_registration_refused(batch, reg));
      JTREE_RETURN_IF_ERROR(stage_mapped(b, si));
      if (stopped()) return Status::success();
      report_.buffered_bytes.fetch_add(batch.bytes);
    }
    if (!read_options_.verify_checksums) return Status::success();
    return verify_runs(batch.verified, [&](size_t p) { return map + plan_.file_offsets[p]; });
  }

  // A registration the engine refused: the load's error under ZeroCopy::kOn; under kAuto, the
  // first refusal stops zero copy for the rest of the load (a note says why).
  Status note_registration_refused(const Batch& batch, const Status& reg) {
    if (zero_copy_refused_.load() && options_.zero_copy != ZeroCopy::kOn) {
      return Status::success();
    }
    const std::string what = "zero copy: registering file bytes [" +
                             std::to_string(batch.map_begin) + ", " +
                             std::to_string(batch.map_end) + "): " + reg.message();
    if (options_.zero_copy == ZeroCopy::kOn) {
      return Status(reg.code(), reader_.name() + ": " + what);
    }
    if (!zero_copy_refused_.exchange(true)) {
      report_.set_note(report_.zero_copy_note,
                       "zero copy stopped mid-load (the rest was staged): " + what);
    }
    return Status::success();
  }

  // A mapped batch b staged through slot si's buffer after all: memcpy from the mapping (the
  // bytes are the file's), one buffer at a time, each copied before the next is filled.
  Status stage_mapped(size_t b, size_t si) {
    const Batch& batch = plan_.batches[b];
    const std::byte* const map = plan_.zero_copy.map.data();
    if (Status st = ring_.ensure(si, plan_.buffer_bytes); !st.ok()) {
      return st.with_prefix(leaves_of(b));
    }
    StagingRing::Slot& slot = ring_.slot(si);
    std::byte* const base = slot.buffer.data();
    return copy_parts(
        b, slot, plan_.buffer_bytes,
        [&](size_t k, uint64_t at, uint64_t n) -> Status {
          if (Status st = ring_.settle(si); !st.ok()) return st.with_prefix(where(slot.batch));
          std::memcpy(base, map + batch.parts[k].file_offset + at, n);
          return Status::success();
        },
        [&](size_t, uint64_t) -> const std::byte* { return base; });
  }

  const Reader& reader_;
  std::span<const DeviceRequest> requests_;
  const StagedLoadPlan& plan_;
  CopyEngine& engine_;
  const DeviceOptions& options_;
  StagingReport& report_;
  const ReadOptions read_options_;
  const int direct_threads_;
  const std::shared_ptr<Source> source_;
  StagingRing ring_;
  // Set when an O_DIRECT read is refused mid-load (kAuto): the rest is read buffered.
  std::atomic<bool> direct_refused_{false};
  // Set when a registration fails mid-load (zero copy kAuto): the rest is staged.
  std::atomic<bool> zero_copy_refused_{false};

  std::mutex mu_;  // guards what follows, up to stop_
  std::condition_variable turn_cv_;
  size_t next_batch_ = 0;
  std::vector<size_t> turn_;  // the batch each slot serves next
  Status failure_;
  bool failed_ = false;
  std::atomic<bool> stop_{false};  // failed_, for a filler in the middle of a buffer load
  uint64_t done_ = 0;              // bytes of the batches done, for progress
};

}  // namespace

Status run_staged_load(const Reader& reader, std::span<const DeviceRequest> requests,
                       const StagedLoadPlan& plan, CopyEngine& engine,
                       const DeviceOptions& options, StagingReport& report) {
  StagedLoad load(reader, requests, plan, engine, options, report);
  return load.run();
}

}  // namespace jtree::staging
