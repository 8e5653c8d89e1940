// The staging pipeline of jtree/device.h: leaves read and decoded into a ring of pinned
// buffers, each copied on its own stream while the next ones are filled. Pieces that are runs
// of whole raw chunks are read with O_DIRECT straight into the buffers (io/direct_read.h:
// a cold-cache load then reads each byte once, disk to pinned memory, without a page-cache
// copy and without evicting the page cache for a multi-GB checkpoint); the rest through
// Reader::read_many.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "codec/checksum.h"
#include "cuda/direct_plan.h"
#include "cuda/staging_plan.h"
#include "io/direct_read.h"
#include "read/check_request.h"
#include "jtree/device.h"
#include "util/thread_pool.h"

namespace jtree {

CopyEngine::~CopyEngine() = default;

namespace {

// Pieces smaller than this are read buffered even where O_DIRECT works: the alignment slack
// would be a large part of the read, and the page cache costs little for them.
constexpr uint64_t kMinDirectBytes = 32 << 10;

// O_DIRECT reads are issued in parts of at most this size, on the read's worker threads, so
// that one large piece keeps several requests in flight at the device.
constexpr uint64_t kDirectPartBytes = 8 << 20;

// DirectIo::kAuto reads a file buffered when at least this share of its pages is in the page
// cache (a warm file: copying out of memory beats reading the disk again).
constexpr double kCachedEnough = 0.5;

// How a load uses O_DIRECT, decided once before its buffers are planned.
struct DirectPlan {
  bool on = false;
  io::DirectReadSupport support;
  // Alignment slack a piece may need in its buffer: up to offset_align - 1 before it and after
  // it (rounded to whole blocks), and the buffer's own start rounded up to memory_align.
  uint64_t slack() const { return on ? 2 * support.offset_align + support.memory_align : 0; }
};

// Decides whether a load may use O_DIRECT. Errors only for DirectIo::kOn where it cannot.
Result<DirectPlan> plan_direct(const Reader& r, const DeviceOptions& o, uint64_t per_buffer,
                               std::string& note) {
  DirectPlan p;
  if (o.direct_io == DirectIo::kOff) {
    note = "direct_io is Off";
    return p;
  }
  p.support = io::direct_read_support(*r.source());
  if (p.support.available && o.direct_io == DirectIo::kAuto) {
    // A file mostly in the page cache is read faster from there than from the disk again.
    const std::optional<double> cached = io::cached_fraction(*r.source());
    if (cached && *cached >= kCachedEnough) {
      note = "no O_DIRECT: the file is in the page cache (" +
             std::to_string(static_cast<int>(*cached * 100 + 0.5)) +
             "% of its pages): buffered reads are faster";
      return p;
    }
  }
  if (p.support.available) {
    p.on = true;
    if (per_buffer < 4 * p.slack()) {
      p.on = false;
      p.support.reason = "staging buffers of " + std::to_string(per_buffer) +
                         " bytes are too small for O_DIRECT's alignment of " +
                         std::to_string(p.support.offset_align) + " bytes (at least " +
                         std::to_string(4 * (2 * p.support.offset_align + p.support.memory_align)) +
                         " needed)";
    }
  }
  if (!p.on) {
    note = "no O_DIRECT: " + p.support.reason;
    if (o.direct_io == DirectIo::kOn) {
      return Status::not_supported(r.name() + ": direct_io is On, but O_DIRECT cannot be used: " +
                                  p.support.reason);
    }
  }
  return p;
}

// Checks a request against the file (check_request, as host reads do: the destination has
// the slice's exact size) and resolves its box. Errors name the file and the leaf.
Result<Box> check_device_request(const Reader& r, const DeviceRequest& req) {
  JTREE_ASSIGN_OR_RETURN(Box box, check_request(r, req.leaf, req.box, req.dst_bytes,
                                                "device destination"));
  if (req.dst_bytes > 0 && req.dst == nullptr) {
    return Status::invalid_argument(r.name() + ": leaf " + r.leaf_path(req.leaf) +
                                   ": null device destination");
  }
  return box;
}

// The pinned buffers and their streams. Whatever way the load ends, the destructor waits for
// every copy still queued (a buffer must not be freed under a running DMA) and then frees the
// buffers and the streams.
class StagingRing {
 public:
  struct Slot {
    std::span<std::byte> buffer;
    int stream = -1;
    bool has_stream = false;
    bool pending = false;       // copies queued since the last sync
    size_t batch = 0;           // the batch whose copies are queued (for messages)
  };

