// Duplicate-key detection among the children of one container (Tree::finalize).
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "jtree/tree.h"

namespace jtree {

/// Checks that `keys` (the keys of one container's children) are unique. Reuse one checker for
/// many containers: its scratch tables are allocated once, at the size of the largest.
///
/// Keys go into an open-addressing hash table, O(n) for ordinary keys. Keys from a file may be
/// crafted to collide: when probing exceeds a fixed budget per key, the check falls back to
/// sorting (by hash, ties broken by the keys themselves), so any input costs O(n log n).
class UniqueKeyChecker {
 public:
  bool unique(std::span<const KeyView> keys);

 private:
  bool unique_sorted(std::span<const KeyView> keys);
  std::vector<uint64_t> hashes_;  // per key
  std::vector<uint32_t> slots_;   // key position + 1; 0 = empty
  std::vector<std::pair<uint64_t, uint32_t>> sorted_;
};

}  // namespace jtree
