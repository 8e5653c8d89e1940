// MemoryBudget (jtree/options.h): the one rule for what a read call allocates for its caller.
#include <algorithm>
#include <string>

#include "jtree/options.h"
#include "jtree/status.h"

namespace jtree {

MemoryBudget::MemoryBudget(uint64_t max_leaf_bytes, uint64_t max_total_bytes)
    : max_leaf_bytes_(max_leaf_bytes), max_total_bytes_(max_total_bytes) {}

MemoryBudget::MemoryBudget(const Limits& limits)
    : MemoryBudget(limits.max_leaf_bytes, limits.max_total_bytes) {}

Status MemoryBudget::reserve(uint64_t bytes, std::string_view what) {
  // "<what>: needs ...", or "needs ..." for a caller that puts its own prefix (Python's
  // errors carry the file and key path apart).
  const std::string head = what.empty() ? "needs " : std::string(what) + ": needs ";
  if (bytes > max_leaf_bytes_) {
    return Status::resource_exhausted(head + std::to_string(bytes) +
                                     " bytes, over the limit of " +
                                     std::to_string(max_leaf_bytes_) +
                                     " per leaf (max_leaf_bytes)");
  }
  // Compare-and-add: concurrent reservations never overshoot the total together.
  uint64_t before = reserved_.load(std::memory_order_relaxed);
  do {
    if (bytes > max_total_bytes_ - std::min(before, max_total_bytes_)) {
      return Status::resource_exhausted(
          head + std::to_string(bytes) + " bytes; with the " +
          std::to_string(before) + " this call already allocated that is over the limit of " +
          std::to_string(max_total_bytes_) + " in total (max_total_bytes)");
    }
  } while (!reserved_.compare_exchange_weak(before, before + bytes, std::memory_order_relaxed));
  return Status::success();
}

}  // namespace jtree
