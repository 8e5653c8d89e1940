// The staging pipeline of jtree/device.h: leaves read and decoded into a ring of pinned
// buffers, each copied on its own stream while the next ones are filled.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "cuda/staging_plan.h"
#include "read/check_request.h"
#include "jtree/device.h"

namespace jtree {

CopyEngine::~CopyEngine() = default;

namespace {

// Smallest staging buffer accepted: smaller ones would make a call per few elements.
constexpr uint64_t kMinBufferBytes = 4096;

// Checks a request against the file (check_request, as host reads do: the destination has
// the slice's exact size) and resolves its box. Errors name the file and the leaf.
Result<Box> check_device_request(const Reader& r, const DeviceRequest& req) {
  JTREE_ASSIGN_OR_RETURN(Box box, check_request(r, req.leaf, req.box, req.dst_bytes,
                                                "device destination"));
  if (req.dst_bytes > 0 && req.dst == nullptr) {
    return Status::InvalidArgument(r.name() + ": leaf " + r.leaf_path(req.leaf) +
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

  explicit StagingRing(CopyEngine& engine) : engine_(engine) {}
  StagingRing(const StagingRing&) = delete;
  StagingRing& operator=(const StagingRing&) = delete;
  ~StagingRing() {
    for (Slot& s : slots_) {
      if (s.pending) (void)engine_.sync(s.stream);  // (the load already failed: its error wins)
      if (s.has_stream) engine_.destroy_stream(s.stream);
      if (!s.buffer.empty()) engine_.free_pinned(s.buffer);
    }
  }

  Status add(uint64_t bytes) {
    Slot& s = slots_.emplace_back();
    JTREE_ASSIGN_OR_RETURN(s.buffer, engine_.allocate_pinned(bytes));
    if (s.buffer.size() < bytes) {
      return Status::IOError(engine_.name() + ": pinned buffer of " +
                             std::to_string(s.buffer.size()) + " bytes; asked for " +
                             std::to_string(bytes));
    }
    JTREE_ASSIGN_OR_RETURN(s.stream, engine_.create_stream());
    s.has_stream = true;
    return Status::OK();
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
  if (options.staging_buffers < 1 || options.staging_buffers > 64) {
    return Status::InvalidArgument("jtree: staging_buffers is " +
                                   std::to_string(options.staging_buffers) +
                                   "; it must be from 1 to 64");
  }
  const uint64_t per_buffer = options.staging_bytes / options.staging_buffers;
  if (per_buffer < kMinBufferBytes) {
    return Status::InvalidArgument("jtree: staging_bytes " + std::to_string(options.staging_bytes) +
                                   " over " + std::to_string(options.staging_buffers) +
                                   " buffers is below the minimum of " +
                                   std::to_string(kMinBufferBytes) + " bytes per buffer");
  }
  std::vector<Box> boxes;
  boxes.reserve(requests.size());
  uint64_t total = 0, largest = 0;
  for (const DeviceRequest& req : requests) {
    JTREE_ASSIGN_OR_RETURN(Box b, check_device_request(reader, req));
    total += req.dst_bytes;
    largest = std::max(largest, req.dst_bytes);
    boxes.push_back(std::move(b));
  }
  if (total == 0) return Status::OK();

  // No buffer larger than the largest request: a small load pins little.
  const uint64_t buffer_bytes = std::min(per_buffer, staging::round_up_64(largest));
  std::vector<Piece> pieces;
  for (size_t i = 0; i < requests.size(); ++i) {
    const Leaf& leaf = reader.leaf(requests[i].leaf);
    staging::cut_box(static_cast<uint32_t>(i), boxes[i], leaf.chunk_shape,
                     memory_bytes(leaf.dtype, 1), buffer_bytes, pieces);
  }
  const std::vector<Batch> batches = staging::pack_pieces(pieces, buffer_bytes);
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

  StagingRing ring(engine);
  for (size_t i = 0; i < num_slots; ++i) JTREE_RETURN_IF_ERROR(ring.add(buffer_bytes));

  ReadOptions ro = options.read;
  ro.progress = nullptr;  // (progress is reported per buffer, below)

  // Buffer loads are claimed in order by kFillers threads (the caller and a helper), so that
  // one buffer is read while another's read finishes its last chunks: each read_many ends
  // with its slowest chunk, and a second filler keeps the workers busy meanwhile. Batch b uses
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

  // Fills one buffer load and queues its copies; the slot is this thread's alone meanwhile.
  auto fill = [&](size_t b, std::vector<ReadRequest>& reads) -> Status {
    const Batch& batch = batches[b];
    StagingRing::Slot& slot = ring.slot(b % num_slots);
    // Backpressure: the buffer is refilled only once its previous copies have completed.
    if (slot.pending) {
      slot.pending = false;
      Status st = engine.sync(slot.stream);
      if (!st.ok()) return st.WithPrefix(where(slot.batch));
    }
    reads.clear();
    for (size_t p = batch.first; p < batch.last; ++p) {
      const Piece& piece = pieces[p];
      reads.push_back({requests[piece.request].leaf, piece.box,
                       slot.buffer.subspan(batch.offsets[p - batch.first], piece.bytes)});
    }
    JTREE_RETURN_IF_ERROR(reader.read_many(reads, ro));
    // Another filler failed meanwhile: queue nothing more (the load returns its error).
    if (stop.load(std::memory_order_relaxed)) return Status::OK();
    slot.batch = b;
    for (size_t p = batch.first; p < batch.last; ++p) {
      const Piece& piece = pieces[p];
      std::byte* dst = static_cast<std::byte*>(requests[piece.request].dst) + piece.dst_offset;
      slot.pending = true;
      Status st = engine.copy_async(dst, slot.buffer.data() + batch.offsets[p - batch.first],
                                    piece.bytes, slot.stream);
      if (!st.ok()) return st.WithPrefix(where(b));
    }
    return Status::OK();
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
          st = Status::Aborted(reader.name() + ": load to " + engine.name() + " cancelled");
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

  constexpr size_t kFillers = 2;
  std::vector<std::thread> helpers;
  try {
    for (size_t i = 1; i < std::min(kFillers, num_slots); ++i) helpers.emplace_back(filler);
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
    if (!st.ok()) return st.WithPrefix(where(slot.batch));
  }
  return Status::OK();
}

}  // namespace jtree
