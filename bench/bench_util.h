// Shared pieces of the C++ benchmarks: timing (median of runs with the spread) and
// trained-like bf16 weights.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "../tests/synthetic_weights.h"

namespace jtree::bench {

using Clock = std::chrono::steady_clock;

/// Seconds: the median of the runs and the fastest and slowest.
struct Stat {
  double median = 0, min = 0, max = 0;
};

/// The median of `runs` timings after a first, uncounted warm-up run (first touches of
/// buffers and of the page cache are not the steady state).
inline Stat measure(int runs, const std::function<void()>& fn) {
  fn();
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    auto t0 = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t.front(), t.back()};
}

/// Throughput (GB/s, 1e9) of `bytes` per run: median [slowest run, fastest run].
inline std::string gbps(uint64_t bytes, const Stat& s) {
  char b[96];
  std::snprintf(b, sizeof b, "%.2f GB/s [%.2f, %.2f]", bytes / s.median / 1e9, bytes / s.max / 1e9,
                bytes / s.min / 1e9);
  return b;
}

/// `n` bf16 values drawn from normal(0, 0.02): what trained weights look like to a compressor.
inline std::vector<std::byte> bf16_weights(size_t n, uint64_t seed) {
  return synthetic::bf16_normal(n, 0.02f, seed);
}

}  // namespace jtree::bench
