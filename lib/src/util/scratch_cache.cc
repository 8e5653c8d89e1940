#include "util/scratch_cache.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>

#include "jtree/options.h"

namespace jtree {
namespace {

// Every scratch cache made, with the process that made it. No lock (as the thread pools,
// util/thread_pool.cc): a child of fork() inherits the table as its parent left it, and a lock
// held by one of the parent's threads would stay held in the child for good. A child
// releases only its own caches (the parent's may be mid-change). A handful of cache types
// per process: kMaxCaches is room for many generations of forks.
struct Entry {
  std::atomic<bool> ready{false};
  pid_t owner = 0;
  size_t (*release)(void*) = nullptr;
  void* cache = nullptr;
};
constexpr size_t kMaxCaches = 256;
std::array<Entry, kMaxCaches> g_entries;
std::atomic<size_t> g_count{0};

}  // namespace

namespace scratch_registry {

void add(pid_t owner, size_t (*release)(void*), void* cache) {
  const size_t i = g_count.fetch_add(1, std::memory_order_relaxed);
  if (i >= kMaxCaches) return;  // (not released by release_scratch_memory; still trimmed)
  Entry& e = g_entries[i];
  e.owner = owner;
  e.release = release;
  e.cache = cache;
  e.ready.store(true, std::memory_order_release);
}

}  // namespace scratch_registry

uint64_t release_scratch_memory() {
  const pid_t pid = ::getpid();
  const size_t n = std::min(g_count.load(std::memory_order_acquire), kMaxCaches);
  uint64_t freed = 0;
  for (size_t i = 0; i < n; ++i) {
    Entry& e = g_entries[i];
    if (e.ready.load(std::memory_order_acquire) && e.owner == pid) freed += e.release(e.cache);
  }
  return freed;
}

}  // namespace jtree