  // `slots` slots, whose buffers and streams are made on first use (ensure): the first buffer
  // load starts after one allocation, not after all of them (pinning memory is slow: about
  // 2-3 GB/s with cudaHostAlloc), and the others are allocated by the fillers meanwhile.
  StagingRing(CopyEngine& engine, size_t slots) : engine_(engine), slots_(slots) {}
  StagingRing(const StagingRing&) = delete;
  StagingRing& operator=(const StagingRing&) = delete;
  ~StagingRing() {
    for (Slot& s : slots_) {
      if (s.pending) (void)engine_.sync(s.stream);  // (the load already failed: its error wins)
      if (s.has_stream) engine_.destroy_stream(s.stream);
      if (!s.buffer.empty()) engine_.free_pinned(s.buffer);
    }
  }

  // Gives slot i its buffer of `bytes` and its stream, unless it has them. Called only by the
  // filler whose turn slot i is (the slots vector itself never changes size).
  Status ensure(size_t i, uint64_t bytes) {
    Slot& s = slots_[i];
    if (s.has_stream) return Status::success();
    if (s.buffer.empty()) {
      JTREE_ASSIGN_OR_RETURN(s.buffer, engine_.allocate_pinned(bytes));
    }
    if (s.buffer.size() < bytes) {
      return Status::io_error(engine_.name() + ": pinned buffer of " +
                             std::to_string(s.buffer.size()) + " bytes; asked for " +
                             std::to_string(bytes));
    }
    JTREE_ASSIGN_OR_RETURN(s.stream, engine_.create_stream());
    s.has_stream = true;
    return Status::success();
  }

  Slot& slot(size_t i) { return slots_[i]; }
  size_t size() const { return slots_.size(); }

