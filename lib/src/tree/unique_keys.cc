#include "tree/unique_keys.h"

#include <algorithm>
#include <bit>

#include <xxhash.h>

namespace jtree {
namespace {

uint64_t key_hash(const KeyView& k) {
  if (k.kind == Key::Kind::kStr) return XXH3_64bits(k.str.data(), k.str.size()) & ~1ull;
  // splitmix64's finalizer; the low bit tells int keys from string keys.
  uint64_t x = static_cast<uint64_t>(k.i) + 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return (x ^ (x >> 31)) | 1;
}

bool key_less(const KeyView& a, const KeyView& b) {
  if (a.kind != b.kind) return a.kind < b.kind;
  return a.kind == Key::Kind::kStr ? a.str < b.str : a.i < b.i;
}

// Small containers (most dicts): comparing every pair is cheaper than hashing.
constexpr size_t kPairwiseMax = 8;
// Probes allowed per key on average before the table is deemed attacked.
constexpr size_t kProbeBudgetPerKey = 8;

}  // namespace

bool UniqueKeyChecker::unique(std::span<const KeyView> keys) {
  const size_t n = keys.size();
  if (n < 2) return true;
  if (n <= kPairwiseMax) {
    for (size_t a = 1; a < n; ++a) {
      for (size_t b = 0; b < a; ++b) {
        if (keys[a] == keys[b]) return false;
      }
    }
    return true;
  }
  hashes_.resize(n);
  for (size_t i = 0; i < n; ++i) hashes_[i] = key_hash(keys[i]);
  // Load factor <= 1/2.
  const size_t size = std::bit_ceil(2 * n);
  const size_t mask = size - 1;
  slots_.assign(size, 0);
  size_t budget = kProbeBudgetPerKey * n;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t h = hashes_[i];
    // The high bits pick the slot: the low bit is the key kind.
    for (size_t s = (h >> 32) & mask;; s = (s + 1) & mask) {
      const uint32_t other = slots_[s];
      if (other == 0) {
        slots_[s] = static_cast<uint32_t>(i + 1);
        break;
      }
      if (hashes_[other - 1] == h && keys[other - 1] == keys[i]) {
        return false;
      }
      if (budget-- == 0) return unique_sorted(keys);
    }
  }
  return true;
}

bool UniqueKeyChecker::unique_sorted(std::span<const KeyView> keys) {
  sorted_.clear();
  for (size_t i = 0; i < keys.size(); ++i) sorted_.emplace_back(hashes_[i], static_cast<uint32_t>(i));
  std::sort(sorted_.begin(), sorted_.end(), [&](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    return key_less(keys[a.second], keys[b.second]);
  });
  for (size_t i = 1; i < sorted_.size(); ++i) {
    if (sorted_[i].first == sorted_[i - 1].first &&
        keys[sorted_[i].second] == keys[sorted_[i - 1].second]) {
      return false;
    }
  }
  return true;
}

}  // namespace jtree
