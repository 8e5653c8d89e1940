// Duplicate-key detection among the children of one container (Tree::Finalize).
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "jtree/tree.h"

namespace jtree {

/// Checks that the keys of `kids` (indices into `nodes`) are unique. Reuse one checker for
/// many containers: its scratch tables are allocated once, at the size of the largest.
///
/// Keys go into an open-addressing hash table, O(n) for ordinary keys. Keys from a file may be
/// crafted to collide: when probing exceeds a fixed budget per key, the check falls back to
/// sorting (by hash, ties broken by the keys themselves), so any input costs O(n log n).
class UniqueKeyChecker {
 public:
  bool unique(const std::vector<Node>& nodes, std::span<const uint32_t> kids);

 private:
  bool unique_sorted(const std::vector<Node>& nodes, std::span<const uint32_t> kids);
  std::vector<uint64_t> hashes_;  // per kid
  std::vector<uint32_t> slots_;   // kid position + 1; 0 = empty
  std::vector<std::pair<uint64_t, uint32_t>> sorted_;
};

}  // namespace jtree