 private:
  CopyEngine& engine_;
  std::vector<Slot> slots_;
};

}  // namespace

Status read_many_staged(const Reader& reader, std::span<const DeviceRequest> requests,
                        CopyEngine& engine, const DeviceOptions& options) {
  using staging::Batch;
  using staging::Piece;
  // (read.check() included, as host reads make it; the error names the file.)
  if (Status st = options.check(); !st.ok()) return st.with_prefix(reader.name());
  const uint64_t per_buffer = options.staging_bytes / options.staging_buffers;
  // The stats are written however the load ends (the counters are the fillers').
  std::atomic<uint64_t> direct_bytes{0}, buffered_bytes{0};
  std::string note;
  std::mutex note_mu;  // (a filler may set it when O_DIRECT stops working mid-load)
  struct StatsOut {
    const DeviceOptions& o;
    std::atomic<uint64_t>& direct;
    std::atomic<uint64_t>& buffered;
    std::string& note;
    ~StatsOut() {
      if (o.stats == nullptr) return;
      o.stats->direct_bytes = direct.load();
      o.stats->buffered_bytes = buffered.load();
      o.stats->direct_io_note = note;
    }
  } stats_out{options, direct_bytes, buffered_bytes, note};

  std::vector<Box> boxes;
  boxes.reserve(requests.size());
  uint64_t total = 0, largest = 0, packed = 0;
  for (const DeviceRequest& req : requests) {
    JTREE_ASSIGN_OR_RETURN(Box b, check_device_request(reader, req));
    total += req.dst_bytes;
    packed += staging::round_up_64(req.dst_bytes);
    largest = std::max(largest, req.dst_bytes);
    boxes.push_back(std::move(b));
  }
  if (total == 0) return Status::success();
  JTREE_ASSIGN_OR_RETURN(const DirectPlan direct, plan_direct(reader, options, per_buffer, note));

  // A small load pins little: no buffer larger than the largest request, or than the load's
  // share of each buffer (its bytes over the buffers), whichever is larger. (The largest
  // request alone would cut a load of many tiny leaves into one buffer load per leaf, each
  // with its read, copies and stream sync: 873 leaves of 64 bytes took 45 ms.) With O_DIRECT,
  // the pieces of leaves saved without compression are cut smaller than the buffer by the
  // alignment slack their reads may need (the others keep whole buffers: cut the same way,
  // their chunks would no longer land whole in one piece).
  const uint64_t slack = direct.slack();
  const uint64_t share = staging::round_up_64(
      (packed + static_cast<uint64_t>(options.staging_buffers) - 1) /
      static_cast<uint64_t>(options.staging_buffers));
  const uint64_t buffer_bytes =
      std::min(per_buffer, std::max(staging::round_up_64(largest), share) + slack);
  std::vector<Piece> pieces;
  for (size_t i = 0; i < requests.size(); ++i) {
    const Leaf& leaf = reader.leaf(requests[i].leaf);
    const bool maybe_direct = direct.on && leaf.storage == Storage::kChunked &&
                              leaf.codec == Codec::kRaw && !is_4bit(leaf.dtype);
    staging::cut_box(static_cast<uint32_t>(i), boxes[i], leaf.chunk_shape,
                     memory_bytes(leaf.dtype, 1), buffer_bytes - (maybe_direct ? slack : 0),
                     pieces);
  }
  // The file runs of the pieces read with O_DIRECT (empty where a piece is not one). A piece
  // of whole chunks that padding separates in the file is cut into one piece per chunk.
  std::vector<std::optional<staging::FileRun>> runs;
  std::vector<uint64_t> file_offsets;
  if (direct.on) {
    std::vector<Piece> cut;
    cut.reserve(pieces.size());
    auto add = [&](Piece&& piece, std::optional<staging::FileRun>&& run) {
      file_offsets.push_back(run ? run->offset : staging::kNoFileRun);
      runs.push_back(std::move(run));
      cut.push_back(std::move(piece));
    };
    for (Piece& piece : pieces) {
      const uint32_t leaf = requests[piece.request].leaf;
      if (piece.bytes < kMinDirectBytes) {
        add(std::move(piece), std::nullopt);
        continue;
      }
      auto run = staging::piece_file_run(reader, leaf, piece.box, piece.bytes);
      if (run) {
        add(std::move(piece), std::move(run));
        continue;
      }
      std::vector<Piece> parts = staging::split_at_chunks(reader, leaf, piece);
      if (parts.empty() || piece.bytes / parts.size() < kMinDirectBytes) {
        add(std::move(piece), std::nullopt);
        continue;
      }
      for (Piece& part : parts) {
        auto part_run = staging::piece_file_run(reader, leaf, part.box, part.bytes);
        if (part.bytes < kMinDirectBytes) part_run.reset();
        add(std::move(part), std::move(part_run));
      }
    }
    pieces = std::move(cut);
  }
  const std::vector<Batch> batches =
      direct.on ? staging::pack_pieces_direct(pieces, file_offsets, buffer_bytes,
                                              direct.support.offset_align,
                                              direct.support.memory_align)
                : staging::pack_pieces(pieces, buffer_bytes);
  std::vector<char> is_direct(pieces.size(), 0);
  for (const Batch& b : batches) {
    for (const staging::DirectRead& d : b.direct) is_direct[d.piece] = 1;
  }
  if (direct.on && std::find(is_direct.begin(), is_direct.end(), 1) == is_direct.end()) {
    note = "no piece is a run of whole raw chunks of at least " +
           std::to_string(kMinDirectBytes) + " bytes (compressed, or slices of chunks)";
  }
  // Set when an O_DIRECT read is refused mid-load (kAuto): the rest is read buffered.
  std::atomic<bool> direct_refused{false};
  const int direct_threads = resolve_threads(options.read.threads);
  const std::shared_ptr<Source> source = reader.source();
  const size_t num_slots = std::min<size_t>(options.staging_buffers, batches.size());

  // "<file>: leaf <path>" of a batch's first piece, for the engine's errors.
  auto where = [&](size_t b) {
    const Batch& batch = batches[b];
    std::string s = reader.name() + ": leaf " +
                    reader.leaf_path(requests[pieces[batch.first].request].leaf);
    const size_t more = batch.last - batch.first - 1;
    if (more > 0) s += " (and " + std::to_string(more) + " more pieces)";
    return s + ": copy to " + engine.name();
  };

  StagingRing ring(engine, num_slots);

  ReadOptions ro = options.read;
  ro.progress = nullptr;  // (progress is reported per buffer, below)

  // Buffer loads are claimed in order by the fillers (the caller and helpers, below), so that
  // some buffers are read while another's read finishes its last chunks: each read_many ends
  // with its slowest chunk, and the other fillers keep the workers busy meanwhile (a buffer
  // holds only a few chunks, too few to occupy every worker alone). Batch b uses
  // slot b % num_slots and waits for its turn there: the slot's previous batch has queued its
  // copies (then the stream is synced, so the buffer is no longer read by a copy).
  std::mutex mu;
  std::condition_variable turn_cv;
  size_t next_batch = 0;
  std::vector<size_t> turn(num_slots);  // the batch each slot serves next
  for (size_t i = 0; i < num_slots; ++i) turn[i] = i;
  Status failure;
  bool failed = false;                 // (under mu)
  std::atomic<bool> stop{false};       // failed, for a filler in the middle of a buffer load
  uint64_t done = 0;

  // Reads a batch's O_DIRECT pieces into the buffer at `base` (in parts, on the read's
  // workers) and verifies their chunks there. A refusal of the kernel (NotSupported: the
  // alignment was wrong after all) comes back as is, for the caller to read them buffered.
  auto read_direct_pieces = [&](const Batch& batch, std::byte* base) -> Status {
    struct Part {
      uint64_t buffer_offset, file_offset, length, needed;
    };
    std::vector<Part> parts;
    for (const staging::DirectRead& d : batch.direct) {
      // Bytes of the range the piece needs (the rest is alignment slack, possibly past EOF).
      const uint64_t needed = runs[d.piece]->offset + pieces[d.piece].bytes - d.file_offset;
      for (uint64_t at = 0; at < d.length; at += kDirectPartBytes) {
        const uint64_t len = std::min(kDirectPartBytes, d.length - at);
        parts.push_back({d.buffer_offset + at, d.file_offset + at, len,
                         needed > at ? std::min(len, needed - at) : 0});
      }
    }
    JTREE_RETURN_IF_ERROR(parallel_for(
        pool_for(direct_threads), parts.size(), direct_threads, [&](size_t i) -> Status {
          const Part& part = parts[i];
          JTREE_ASSIGN_OR_RETURN(
              uint64_t n, io::read_direct(*source, part.file_offset,
                                          {base + part.buffer_offset, part.length}));
          if (n < part.needed) {
            return Status::io_error(reader.name() + ": unexpected end of file at offset " +
                                   std::to_string(part.file_offset + n) + " (O_DIRECT read)");
          }
          return Status::success();
        }));
    if (!ro.verify_checksums) return Status::success();
    struct Check {
      size_t piece;
      const staging::RunChunk* chunk;
    };
    std::vector<Check> checks;
    for (const staging::DirectRead& d : batch.direct) {
      for (const staging::RunChunk& c : runs[d.piece]->chunks) checks.push_back({d.piece, &c});
    }
    return parallel_for(
        pool_for(direct_threads), checks.size(), direct_threads, [&](size_t i) -> Status {
          const size_t p = checks[i].piece;
          const ChunkInfo& c = checks[i].chunk->info;
          const std::byte* stored = base + batch.offsets[p - batch.first] +
                                    (c.file_offset - runs[p]->offset);
          if (xxh3({stored, c.stored_size}, c.seed) == c.checksum) return Status::success();
          // (As Reader::read_many words it.)
          const uint32_t leaf = requests[pieces[p].request].leaf;
          return Status::corruption(reader.name() + ": leaf " + reader.leaf_path(leaf) +
                                    ": chunk " + std::to_string(checks[i].chunk->local) +
                                    ": checksum mismatch (file offset " +
                                    std::to_string(c.file_offset) + ", " +
                                    std::to_string(c.stored_size) + " bytes)");
        });
  };

  // Fills one buffer load and queues its copies; the slot is this thread's alone meanwhile.
  auto fill = [&](size_t b, std::vector<ReadRequest>& reads) -> Status {
    const Batch& batch = batches[b];
    JTREE_RETURN_IF_ERROR(ring.ensure(b % num_slots, buffer_bytes));
    StagingRing::Slot& slot = ring.slot(b % num_slots);
    // Backpressure: the buffer is refilled only once its previous copies have completed.
    if (slot.pending) {
      slot.pending = false;
      Status st = engine.sync(slot.stream);
      if (!st.ok()) return st.with_prefix(where(slot.batch));
    }
    std::byte* const base = slot.buffer.data();
    // (CUDA's pinned buffers are page-aligned; an engine whose buffers are not aligned for
    // O_DIRECT gets buffered reads.)
    const bool aligned =
        direct.on && reinterpret_cast<uintptr_t>(base) % direct.support.memory_align == 0;
    if (direct.on && !aligned) {
      std::lock_guard<std::mutex> lock(note_mu);
      note = "pinned buffers from " + engine.name() + " are not aligned to " +
             std::to_string(direct.support.memory_align) + " bytes for O_DIRECT";
    }
    const bool use_direct = !batch.direct.empty() && aligned && !direct_refused.load();
    auto read_buffered = [&](bool direct_ones) -> Status {
      reads.clear();
      uint64_t bytes = 0;
      for (size_t p = batch.first; p < batch.last; ++p) {
        if ((is_direct[p] && use_direct) != direct_ones) continue;
        const Piece& piece = pieces[p];
        reads.push_back({requests[piece.request].leaf, piece.box,
                         {base + batch.offsets[p - batch.first], piece.bytes}});
        bytes += piece.bytes;
      }
      if (reads.empty()) return Status::success();
      JTREE_RETURN_IF_ERROR(reader.read_many(reads, ro));
      buffered_bytes.fetch_add(bytes);
      return Status::success();
    };
    JTREE_RETURN_IF_ERROR(read_buffered(false));
    if (use_direct) {
      Status st = read_direct_pieces(batch, base);
      if (st.is_not_supported() && options.direct_io == DirectIo::kAuto) {
        // The kernel refused after all: this batch's direct pieces and the rest, buffered.
        direct_refused.store(true);
        {
          std::lock_guard<std::mutex> lock(note_mu);
          note = "O_DIRECT stopped mid-load: " + st.message();
        }
        JTREE_RETURN_IF_ERROR(read_buffered(true));
      } else if (!st.ok()) {
        return st;
      } else {
        uint64_t bytes = 0;
        for (const staging::DirectRead& d : batch.direct) bytes += pieces[d.piece].bytes;
        direct_bytes.fetch_add(bytes);
      }
    }
    // Another filler failed meanwhile: queue nothing more (the load returns its error).
    if (stop.load(std::memory_order_relaxed)) return Status::success();
    slot.batch = b;
    for (size_t p = batch.first; p < batch.last; ++p) {
      const Piece& piece = pieces[p];
      std::byte* dst = static_cast<std::byte*>(requests[piece.request].dst) + piece.dst_offset;
      slot.pending = true;
      Status st = engine.copy_async(dst, base + batch.offsets[p - batch.first],
                                    piece.bytes, slot.stream);
      if (!st.ok()) return st.with_prefix(where(b));
    }
    return Status::success();
  };

  auto filler = [&] {
    std::vector<ReadRequest> reads;
    std::unique_lock<std::mutex> lock(mu);
    while (!failed && next_batch < batches.size()) {
      const size_t b = next_batch++;
      const size_t slot = b % num_slots;
      turn_cv.wait(lock, [&] { return failed || turn[slot] == b; });
      if (failed) break;
      lock.unlock();
      Status st = fill(b, reads);
      lock.lock();
      turn[slot] = b + num_slots;
      if (st.ok() && !failed) {
        done += batches[b].bytes;
        // (Under the lock: progress is never called concurrently with itself.)
        if (options.read.progress && !options.read.progress(done, total)) {
          st = Status::aborted(reader.name() + ": load to " + engine.name() + " cancelled");
        }
      }
      if (!st.ok() && !failed) {
        failed = true;
        stop.store(true, std::memory_order_relaxed);
        failure = std::move(st);
      }
      turn_cv.notify_all();
    }
  };

  // Reads from the page cache keep the read's workers busy with four buffer loads at a time;
  // O_DIRECT reads wait on the disk, which wants more requests in flight: every buffer is
  // filled at once then (on the H200 machine's disk, fastsafetensors read a cold file at
  // 3.5 GB/s with 16 reads of 16 MiB in flight, this pipeline at 1.7 with 4 buffer loads).
  constexpr size_t kFillers = 4;
  const size_t fillers = direct.on ? num_slots : std::min(kFillers, num_slots);
  std::vector<std::thread> helpers;
  try {
    for (size_t i = 1; i < fillers; ++i) helpers.emplace_back(filler);
  } catch (const std::system_error&) {
    // (No thread to be had: the caller fills every buffer alone.)
  }
  filler();
  for (std::thread& t : helpers) t.join();
  if (failed) return failure;  // (the ring's destructor waits for the queued copies)
  for (size_t i = 0; i < ring.size(); ++i) {
    StagingRing::Slot& slot = ring.slot(i);
    if (!slot.pending) continue;
    slot.pending = false;
    Status st = engine.sync(slot.stream);
    if (!st.ok()) return st.with_prefix(where(slot.batch));
  }
  return Status::success();
}

}  // namespace jtree
