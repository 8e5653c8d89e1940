// The staging pipeline of jtree/device.h: leaves read and decoded into a ring of pinned
// buffers, each copied on its own stream while the next ones are filled. Pieces that are runs
// of whole raw chunks are read with O_DIRECT straight into the buffers (io/direct_read.h:
// a cold-cache load then reads each byte once, disk to pinned memory, without a page-cache
// copy and without evicting the page cache for a multi-GB checkpoint), or, with zero copy,
// copied to the device straight from the file's registered page-cache pages (no staging
// buffer, no copy into pinned memory); the rest through Reader::read_many.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <condition_variable>
#include <mutex>
#include <numeric>
#include <system_error>
#include <thread>
#include <vector>

#include <unistd.h>

#include "codec/checksum.h"
#include "cuda/direct_plan.h"
#include "cuda/staging_plan.h"
#include "io/direct_read.h"
#include "read/check_request.h"
#include "read/read_scratch.h"
#include "jtree/device.h"
#include "util/guarded.h"
#include "util/thread_pool.h"

namespace jtree {

CopyEngine::~CopyEngine() = default;
DeviceMemory::~DeviceMemory() = default;

Status CopyEngine::register_host(const std::byte* p, size_t bytes) {
  (void)p;
  (void)bytes;
  return Status::not_supported(name() + " cannot register host memory for copies");
}

void CopyEngine::unregister_host(const std::byte* p) { (void)p; }

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

// The share of the pages a load reads that are in the page cache, asked at most once per load
// (both plans below may want it), about those pages only (staging::load_extents): never the
// whole file, whose size must not make a small load slow.
class CachedShare {
 public:
  CachedShare(const Reader& reader, std::span<const DeviceRequest> requests,
              std::span<const Box> boxes)
      : reader_(reader), requests_(requests), boxes_(boxes) {}
  std::optional<double> get() {
    if (!asked_) {
      cached_ = io::cached_fraction(*reader_.source(),
                                    staging::load_extents(reader_, requests_, boxes_));
    }
    asked_ = true;
    return cached_;
  }

