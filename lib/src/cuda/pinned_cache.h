// Pinned host buffers kept between loads to a device (the CUDA copy engine's, process-wide).
//
// Why: pinning memory is slow (cudaHostAlloc runs at about 2-3 GB/s: the pages are zeroed,
// locked and mapped for the device), so a load that pinned its staging buffers afresh spent
// more time allocating than copying. A process that loads several files (the shards of a
// checkpoint, a model swapped in later) pays for its staging buffers once; the cache holds at
// most `capacity` bytes, and release_pinned_memory() gives them back. Blocks can also be
// pinned ahead of a load (pin_staging_buffers_async): the cache then knows them as expected
// (expect), and a load asking for a block one of them will serve waits for it (awaits)
// instead of pinning another.
//
// Not thread-safe by itself: the engine guards it with a mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <span>
#include <utility>
#include <vector>

namespace jtree::staging {

class PinnedCache {
 public:
  explicit PinnedCache(uint64_t capacity) : capacity_(capacity) {}

  /// A cached block of at least `bytes` and at most twice that (so that a small load does
  /// not hold a large block), the smallest such; an empty span when there is none. The
  /// block's own size is remembered for give().
  std::span<std::byte> take(size_t bytes) {
    auto it = free_.lower_bound(bytes);
    if (it == free_.end() || it->first > 2 * static_cast<uint64_t>(bytes)) return {};
    std::byte* p = it->second;
    const size_t size = it->first;
    free_.erase(it);
    cached_ -= size;
    lent_[p] = size;
    return {p, bytes};
  }

  /// Notes that a block of `size` bytes is being pinned for the cache (its arrival: arrived,
  /// or given_up when pinning it failed).
  void expect(size_t size) {
    expected_.insert(size);
    expected_bytes_ += size;
  }

  /// How many more blocks of `size` bytes the cache could keep, counting the blocks it holds
  /// and those expected (what is worth pinning ahead: a block that arrives past the capacity
  /// is freed).
  size_t room_for(size_t size) const {
    const uint64_t used = cached_ + expected_bytes_;
    if (size == 0) return std::numeric_limits<size_t>::max();
    return used >= capacity_ ? 0 : static_cast<size_t>((capacity_ - used) / size);
  }

  /// A block noted by expect(size) is here: kept (true) when it fits within the capacity,
  /// otherwise the caller frees it (false).
  bool arrived(std::byte* p, size_t size) {
    given_up(size);
    if (cached_ + size > capacity_) return false;
    free_.emplace(size, p);
    cached_ += size;
    return true;
  }

  /// A block noted by expect(size) will not come.
  void given_up(size_t size) {
    auto it = expected_.find(size);
    if (it == expected_.end()) return;
    expected_.erase(it);
    expected_bytes_ -= size;
  }

  /// Whether a block being pinned would serve take(bytes) (then waiting for it beats pinning
  /// another).
  bool awaits(size_t bytes) const {
    auto it = expected_.lower_bound(bytes);
    return it != expected_.end() && *it <= 2 * static_cast<uint64_t>(bytes);
  }

  /// How many cached or expected blocks of exactly `size` bytes there are.
  size_t count(size_t size) const { return free_.count(size) + expected_.count(size); }

  /// Remembers a block allocated outside the cache, of `size` bytes, as lent out.
  void lend(std::byte* p, size_t size) { lent_[p] = size; }

  /// Takes back a block from take() or lend(): kept when it fits within the capacity (true);
  /// otherwise the caller frees it (false; `size` then says how large it really is).
  bool give(std::byte* p, size_t& size) {
    auto it = lent_.find(p);
    size = it == lent_.end() ? size : it->second;
    if (it != lent_.end()) lent_.erase(it);
    if (cached_ + size > capacity_) return false;
    free_.emplace(size, p);
    cached_ += size;
    return true;
  }

  /// Every cached block and its size, removed from the cache (for the caller to free).
  std::vector<std::pair<std::byte*, size_t>> drain() {
    std::vector<std::pair<std::byte*, size_t>> out;
    for (auto& [size, p] : free_) out.push_back({p, static_cast<size_t>(size)});
    free_.clear();
    cached_ = 0;
    return out;
  }

  uint64_t cached_bytes() const { return cached_; }

 private:
  const uint64_t capacity_;
  uint64_t cached_ = 0;
  std::multimap<uint64_t, std::byte*> free_;  // size -> block
  std::multiset<uint64_t> expected_;          // sizes of blocks being pinned for the cache
  uint64_t expected_bytes_ = 0;               // their sum
  std::map<std::byte*, size_t> lent_;         // block -> its real size
};

}  // namespace jtree::staging
