// The plan of a load to a device: requests checked, O_DIRECT and zero copy decided, buffers
// sized, requests cut into pieces and the pieces packed into batches (staged_load_plan.h).
#include "cuda/staged_load_plan.h"

#include <algorithm>
#include <functional>
#include <numeric>

#include <unistd.h>

#include "read/check_request.h"

namespace jtree::staging {

void StagingReport::write_to(DeviceStats* stats) const {
  if (stats == nullptr) return;
  stats->direct_bytes = direct_bytes.load();
  stats->buffered_bytes = buffered_bytes.load();
  stats->direct_io_note = direct_io_note;
  stats->zero_copy_bytes = zero_copy_bytes.load();
  stats->zero_copy_note = zero_copy_note;
}

Result<CheckedRequests> check_device_requests(const Reader& reader,
                                              std::span<const DeviceRequest> requests) {
  CheckedRequests out;
  out.boxes.reserve(requests.size());
  for (const DeviceRequest& req : requests) {
    JTREE_ASSIGN_OR_RETURN(Box box, check_request(reader, req.leaf, req.box, req.dst_bytes,
                                                  "device destination"));
    if (req.dst_bytes > 0 && req.dst == nullptr) {
      return Status::invalid_argument(reader.name() + ": leaf " + reader.leaf_path(req.leaf) +
                                      ": null device destination");
    }
    out.total += req.dst_bytes;
    out.packed += round_up_64(req.dst_bytes);
    out.largest = std::max(out.largest, req.dst_bytes);
    out.boxes.push_back(std::move(box));
  }
  return out;
}

namespace {

// "37%" of a share in [0, 1], for the notes.
std::string percent(double share) {
  return std::to_string(static_cast<int>(share * 100 + 0.5)) + "%";
}

// The share of the pages a load reads that are in the page cache, asked at most once per load
// (both decisions below may want it), about those pages only (load_extents): never the whole
// file, whose size must not make a small load slow.
class CachedShare {
 public:
  CachedShare(const Reader& reader, std::span<const DeviceRequest> requests,
              std::span<const Box> boxes)
      : reader_(reader), requests_(requests), boxes_(boxes) {}
  std::optional<double> get() {
    if (!asked_) cached_ = io::cached_fraction(*reader_.source(),
                                               load_extents(reader_, requests_, boxes_));
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

// Decides whether a load may use O_DIRECT, with buffers of `per_buffer` bytes; why not goes to
// `note`. Errors only for DirectIo::kOn where it cannot.
Result<DirectPlan> plan_direct(const Reader& r, const DeviceOptions& o, uint64_t per_buffer,
                               CachedShare& share, std::string& note) {
  DirectPlan p;
  if (o.direct_io == DirectIo::kOff) {
    note = "direct_io is Off";
    return p;
  }
  p.support = io::direct_read_support(*r.source());
  if (p.support.available && o.direct_io == DirectIo::kAuto) {
    const std::optional<double> cached = share.get();
    if (cached && *cached >= io::kCachedEnough) {
      note = "no O_DIRECT: the file is in the page cache (" + percent(*cached) +
             " of its pages): buffered reads are faster";
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

// Why zero copy cannot serve this load (empty: it can, so far): it needs a local file that can
// be mapped (its mapping made here into `p`), no forced O_DIRECT and, for kAuto, a file
// mostly in the page cache.
std::string why_no_zero_copy(const Reader& r, const DeviceOptions& o, CachedShare& share,
                             ZeroCopyPlan& p) {
  if (o.direct_io == DirectIo::kOn) return "direct_io is On";
  p.mapping = io::map_shared_read_only(*r.source());
  if (p.mapping == nullptr) {
    return "not a local file that can be mapped (remote, in memory, or mmap failed)";
  }
  if (o.zero_copy != ZeroCopy::kAuto) return "";
  const std::optional<double> cached = share.get();
  if (!cached) return "the share of the file in the page cache is unknown";
  if (*cached < io::kCachedEnough) {
    return "the file is not in the page cache (" + percent(*cached) +
           " of its pages): registering would read it from the disk";
  }
  return "";
}

// Decides whether a load copies raw chunks straight from the file's pages: where
// why_no_zero_copy finds nothing against it, the engine is asked to register the mapping's
// first page (and releases it) before any plan depends on it. Why not goes to `note`. Errors
// only for ZeroCopy::kOn where it cannot.
Result<ZeroCopyPlan> plan_zero_copy(const Reader& r, const DeviceOptions& o, CopyEngine& engine,
                                    CachedShare& share, std::string& note) {
  ZeroCopyPlan p;
  if (o.zero_copy == ZeroCopy::kOff) return p;
  const long page = ::sysconf(_SC_PAGESIZE);
  p.page = page > 0 ? static_cast<uint64_t>(page) : 4096;
  std::string why = why_no_zero_copy(r, o, share, p);
  if (why.empty()) {
    p.map = p.mapping->bytes();
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

// The size of each staging buffer. A small load pins little: no buffer is larger than the
// largest request, or than the load's share of each buffer (its bytes over the buffers),
// whichever is larger (the largest request alone would cut a load of many tiny leaves into
// one buffer load per leaf, each with its read, copies and stream sync: docs/gpu.md). The
// alignment slack of O_DIRECT reads comes on top, up to per_buffer.
uint64_t staging_buffer_bytes(const CheckedRequests& checked, uint64_t per_buffer,
                              int staging_buffers, uint64_t slack) {
  const uint64_t buffers = static_cast<uint64_t>(staging_buffers);
  const uint64_t share = round_up_64((checked.packed + buffers - 1) / buffers);
  return std::min(per_buffer, std::max(round_up_64(checked.largest), share) + slack);
}

// Whether a leaf's chunks are stored raw, whole elements each: the only ones O_DIRECT reads
// and zero copy copies as they are in the file.
bool has_raw_chunks(const Leaf& leaf) {
  return leaf.storage == Storage::kChunked && leaf.codec == Codec::kRaw && !is_4bit(leaf.dtype);
}

// Cuts every request into pieces of at most the buffer's size. With O_DIRECT, the pieces of
// raw-chunk leaves are cut smaller by the alignment slack their reads may need (the others
// keep whole buffers: cut the same way, their chunks would no longer land whole in one piece).
// Zero copy needs no buffer for a run of whole chunks (nor slack: its pieces are copied from
// wherever they are in the file): a chunk larger than a buffer stays whole, where cut to the
// buffer it would be staged (split_into_file_runs cuts those that are no run after all).
std::vector<Piece> cut_requests(const Reader& reader, std::span<const DeviceRequest> requests,
                                const StagedLoadPlan& plan) {
  std::vector<Piece> pieces;
  const uint64_t slack = plan.direct.slack();
  for (size_t i = 0; i < requests.size(); ++i) {
    const Leaf& leaf = reader.leaf(requests[i].leaf);
    const bool raw_chunks = has_raw_chunks(leaf);
    uint64_t max_piece = plan.buffer_bytes - (plan.direct.on && raw_chunks ? slack : 0);
    if (plan.zero_copy.on && raw_chunks) {
      // (A rectilinear grid has no chunk_shape: its product, 1, changes nothing.)
      const uint64_t chunk = std::accumulate(leaf.chunk_shape.begin(), leaf.chunk_shape.end(),
                                             uint64_t{1}, std::multiplies<>());
      max_piece = std::max(max_piece, memory_bytes(leaf.dtype, chunk));
    }
    cut_box(static_cast<uint32_t>(i), plan.boxes[i], leaf.chunk_shape,
            memory_bytes(leaf.dtype, 1), max_piece, pieces);
  }
  return pieces;
}

// Collects the pieces of a load with O_DIRECT or zero copy, each with its file run or none,
// into the plan's pieces, runs and file_offsets.
class FileRunCollector {
 public:
  FileRunCollector(const Reader& reader, std::span<const DeviceRequest> requests,
                   StagedLoadPlan& plan)
      : reader_(reader), requests_(requests), plan_(plan) {}

  // Adds a piece with its run. A piece without one that is larger than a buffer (cut whole
  // for zero copy) is staged, so it is cut to fit a buffer; each part's bytes are contiguous
  // in the piece's, as the piece's are in its request's.
  void add(Piece&& piece, std::optional<FileRun>&& run) {
    if (!run && piece.bytes > plan_.buffer_bytes) {
      const Leaf& leaf = reader_.leaf(requests_[piece.request].leaf);
      std::vector<Piece> parts;
      cut_box(piece.request, piece.box, leaf.chunk_shape, memory_bytes(leaf.dtype, 1),
              plan_.buffer_bytes, parts);
      for (Piece& part : parts) {
        part.dst_offset += piece.dst_offset;
        push(std::move(part), std::nullopt);
      }
      return;
    }
    push(std::move(piece), std::move(run));
  }

 private:
  void push(Piece&& piece, std::optional<FileRun>&& run) {
    plan_.file_offsets.push_back(run ? run->offset : kNoFileRun);
    plan_.runs.push_back(std::move(run));
    plan_.pieces.push_back(std::move(piece));
  }

  const Reader& reader_;
  std::span<const DeviceRequest> requests_;
  StagedLoadPlan& plan_;
};

// Gives the plan its pieces with their file runs (the pieces read with O_DIRECT or copied with
// zero copy; none where a piece is not one). A piece of whole chunks that padding separates in
// the file is cut into one piece per chunk. O_DIRECT leaves pieces under kMinDirectBytes to
// buffered reads, for the alignment slack; zero copy has none.
void split_into_file_runs(const Reader& reader, std::span<const DeviceRequest> requests,
                          std::vector<Piece>&& pieces, StagedLoadPlan& plan) {
  const uint64_t min_run_bytes = plan.zero_copy.on ? 1 : kMinDirectBytes;
  plan.pieces.reserve(pieces.size());
  FileRunCollector out(reader, requests, plan);
  for (Piece& piece : pieces) {
    const uint32_t leaf = requests[piece.request].leaf;
    if (piece.bytes < min_run_bytes) {
      out.add(std::move(piece), std::nullopt);
      continue;
    }
    auto run = piece_file_run(reader, leaf, piece.box, piece.bytes);
    if (run) {
      out.add(std::move(piece), std::move(run));
      continue;
    }
    std::vector<Piece> parts = split_at_chunks(reader, leaf, piece);
    if (parts.empty() || piece.bytes / parts.size() < min_run_bytes) {
      out.add(std::move(piece), std::nullopt);
      continue;
    }
    for (Piece& part : parts) {
      auto part_run = piece_file_run(reader, leaf, part.box, part.bytes);
      if (part.bytes < min_run_bytes) part_run.reset();
      out.add(std::move(part), std::move(part_run));
    }
  }
}

// Packs the plan's pieces into batches, the way the plan reads them: mapped (zero copy),
// with O_DIRECT reads, or all through Reader::read_many.
std::vector<Batch> pack_batches(const StagedLoadPlan& plan) {
  if (plan.zero_copy.on) {
    return pack_pieces_mapped(plan.pieces, plan.file_offsets, plan.buffer_bytes, plan.per_buffer,
                              plan.zero_copy.page, plan.zero_copy.map.size());
  }
  if (plan.direct.on) {
    return pack_pieces_direct(plan.pieces, plan.file_offsets, plan.buffer_bytes,
                              plan.direct.support.offset_align, plan.direct.support.memory_align);
  }
  return pack_pieces(plan.pieces, plan.buffer_bytes);
}

// Marks the pieces the batches read with O_DIRECT.
std::vector<char> direct_pieces(const StagedLoadPlan& plan) {
  std::vector<char> is_direct(plan.pieces.size(), 0);
  for (const Batch& b : plan.batches) {
    for (const DirectRead& d : b.direct) is_direct[d.piece] = 1;
  }
  return is_direct;
}

// Notes why O_DIRECT or zero copy, though on, serves no piece of the plan.
void note_unserved_paths(const StagedLoadPlan& plan, StagingReport& report) {
  if (plan.zero_copy.on && std::none_of(plan.batches.begin(), plan.batches.end(),
                                        [](const Batch& b) { return b.mapped; })) {
    report.zero_copy_note =
        "no zero copy: no piece is a run of whole raw chunks (compressed, or slices of chunks)";
  }
  if (plan.direct.on &&
      std::find(plan.is_direct.begin(), plan.is_direct.end(), 1) == plan.is_direct.end()) {
    report.direct_io_note = "no piece is a run of whole raw chunks of at least " +
                            std::to_string(kMinDirectBytes) +
                            " bytes (compressed, or slices of chunks)";
  }
}

}  // namespace

Result<StagedLoadPlan> plan_staged_load(const Reader& reader,
                                        std::span<const DeviceRequest> requests,
                                        CheckedRequests checked, CopyEngine& engine,
                                        const DeviceOptions& options, StagingReport& report) {
  StagedLoadPlan plan;
  plan.total = checked.total;
  plan.per_buffer = options.staging_bytes / options.staging_buffers;
  CachedShare cached_share(reader, requests, checked.boxes);
  JTREE_ASSIGN_OR_RETURN(plan.zero_copy, plan_zero_copy(reader, options, engine, cached_share,
                                                        report.zero_copy_note));
  if (plan.zero_copy.on) {
    report.direct_io_note = "no O_DIRECT: zero copy serves the raw chunks";
  } else {
    JTREE_ASSIGN_OR_RETURN(plan.direct, plan_direct(reader, options, plan.per_buffer,
                                                    cached_share, report.direct_io_note));
  }
  plan.buffer_bytes = staging_buffer_bytes(checked, plan.per_buffer, options.staging_buffers,
                                           plan.direct.slack());
  plan.boxes = std::move(checked.boxes);
  std::vector<Piece> pieces = cut_requests(reader, requests, plan);
  if (plan.direct.on || plan.zero_copy.on) {
    split_into_file_runs(reader, requests, std::move(pieces), plan);
  } else {
    plan.pieces = std::move(pieces);
  }
  plan.batches = pack_batches(plan);
  plan.is_direct = direct_pieces(plan);
  note_unserved_paths(plan, report);
  plan.num_slots = std::min<size_t>(options.staging_buffers, plan.batches.size());
  return plan;
}

}  // namespace jtree::staging
