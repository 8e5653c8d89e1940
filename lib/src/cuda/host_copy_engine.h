// A CopyEngine whose "device" is host memory: the staging pipeline's stand-in where there is
// no GPU (the unit tests). Its pinned buffers are page-aligned, like cudaHostAlloc's. Streams are worker threads copying in order, so copies really run
// asynchronously; it can slow every copy down and inject failures, and it records what the
// pipeline did: pinned bytes (now and at the peak), bytes queued but not copied (peak),
// registered host memory (zero copy), and any misuse (a pinned buffer changed or freed, or a
// registration ended, while a copy from it was queued; a copy from memory neither pinned nor
// registered).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "jtree/device.h"

namespace jtree::staging {

class HostCopyEngine final : public CopyEngine {
 public:
  struct Options {
    /// Each copy takes at least this long (a slow device).
    uint64_t copy_delay_us = 0;
    /// copy_async call number N (from 0) fails at once with IOError; -1: none.
    int64_t fail_copy_at = -1;
    /// Copy number N fails when it runs: the error comes out of the next sync() of its stream
    /// (as CUDA reports failed asynchronous copies); -1: none.
    int64_t fail_async_at = -1;
    /// allocate_pinned fails (ResourceExhausted) past this many pinned bytes in all.
    uint64_t max_pinned_bytes = UINT64_MAX;
    /// allocate_pinned call number N (from 0) throws std::bad_alloc, as the standard library
    /// does on a worker thread short of memory; -1: none.
    int64_t throw_allocation_at = -1;
    /// register_host works (else NotSupported, as CopyEngine's default).
    bool can_register = true;
    /// register_host call number N (from 0) fails with IOError; -1: none.
    int64_t fail_register_at = -1;
  };
  /// What happened, for the tests' assertions.
  struct Stats {
    uint64_t pinned_bytes = 0;       ///< allocated now
    uint64_t peak_pinned_bytes = 0;
    uint64_t allocations = 0, frees = 0;
    uint64_t streams_created = 0, streams_destroyed = 0;
    uint64_t copies_issued = 0, copies_done = 0;
    uint64_t syncs = 0;              ///< sync() calls (a load syncs a buffer before refilling it)
    uint64_t bytes_copied = 0;
    uint64_t peak_queued_bytes = 0;  ///< bytes queued but not yet copied, at the peak
    uint64_t misuses = 0;            ///< buffers changed/freed under a queued copy, bad handles
    uint64_t registrations = 0, unregistrations = 0;  ///< register_host / unregister_host calls
    uint64_t registered_bytes = 0;   ///< registered now
    uint64_t peak_registered_bytes = 0;
  };

  HostCopyEngine();
  explicit HostCopyEngine(Options options);
  ~HostCopyEngine() override;

  std::string name() const override { return "host stand-in"; }
  Result<std::span<std::byte>> allocate_pinned(size_t bytes) override;
  void free_pinned(std::span<std::byte> buffer) override;
  Result<int> create_stream() override;
  void destroy_stream(int stream) override;
  Status copy_async(void* dst, const std::byte* src, size_t bytes, int stream) override;
  Status sync(int stream) override;
  Status register_host(const std::byte* p, size_t bytes) override;
  void unregister_host(const std::byte* p) override;

  Stats stats() const;

 private:
  struct Copy {
    void* dst;
    const std::byte* src;
    size_t bytes;
    uint64_t hash;  // of the source when queued: it must not change before the copy runs
    bool fail;
  };
  struct Stream {
    std::deque<Copy> queue;
    bool busy = false;  // a copy taken off the queue is running...
    const std::byte* running_src = nullptr;  // ...from these bytes
    size_t running_bytes = 0;
    bool stop = false;
    Status error;       // a failed copy, until the next sync
    std::thread worker;
  };
  void run(Stream* s);
  bool pending_from(const std::byte* begin, const std::byte* end) const;  // mu_ held
  bool copyable_from(const std::byte* begin, size_t bytes) const;         // mu_ held

  Options options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<int, std::unique_ptr<Stream>> streams_;
  std::map<const std::byte*, size_t> buffers_;
  std::map<const std::byte*, size_t> registered_;  // register_host's ranges
  uint64_t register_calls_ = 0;
  uint64_t allocate_calls_ = 0;
  int next_stream_ = 0;
  uint64_t queued_bytes_ = 0;
  Stats stats_;
};

}  // namespace jtree::staging
