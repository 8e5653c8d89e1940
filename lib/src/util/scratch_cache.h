// Scratch buffers of the read and write workers: a set is taken for one unit of work (a
// fetch unit, a chunk) and given back after it, and the sets given back are kept between
// calls up to a bound on what the process keeps.
//
// Why not a set per thread (thread_local, as before 2026-11-29): a worker's set lived as long
// as its thread and the pools' threads live as long as the process, so every worker that
// ever decoded a chunk kept a chunk's worth of buffers for good (fetched bytes, decoded
// planes, the decoded chunk: ~4.5-11 MiB for 4 MiB bf16 chunks). A load on 64 workers (a
// 64-core host's default, or threads=64) kept 157 MiB after its 128 MiB array was freed
// (bench/README.md, "Memory kept after a load"). Why not a new set for every chunk: faulting a
// chunk's worth of fresh pages in costs about as much as decoding it (~1.7 us per 4 KiB page
// on a VM), so sets are reused within a call and kept for the next one, up to kKeptBytes.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <iterator>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "jtree/options.h"
#include "util/per_process.h"
#include "util/scratch_bytes.h"

namespace jtree {

namespace scratch_registry {
/// Records a cache of process `owner` for release_scratch_memory (jtree/options.h), which
/// calls `release(cache)` on every cache of the calling process. Called once per cache.
void add(pid_t owner, size_t (*release)(void*), void* cache);
}  // namespace scratch_registry

/// The process's cache of scratch sets of type `Set`: a struct of ScratchBytes with
/// `size_t bytes() const`, the capacity of its buffers together. Thread-safe.
template <class Set>
class ScratchCache {
 public:
  /// What the cache keeps once no call holds a Use: the most recently given back sets, up to
  /// this many bytes together (a set larger than this alone is not kept).
  static constexpr size_t kKeptBytes = kScratchKeptBytes;

  /// The cache of this process. A child of fork() gets its own, as it does its own thread
  /// pools (util/per_process.h): the parent's may have been locked by a thread that does
  /// not exist in the child. Never destroyed (workers may give sets back during exit).
  static ScratchCache& shared() {
    static PerProcess<ScratchCache> cache;
    return cache.get([] { return std::unique_ptr<ScratchCache>(new ScratchCache); },
                     [](ScratchCache& c) {
                       scratch_registry::add(::getpid(), &ScratchCache::release_of, &c);
                     });
  }

  /// A set taken for one unit of work: the one this thread gave back last, if it is kept (its
  /// memory is near this thread's core: in its caches, on its NUMA node, as a thread_local
  /// set was), else the most recently given back, else a new, empty one. Given back on
  /// destruction.
  class Lease {
   public:
    explicit Lease(ScratchCache& cache) : cache_(&cache), set_(cache.take_set()) {}
    ~Lease() {
      if (set_) cache_->give_back(std::move(set_));
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Set& operator*() { return *set_; }
    Set* operator->() { return set_.get(); }

   private:
    ScratchCache* cache_;
    std::unique_ptr<Set> set_;
  };

  /// Held by a call for its duration. While any call holds one, every set given back is kept,
  /// so that the call's workers reuse their sets from one unit to the next however many
  /// there are; when the last Use ends, the oldest sets are freed until the cache keeps at
  /// most kKeptBytes. (Without a Use, a set given back is trimmed at once.)
  class Use {
   public:
    explicit Use(ScratchCache& cache) : cache_(&cache) { cache.begin_use(); }
    ~Use() { cache_->end_use(); }
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;

   private:
    ScratchCache* cache_;
  };

  /// Bytes and sets kept now (not counting sets taken); sets made since the process began.
  size_t kept_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return kept_;
  }
  size_t kept_sets() const {
    std::lock_guard<std::mutex> lock(mu_);
    return free_.size();
  }
  size_t sets_made() const { return made_.load(std::memory_order_relaxed); }

  /// Frees every set kept now (sets taken stay with their calls); returns their bytes.
  size_t release() {
    std::vector<Kept> freed;  // freed after the lock is let go
    std::lock_guard<std::mutex> lock(mu_);
    const size_t bytes = kept_;
    freed.swap(free_);
    kept_ = 0;
    return bytes;
  }

 private:
  // A set kept, and the thread that gave it back (the last to use it).
  struct Kept {
    std::unique_ptr<Set> set;
    std::thread::id user;
  };

  ScratchCache() = default;
  static size_t release_of(void* cache) { return static_cast<ScratchCache*>(cache)->release(); }

  std::unique_ptr<Set> take_set() {
    const std::thread::id me = std::this_thread::get_id();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        // (A scan of at most a set per worker, once per unit of work: a few hundred ns.)
        auto it = std::find_if(free_.rbegin(), free_.rend(),
                               [&](const Kept& k) { return k.user == me; });
        const size_t i = it == free_.rend() ? free_.size() - 1
                                            : static_cast<size_t>(free_.rend() - it) - 1;
        std::unique_ptr<Set> s = std::move(free_[i].set);
        free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
        kept_ -= s->bytes();
        return s;
      }
    }
    made_.fetch_add(1, std::memory_order_relaxed);
    return std::make_unique<Set>();
  }

  void give_back(std::unique_ptr<Set> s) {
    std::vector<Kept> freed;  // freed after the lock is let go
    {
      std::lock_guard<std::mutex> lock(mu_);
      kept_ += s->bytes();
      free_.push_back({std::move(s), std::this_thread::get_id()});
      if (uses_ == 0) trim_locked(freed);
    }
  }

  void begin_use() {
    std::lock_guard<std::mutex> lock(mu_);
    ++uses_;
  }

  void end_use() {
    std::vector<Kept> freed;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--uses_ == 0) trim_locked(freed);
    }
  }

  // Moves the oldest sets out into `freed` until at most kKeptBytes are kept.
  void trim_locked(std::vector<Kept>& freed) {
    size_t n = 0;
    while (kept_ > kKeptBytes && n < free_.size()) kept_ -= free_[n++].set->bytes();
    std::move(free_.begin(), free_.begin() + static_cast<std::ptrdiff_t>(n),
              std::back_inserter(freed));
    free_.erase(free_.begin(), free_.begin() + static_cast<std::ptrdiff_t>(n));
  }

  mutable std::mutex mu_;
  std::vector<Kept> free_;                  // oldest first
  size_t kept_ = 0;                         // bytes of the sets in free_
  int uses_ = 0;                            // calls holding a Use
  std::atomic<size_t> made_{0};
};

}  // namespace jtree
