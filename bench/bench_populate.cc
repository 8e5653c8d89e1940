// bench_populate: what faulting in a pinned staging buffer costs, with transparent huge pages
// (map_populated's default since 2026-11-27, the CUDA engine's) and with small pages, on this
// host's CPUs. No GPU needed: the populating is the host's part of pinning (bench/gpu.md: on
// the H200 host 128 MiB populated in 18-28 ms, registered in 4-7 ms).
//
//   bench_populate [--runs R]
//
// For 16 MiB (one default staging buffer) and 128 MiB (the default ring), with
// min(cores, 8) threads as the engine uses: the median of R runs (default 9) with [min, max]
// of each, the two ways alternated run by run, and their ratio. The kernel's setting
// (/sys/kernel/mm/transparent_hugepage/enabled) decides whether huge pages are given.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "util/populated_memory.h"

int main(int argc, char** argv) {
  int runs = 9;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: bench_populate [--runs R]\n");
      return 2;
    }
  }
  std::string thp = "absent";
  {
    std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
    if (f) std::getline(f, thp);
  }
  const int threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
  std::printf("transparent huge pages: %s; %d populating threads\n", thp.c_str(), threads);
  for (size_t mib : {size_t{16}, size_t{128}}) {
    std::vector<double> times[2];
    for (int r = 0; r < runs; ++r) {
      for (bool huge : {false, true}) {
        const auto t0 = std::chrono::steady_clock::now();
        auto m = jtree::map_populated(mib << 20, threads, huge);
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (!m.ok()) {
          std::fprintf(stderr, "map_populated: %s\n", m.status().message().c_str());
          return 1;
        }
        jtree::unmap_populated(*m);
        times[huge].push_back(s);
      }
    }
    double median[2];
    for (int h = 0; h < 2; ++h) {
      std::sort(times[h].begin(), times[h].end());
      median[h] = times[h][times[h].size() / 2];
      std::printf("populate %4zu MiB, %-11s %7.2f ms [%.2f, %.2f]\n", mib,
                  h ? "huge pages:" : "small pages:", median[h] * 1e3, times[h].front() * 1e3,
                  times[h].back() * 1e3);
    }
    std::printf("populate %4zu MiB, huge/small: %.2fx\n", mib, median[1] / median[0]);
  }
  return 0;
}