 private:
  const Reader& reader_;
  std::span<const DeviceRequest> requests_;
  std::span<const Box> boxes_;
  bool asked_ = false;
  std::optional<double> cached_;
};

// Decides whether a load may use O_DIRECT. Errors only for DirectIo::kOn where it cannot.
Result<DirectPlan> plan_direct(const Reader& r, const DeviceOptions& o, uint64_t per_buffer,
                               CachedShare& share, std::string& note) {
  DirectPlan p;
  if (o.direct_io == DirectIo::kOff) {
    note = "direct_io is Off";
    return p;
  }
  p.support = io::direct_read_support(*r.source());
  if (p.support.available && o.direct_io == DirectIo::kAuto) {
    // A file mostly in the page cache is read faster from there than from the disk again.
    const std::optional<double> cached = share.get();
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

// How a load uses zero copy (DeviceOptions::zero_copy), decided once before it is planned.
struct ZeroCopyPlan {
  bool on = false;
  std::shared_ptr<const MappedFile> mapping;  // the whole file, shared and read-only
  std::span<const std::byte> map;             // its bytes
  uint64_t page = 4096;
};

// Decides whether a load copies raw chunks straight from the file's pages: a local file (whose
// shared read-only mapping it makes: io::map_shared_read_only), an engine that registers
// host memory (asked with the mapping's first page) and, for kAuto, a file mostly in the page
// cache. Errors only for ZeroCopy::kOn where it cannot.
Result<ZeroCopyPlan> plan_zero_copy(const Reader& r, const DeviceOptions& o, CopyEngine& engine,
                                    CachedShare& share, std::string& note) {
  ZeroCopyPlan p;
  if (o.zero_copy == ZeroCopy::kOff) return p;
  std::string why;
  const long page = ::sysconf(_SC_PAGESIZE);
  p.page = page > 0 ? static_cast<uint64_t>(page) : 4096;
  if (o.direct_io != DirectIo::kOn) p.mapping = io::map_shared_read_only(*r.source());
  if (o.direct_io == DirectIo::kOn) {
    why = "direct_io is On";
  } else if (p.mapping == nullptr) {
    why = "not a local file that can be mapped (remote, in memory, or mmap failed)";
  } else if (o.zero_copy == ZeroCopy::kAuto) {
    const std::optional<double> cached = share.get();
    if (!cached || *cached < kCachedEnough) {
      why = cached ? "the file is not in the page cache (" +
                         std::to_string(static_cast<int>(*cached * 100 + 0.5)) +
                         "% of its pages): registering would read it from the disk"
                   : "the share of the file in the page cache is unknown";
    }
  }
  if (why.empty()) {
    p.map = p.mapping->bytes();
    // One page registered and released: whether the engine can at all, before any plan
    // depends on it.
    const std::byte* first = p.map.data();
    // (A whole page, as register_host asks: the mapping covers the last page whole.)
    Status st = engine.register_host(first, p.page);
    if (st.ok()) {
      engine.unregister_host(first);
      p.on = true;
      return p;
    }
    why = st.message();
  }
  note = "no zero copy: " + why;
  if (o.zero_copy == ZeroCopy::kOn) {
    return Status::not_supported(r.name() + ": zero_copy is On, but it cannot be used: " + why);
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
    const std::byte* registered = nullptr;  // file pages registered for them (zero copy)
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
      if (s.registered != nullptr) engine_.unregister_host(s.registered);
      if (s.has_stream) engine_.destroy_stream(s.stream);
      if (!s.buffer.empty()) engine_.free_pinned(s.buffer);
    }
  }

  // Gives slot i its stream and, unless `bytes` is 0 (a zero-copy batch needs none), its
  // buffer of `bytes`, where it lacks them. Called only by the filler whose turn slot i is
  // (the slots vector itself never changes size).
  Status ensure(size_t i, uint64_t bytes) {
    Slot& s = slots_[i];
    if (bytes > 0 && s.buffer.empty()) {
      JTREE_ASSIGN_OR_RETURN(s.buffer, engine_.allocate_pinned(bytes));
      if (s.buffer.size() < bytes) {
        return Status::io_error(engine_.name() + ": pinned buffer of " +
                               std::to_string(s.buffer.size()) + " bytes; asked for " +
                               std::to_string(bytes));
      }
    }
    if (!s.has_stream) {
      JTREE_ASSIGN_OR_RETURN(s.stream, engine_.create_stream());
      s.has_stream = true;
    }
    return Status::success();
  }

  // Waits for the slot's queued copies and then ends its registration: what a slot does
  // before it serves its next batch, and at the end of the load.
  Status settle(size_t i) {
    Slot& s = slots_[i];
    Status st;
    if (s.pending) {
      s.pending = false;
      st = engine_.sync(s.stream);
    }
    // (Unregistered even after a failed sync: no copy from it is pending any more.)
    if (s.registered != nullptr) {
      engine_.unregister_host(s.registered);
      s.registered = nullptr;
    }
    return st;
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
  // The fillers' read_many calls, buffer after buffer, keep their scratch sets between them.
  ReadScratchCache::Use scratch(ReadScratchCache::shared());
  const uint64_t per_buffer = options.staging_bytes / options.staging_buffers;
  // The stats are written however the load ends (the counters are the fillers').
  std::atomic<uint64_t> direct_bytes{0}, buffered_bytes{0}, zero_copy_bytes{0};
  std::string note, zc_note;
  std::mutex note_mu;  // (a filler may set them when O_DIRECT or zero copy stops mid-load)
  struct StatsOut {
    const DeviceOptions& o;
    std::atomic<uint64_t>& direct;
    std::atomic<uint64_t>& buffered;
    std::atomic<uint64_t>& zero_copy;
    std::string& note;
    std::string& zc_note;
    ~StatsOut() {
      if (o.stats == nullptr) return;
      o.stats->direct_bytes = direct.load();
      o.stats->buffered_bytes = buffered.load();
      o.stats->direct_io_note = note;
      o.stats->zero_copy_bytes = zero_copy.load();
      o.stats->zero_copy_note = zc_note;
    }
  } stats_out{options, direct_bytes, buffered_bytes, zero_copy_bytes, note, zc_note};

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
  CachedShare cached_share(reader, requests, boxes);
  JTREE_ASSIGN_OR_RETURN(const ZeroCopyPlan zero_copy,
                         plan_zero_copy(reader, options, engine, cached_share, zc_note));
  DirectPlan direct;
  if (zero_copy.on) {
    note = "no O_DIRECT: zero copy serves the raw chunks";
  } else {
    JTREE_ASSIGN_OR_RETURN(direct, plan_direct(reader, options, per_buffer, cached_share, note));
  }

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
    const bool raw_chunks = leaf.storage == Storage::kChunked && leaf.codec == Codec::kRaw &&
                            !is_4bit(leaf.dtype);
    const bool maybe_direct = direct.on && raw_chunks;
    uint64_t max_piece = buffer_bytes - (maybe_direct ? slack : 0);
    // Zero copy needs no buffer for a run of whole chunks (nor slack: its pieces are copied
    // from wherever they are in the file): a chunk larger than a buffer stays whole, where
    // cut to the buffer it would be staged (pieces that are not whole chunks are). Pieces that
    // are no run after all are cut to the buffer again below.
    if (zero_copy.on && raw_chunks) {
      // (A rectilinear grid has no chunk_shape: its product, 1, changes nothing.)
      const uint64_t chunk = std::accumulate(leaf.chunk_shape.begin(), leaf.chunk_shape.end(),
                                             uint64_t{1}, std::multiplies<>());
      max_piece = std::max(max_piece, memory_bytes(leaf.dtype, chunk));
    }
    staging::cut_box(static_cast<uint32_t>(i), boxes[i], leaf.chunk_shape,
                     memory_bytes(leaf.dtype, 1), max_piece, pieces);
  }
  // The file runs of the pieces read with O_DIRECT or copied with zero copy (empty where a
  // piece is not one). A piece of whole chunks that padding separates in the file is cut
  // into one piece per chunk. (O_DIRECT leaves small pieces to buffered reads, for the
  // alignment slack; zero copy has none.)
  const uint64_t min_run_bytes = zero_copy.on ? 1 : kMinDirectBytes;
  std::vector<std::optional<staging::FileRun>> runs;
  std::vector<uint64_t> file_offsets;
  if (direct.on || zero_copy.on) {
    std::vector<Piece> cut;
    cut.reserve(pieces.size());
    auto add = [&](Piece&& piece, std::optional<staging::FileRun>&& run) {
      if (!run && piece.bytes > buffer_bytes) {
        // (Cut whole for zero copy, but no run of whole chunks: staged, so cut to fit a
        // buffer; each part's bytes are contiguous in the piece's, as the piece's are in
        // its request's.)
        const Leaf& leaf = reader.leaf(requests[piece.request].leaf);
        std::vector<Piece> parts;
        staging::cut_box(piece.request, piece.box, leaf.chunk_shape, memory_bytes(leaf.dtype, 1),
                         buffer_bytes, parts);
        for (Piece& part : parts) {
          part.dst_offset += piece.dst_offset;
          file_offsets.push_back(staging::kNoFileRun);
          runs.emplace_back();
          cut.push_back(std::move(part));
        }
        return;
      }
      file_offsets.push_back(run ? run->offset : staging::kNoFileRun);
      runs.push_back(std::move(run));
      cut.push_back(std::move(piece));
    };
    for (Piece& piece : pieces) {
      const uint32_t leaf = requests[piece.request].leaf;
      if (piece.bytes < min_run_bytes) {
        add(std::move(piece), std::nullopt);
        continue;
      }
      auto run = staging::piece_file_run(reader, leaf, piece.box, piece.bytes);
      if (run) {
        add(std::move(piece), std::move(run));
        continue;
      }
      std::vector<Piece> parts = staging::split_at_chunks(reader, leaf, piece);
      if (parts.empty() || piece.bytes / parts.size() < min_run_bytes) {
        add(std::move(piece), std::nullopt);
        continue;
      }
      for (Piece& part : parts) {
        auto part_run = staging::piece_file_run(reader, leaf, part.box, part.bytes);
        if (part.bytes < min_run_bytes) part_run.reset();
        add(std::move(part), std::move(part_run));
      }
    }
    pieces = std::move(cut);
  }
  const std::vector<Batch> batches =
      zero_copy.on ? staging::pack_pieces_mapped(pieces, file_offsets, buffer_bytes, per_buffer,
                                                 zero_copy.page, zero_copy.map.size())
      : direct.on  ? staging::pack_pieces_direct(pieces, file_offsets, buffer_bytes,
                                                 direct.support.offset_align,
                                                 direct.support.memory_align)
                   : staging::pack_pieces(pieces, buffer_bytes);
  std::vector<char> is_direct(pieces.size(), 0);
  for (const Batch& b : batches) {
    for (const staging::DirectRead& d : b.direct) is_direct[d.piece] = 1;
  }
  if (zero_copy.on && std::none_of(batches.begin(), batches.end(),
                                   [](const Batch& b) { return b.mapped; })) {
    zc_note = "no zero copy: no piece is a run of whole raw chunks (compressed, or slices of "
              "chunks)";
  }
  if (direct.on && std::find(is_direct.begin(), is_direct.end(), 1) == is_direct.end()) {
    note = "no piece is a run of whole raw chunks of at least " +
           std::to_string(kMinDirectBytes) + " bytes (compressed, or slices of chunks)";
  }
  // Set when an O_DIRECT read is refused mid-load (kAuto): the rest is read buffered.
  std::atomic<bool> direct_refused{false};
  // Set when a registration fails mid-load (zero copy kAuto): the rest is staged.
  std::atomic<bool> zero_copy_refused{false};
  const int direct_threads = resolve_threads(options.read.threads);
  const std::shared_ptr<Source> source = reader.source();
  const size_t num_slots = std::min<size_t>(options.staging_buffers, batches.size());

  // "<file>: leaf <path>" of a batch's first piece, for the engine's errors.
  // The file and the first leaf of buffer load b, for its errors.
  auto leaves_of = [&](size_t b) {
    const Batch& batch = batches[b];
    const size_t first = batch.mapped ? batch.parts[0].piece : batch.first;
    std::string s = reader.name() + ": leaf " +
                    reader.leaf_path(requests[pieces[first].request].leaf);
    const size_t more = (batch.mapped ? batch.parts.size() : batch.last - batch.first) - 1;
    if (more > 0) s += " (and " + std::to_string(more) + " more pieces)";
    return s;
  };
  auto where = [&](size_t b) { return leaves_of(b) + ": copy to " + engine.name(); };

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

  // Verifies the chunks of the file runs of `checked` (pieces), piece p's bytes being at
  // start(p), on the read's workers.
  auto verify_runs = [&](const std::vector<size_t>& checked, auto start) -> Status {
    struct Check {
      size_t piece;
      const staging::RunChunk* chunk;
    };
    std::vector<Check> checks;
    for (size_t p : checked) {
      for (const staging::RunChunk& c : runs[p]->chunks) checks.push_back({p, &c});
    }
    return parallel_for(
        pool_for(direct_threads), checks.size(), direct_threads, [&](size_t i) -> Status {
          const size_t p = checks[i].piece;
          const ChunkInfo& c = checks[i].chunk->info;
          const std::byte* stored = start(p) + (c.file_offset - runs[p]->offset);
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
    std::vector<size_t> checked;
    for (const staging::DirectRead& d : batch.direct) checked.push_back(d.piece);
    return verify_runs(checked, [&](size_t p) { return base + batch.offsets[p - batch.first]; });
  };

  // Queues the copies of pieces [first, last) of batch b, piece p's bytes being at src(p),
  // on the slot's stream; nothing when another filler failed meanwhile (the load returns its
  // error).
  auto queue_copies = [&](size_t b, StagingRing::Slot& slot, size_t first, size_t last,
                          auto src) -> Status {
    if (stop.load(std::memory_order_relaxed)) return Status::success();
    slot.batch = b;
    for (size_t p = first; p < last; ++p) {
      const Piece& piece = pieces[p];
      std::byte* dst = static_cast<std::byte*>(requests[piece.request].dst) + piece.dst_offset;
      slot.pending = true;
      Status st = engine.copy_async(dst, src(p), piece.bytes, slot.stream);
      if (!st.ok()) return st.with_prefix(where(b));
    }
    return Status::success();
  };

  // Queues the copies of a mapped batch's parts, part k's bytes being at src(k, offset in
  // the part) for its bytes [offset, offset + n): from the mapping, or (staged after all)
  // from the slot's buffer, `step` bytes at a time, each step filled by fill_step(k, offset,
  // n) once the slot's previous copies are done.
  auto copy_parts = [&](size_t b, StagingRing::Slot& slot, uint64_t step, auto fill_step,
                        auto src) -> Status {
    const Batch& batch = batches[b];
    for (size_t k = 0; k < batch.parts.size(); ++k) {
      const staging::MappedPart& part = batch.parts[k];
      const Piece& piece = pieces[part.piece];
      std::byte* dst = static_cast<std::byte*>(requests[piece.request].dst) + piece.dst_offset +
                       part.dst_offset;
      for (uint64_t at = 0; at < part.bytes; at += step) {
        const uint64_t n = std::min(step, part.bytes - at);
        JTREE_RETURN_IF_ERROR(fill_step(k, at, n));
        if (stop.load(std::memory_order_relaxed)) return Status::success();
        slot.batch = b;
        slot.pending = true;
        Status st = engine.copy_async(dst + at, src(k, at), n, slot.stream);
        if (!st.ok()) return st.with_prefix(where(b));
      }
    }
    return Status::success();
  };

  // A zero-copy batch: its file pages registered, its parts copied from the mapping, the
  // chunks of its pieces verified meanwhile (hashed from the mapping). The registration ends
  // when the slot is next settled. Where registering fails (kAuto) the parts are staged
  // instead, through the slot's buffer (memcpy from the mapping: the bytes are the file's).
  auto fill_mapped = [&](size_t b) -> Status {
    const Batch& batch = batches[b];
    const size_t si = b % num_slots;
    const std::byte* const map = zero_copy.map.data();
    if (Status st = ring.ensure(si, 0); !st.ok()) return st.with_prefix(leaves_of(b));
    StagingRing::Slot& slot = ring.slot(si);
    if (Status st = ring.settle(si); !st.ok()) return st.with_prefix(where(slot.batch));
    Status reg = zero_copy_refused.load()
                     ? Status::not_supported("")
                     : engine.register_host(map + batch.map_begin, batch.map_end - batch.map_begin);
    if (reg.ok()) {
      slot.registered = map + batch.map_begin;
      JTREE_RETURN_IF_ERROR(copy_parts(
          b, slot, UINT64_MAX, [](size_t, uint64_t, uint64_t) { return Status::success(); },
          [&](size_t k, uint64_t at) { return map + batch.parts[k].file_offset + at; }));
      // (Another filler failed meanwhile: nothing more was queued, nothing is counted.)
      if (stop.load(std::memory_order_relaxed)) return Status::success();
      zero_copy_bytes.fetch_add(batch.bytes);
    } else {
      if (!zero_copy_refused.load() || options.zero_copy == ZeroCopy::kOn) {
        const std::string what = "zero copy: registering file bytes [" +
                                 std::to_string(batch.map_begin) + ", " +
                                 std::to_string(batch.map_end) + "): " + reg.message();
        if (options.zero_copy == ZeroCopy::kOn) {
          return Status(reg.code(), reader.name() + ": " + what);
        }
        if (!zero_copy_refused.exchange(true)) {
          std::lock_guard<std::mutex> lock(note_mu);
          zc_note = "zero copy stopped mid-load (the rest was staged): " + what;
        }
      }
      if (Status st = ring.ensure(si, buffer_bytes); !st.ok()) {
        return st.with_prefix(leaves_of(b));
      }
      std::byte* const base = slot.buffer.data();
      JTREE_RETURN_IF_ERROR(copy_parts(
          b, slot, buffer_bytes,
          [&](size_t k, uint64_t at, uint64_t n) -> Status {
            if (Status st = ring.settle(si); !st.ok()) return st.with_prefix(where(slot.batch));
            std::memcpy(base, map + batch.parts[k].file_offset + at, n);
            return Status::success();
          },
          [&](size_t, uint64_t) -> const std::byte* { return base; }));
      if (stop.load(std::memory_order_relaxed)) return Status::success();
      buffered_bytes.fetch_add(batch.bytes);
    }
    if (!ro.verify_checksums) return Status::success();
    return verify_runs(batch.verified, [&](size_t p) { return map + file_offsets[p]; });
  };

  // Fills one buffer load and queues its copies; the slot is this thread's alone meanwhile.
  auto fill = [&](size_t b, std::vector<ReadRequest>& reads) -> Status {
    const Batch& batch = batches[b];
    if (batch.mapped) return fill_mapped(b);
    if (Status st = ring.ensure(b % num_slots, buffer_bytes); !st.ok()) {
      return st.with_prefix(leaves_of(b));
    }
    StagingRing::Slot& slot = ring.slot(b % num_slots);
    // Backpressure: the buffer is refilled only once its previous copies have completed.
    if (Status st = ring.settle(b % num_slots); !st.ok()) {
      return st.with_prefix(where(slot.batch));
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
    return queue_copies(b, slot, batch.first, batch.last,
                        [&](size_t p) { return base + batch.offsets[p - batch.first]; });
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
      // (An exception, std::bad_alloc say, fails the load: on a helper it would end the process.)
      Status st = guarded([&] { return fill(b, reads); }, [&] { return leaves_of(b); });
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
  // Zero copy fills every slot at once too: registering pages is the kernel's work per page,
  // which several threads share.
  const size_t fillers =
      direct.on || zero_copy.on ? num_slots : std::min(kFillers, num_slots);
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
    if (Status st = ring.settle(i); !st.ok()) return st.with_prefix(where(slot.batch));
  }
  return Status::success();
}

}  // namespace jtree
