// The plan of one load to a device (read_many_staged, jtree/device.h): which requests it has,
// whether it reads raw chunks with O_DIRECT or copies them straight from the file's pages
// (zero copy), how large its staging buffers are, and the batches ("buffer loads") of pieces
// that fill them. Made once, before anything is read; the execution (staged_load.h) only
// follows it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cuda/direct_plan.h"
#include "cuda/staging_plan.h"
#include "io/direct_read.h"
#include "jtree/device.h"

namespace jtree::staging {

/// What a load did, for DeviceOptions::stats: counted by the execution's threads, noted by the
/// plan and (when O_DIRECT or zero copy stops mid-load) by those threads. Written to the
/// caller's DeviceStats however the load ends (`write_to`).
struct StagingReport {
  std::atomic<uint64_t> direct_bytes{0}, buffered_bytes{0}, zero_copy_bytes{0};
  std::mutex note_mu;  // guards the notes once the execution's threads run
  std::string direct_io_note, zero_copy_note;

  /// Sets a note under note_mu (the execution's threads share it).
  void set_note(std::string& note, std::string text) {
    std::lock_guard<std::mutex> lock(note_mu);
    note = std::move(text);
  }
  /// Copies everything into `stats` (nothing when null).
  void write_to(DeviceStats* stats) const;
};

/// The requests of a load, checked against the file, with their boxes and sizes.
struct CheckedRequests {
  std::vector<Box> boxes;  ///< request i's resolved box
  uint64_t total = 0;      ///< destination bytes of all requests
  uint64_t largest = 0;    ///< the largest request's bytes
  uint64_t packed = 0;     ///< bytes of all requests, each rounded up to 64 (their buffer space)
};

/// Checks every request as host reads do (check_request: the destination has the slice's
/// exact size; a non-empty destination is not null) and resolves its box. Errors name the
/// file and the leaf.
Result<CheckedRequests> check_device_requests(const Reader& reader,
                                              std::span<const DeviceRequest> requests);

/// Whether a load reads raw chunks with O_DIRECT, decided once before its buffers are planned.
struct DirectPlan {
  bool on = false;
  io::DirectReadSupport support;
  /// Alignment slack a piece may need in its buffer: up to offset_align - 1 before it and after
  /// it (rounded to whole blocks), and the buffer's own start rounded up to memory_align.
  uint64_t slack() const { return on ? 2 * support.offset_align + support.memory_align : 0; }
};

/// Whether a load copies raw chunks straight from the file's pages (DeviceOptions::zero_copy),
/// decided once before it is planned.
struct ZeroCopyPlan {
  bool on = false;
  std::shared_ptr<const MappedFile> mapping;  ///< the whole file, shared and read-only
  std::span<const std::byte> map;             ///< its bytes
  uint64_t page = 4096;
};

/// Pieces smaller than this are read buffered even where O_DIRECT works: the alignment slack
/// would be a large part of the read, and the page cache costs little for them.
inline constexpr uint64_t kMinDirectBytes = 32 << 10;

/// The whole plan of a load with at least one byte to carry.
struct StagedLoadPlan {
  std::vector<Box> boxes;  ///< request i's resolved box
  uint64_t total = 0;      ///< destination bytes of all requests (for progress)
  uint64_t per_buffer = 0;    ///< the most one buffer may pin (staging_bytes / staging_buffers)
  uint64_t buffer_bytes = 0;  ///< the size each staging buffer gets (at most per_buffer)
  DirectPlan direct;
  ZeroCopyPlan zero_copy;
  /// The pieces, in the order the batches take them.
  std::vector<Piece> pieces;
  /// Piece i's file run (whole raw chunks read with O_DIRECT or copied with zero copy), or
  /// none; and its file offset (kNoFileRun without one). Both empty when neither is on.
  std::vector<std::optional<FileRun>> runs;
  std::vector<uint64_t> file_offsets;
  std::vector<Batch> batches;
  std::vector<char> is_direct;  ///< piece i is read with O_DIRECT (a DirectRead of a batch)
  /// Slots of the staging ring: at most one per batch.
  size_t num_slots = 0;
};

/// Plans a load of `requests` (checked: `checked`, with total > 0) through `engine`: decides
/// zero copy and O_DIRECT (their notes into `report`), sizes the buffers, cuts the requests
/// into pieces and packs those into batches. Errors only where DeviceOptions asks for
/// O_DIRECT or zero copy (kOn) and it cannot be had.
Result<StagedLoadPlan> plan_staged_load(const Reader& reader,
                                        std::span<const DeviceRequest> requests,
                                        CheckedRequests checked, CopyEngine& engine,
                                        const DeviceOptions& options, StagingReport& report);

}  // namespace jtree::staging
