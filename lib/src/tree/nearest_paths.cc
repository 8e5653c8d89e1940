// jtree::nearest_paths (jtree/key_path.h): "did you mean" for a key path a file does not have.
// Written out here rather than taken from a library: it is difflib's get_close_matches
// (Ratcliff/Obershelp similarity), which the Python package used before, in the few lines
// that choice needs, so that the C++ library, the CLI, the C API and Python suggest alike.
#include <algorithm>
#include <array>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "jtree/key_path.h"

namespace jtree {
namespace {

double ratio_of(size_t matches, size_t total) {
  return total == 0 ? 1.0 : 2.0 * static_cast<double>(matches) / static_cast<double>(total);
}

// The longest common block of a[alo, ahi) and b[blo, bhi), as difflib finds it: the longest,
// and of those the first in a, then in b. Returns {i, j, size}.
std::tuple<size_t, size_t, size_t> longest_match(std::string_view a, size_t alo, size_t ahi,
                                                 std::string_view b, size_t blo, size_t bhi) {
  size_t best_i = alo, best_j = blo, best = 0;
  std::vector<size_t> prev(bhi - blo + 1, 0), cur(bhi - blo + 1, 0);
  for (size_t i = alo; i < ahi; ++i) {
    for (size_t j = blo; j < bhi; ++j) {
      const size_t k = a[i] == b[j] ? prev[j - blo] + 1 : 0;
      cur[j - blo + 1] = k;
      if (k > best) {
        best = k;
        best_i = i + 1 - k;
        best_j = j + 1 - k;
      }
    }
    std::swap(prev, cur);  // (cur[0] stays 0; every other entry is written in each row)
  }
  return {best_i, best_j, best};
}

// Characters in the matching blocks of a and b (difflib's get_matching_blocks, summed).
size_t matching_characters(std::string_view a, std::string_view b) {
  size_t total = 0;
  std::vector<std::array<size_t, 4>> todo = {{0, a.size(), 0, b.size()}};
  while (!todo.empty()) {
    const auto [alo, ahi, blo, bhi] = todo.back();
    todo.pop_back();
    const auto [i, j, k] = longest_match(a, alo, ahi, b, blo, bhi);
    if (k == 0) continue;
    total += k;
    if (alo < i && blo < j) todo.push_back({alo, i, blo, j});
    if (i + k < ahi && j + k < bhi) todo.push_back({i + k, ahi, j + k, bhi});
  }
  return total;
}

// An upper bound of similarity(): the characters the two have in common, in any order.
double quick_ratio(std::string_view a, std::string_view b) {
  std::array<int, 256> counts{};
  for (char c : b) ++counts[static_cast<unsigned char>(c)];
  size_t common = 0;
  for (char c : a) {
    if (counts[static_cast<unsigned char>(c)]-- > 0) ++common;
  }
  return ratio_of(common, a.size() + b.size());
}

// difflib.SequenceMatcher(None, a, b).ratio(): 2 x (characters in matching blocks) / (|a| +
// |b|), in [0, 1]; 1 for two empty strings.
double similarity(std::string_view a, std::string_view b) {
  return ratio_of(matching_characters(a, b), a.size() + b.size());
}

// difflib.get_close_matches(word, candidates, n, cutoff): those not in `out` yet are appended
// to it, best first, until it holds `n`.
void add_close_matches(std::string_view word, const std::vector<std::string>& candidates,
                       size_t n, double cutoff, std::vector<std::string>& out) {
  std::vector<std::pair<double, const std::string*>> scored;
  for (const std::string& c : candidates) {
    const size_t total = c.size() + word.size();
    if (ratio_of(std::min(c.size(), word.size()), total) < cutoff) continue;  // cheap bounds
    if (quick_ratio(c, word) < cutoff) continue;
    const double score = similarity(c, word);
    if (score >= cutoff) scored.emplace_back(score, &c);
  }
  std::sort(scored.begin(), scored.end(), [](const auto& x, const auto& y) {
    return x.first != y.first ? x.first > y.first : *x.second > *y.second;  // as heapq.nlargest
  });
  for (size_t k = 0; k < scored.size() && k < n && out.size() < n; ++k) {
    if (std::find(out.begin(), out.end(), *scored[k].second) == out.end()) {
      out.push_back(*scored[k].second);
    }
  }
}

size_t depth_of(std::string_view path) {
  auto parts = split_path(path);
  return parts.ok() ? parts->size() : 0;
}

std::string last_key(std::string_view path) {
  auto parts = split_path(path);
  return parts.ok() && !parts->empty() ? parts->back() : std::string();
}

}  // namespace

std::vector<std::string> nearest_paths(std::string_view path, const std::vector<std::string>& paths,
                                       size_t n) {
  std::vector<std::string> got;
  const size_t depth = depth_of(path);
  // The paths as deep as the one asked for first: "params/w0" is nearer "params/w" than
  // "params".
  std::vector<std::string> same;
  if (depth > 0) {
    for (const std::string& p : paths) {
      if (depth_of(p) == depth) same.push_back(p);
    }
  }
  add_close_matches(path, same, n, 0.5, got);
  if (got.size() < n) add_close_matches(path, paths, n, 0.5, got);
  const std::string last = last_key(path);
  const bool pattern = last.find_first_of("*?[") != std::string::npos;
  if (got.size() < n && depth > 0 && !pattern) {
    // "bais" for ".../bias": the paths whose last key is like the last key asked for (the
    // first path of each key).
    std::vector<std::string> keys;
    std::unordered_map<std::string, const std::string*> first_path;
    for (const std::string& p : paths) {
      std::string k = last_key(p);
      if (!k.empty() && first_path.emplace(k, &p).second) keys.push_back(std::move(k));
    }
    std::vector<std::string> near_keys;
    add_close_matches(last, keys, n, 0.6, near_keys);
    for (const std::string& k : near_keys) {
      const std::string& p = *first_path.at(k);
      if (got.size() < n && std::find(got.begin(), got.end(), p) == got.end()) got.push_back(p);
    }
  }
  return got;
}

}  // namespace jtree
