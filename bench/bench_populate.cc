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
//
// Then the way map_populated faults huge pages in (a write per page: each fault takes only
// its mapping's lock) against how it did before 2026-11-29, one MADV_POPULATE_WRITE call
// over the whole (the kernel holds the process's mmap lock through a call), both on one
// thread for 128 MiB of huge pages: first the populating alone, the two alternated, medians
// of R; then what each does to the rest of the process: while it runs, another thread maps,
// touches and unmaps 256 KiB in a loop (what an allocation beside the pinning does:
// cudaMalloc, an allocator's fresh arena), and the longest of its rounds is kept (median
// over R runs). One populating thread for both, so that they differ only in how: with more
// threads than cores the other thread would also wait for a core.
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "util/populated_memory.h"

namespace {

using Clock = std::chrono::steady_clock;

// The longest round of another thread's map + touch + unmap of 256 KiB while `populate` runs,
// in milliseconds.
template <typename F>
double longest_wait_beside(F populate) {
  std::atomic<bool> started{false}, stop{false};
  double longest = 0;
  std::thread other([&] {
    started = true;
    while (!stop.load()) {
      const auto t0 = Clock::now();
      void* p = ::mmap(nullptr, 256 << 10, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
      if (p == MAP_FAILED) break;
      *static_cast<volatile char*>(p) = 1;
      ::munmap(p, 256 << 10);
      longest = std::max(
          longest, std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
  });
  while (!started.load()) std::this_thread::yield();
  populate();
  stop = true;
  other.join();
  return longest;
}

// One MADV_POPULATE_WRITE over the whole of `bytes` of fresh memory (2 MiB-aligned, advised
// MADV_HUGEPAGE), on the calling thread: the reference of longest_wait_beside. Returns the
// mapping, for the caller to unmap.
std::span<std::byte> populate_in_one_call(size_t bytes) {
  const size_t align = jtree::kHugePageBytes;
  void* raw = ::mmap(nullptr, bytes + align, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return {};
  auto* p = static_cast<char*>(raw) + (align - reinterpret_cast<uintptr_t>(raw) % align) % align;
  (void)::madvise(p, bytes, MADV_HUGEPAGE);
#ifdef MADV_POPULATE_WRITE
  (void)::madvise(p, bytes, MADV_POPULATE_WRITE);
#endif
  return {static_cast<std::byte*>(raw), bytes + align};
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

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
  const size_t bytes = size_t{128} << 20;
  // The populating alone, the two ways on one thread, alternated (nothing beside them: the
  // other thread's unmaps would interrupt the writes with TLB shootdowns, and not the one
  // call, which keeps it waiting).
  std::vector<double> alone[2];
  for (int r = 0; r < runs; ++r) {
    for (int way = 0; way < 2; ++way) {
      const auto t0 = Clock::now();
      std::span<std::byte> mem;
      if (way == 0) {
        auto m = jtree::map_populated(bytes, 1, true);
        if (m.ok()) mem = *m;
      } else {
        mem = populate_in_one_call(bytes);
      }
      alone[way].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      if (way == 0) {
        jtree::unmap_populated(mem);
      } else if (!mem.empty()) {
        ::munmap(mem.data(), mem.size());
      }
    }
  }
  std::printf("populate 128 MiB of huge pages on one thread: map_populated %.2f ms, one call "
              "%.2f ms (%.3fx)\n", median_of(alone[0]), median_of(alone[1]),
              median_of(alone[0]) / median_of(alone[1]));
  std::vector<double> waits[2];
  // (Each mapping is unmapped after the other thread stopped: unmapping holds the lock too,
  // the same for both ways, and is not the populating.)
  for (int r = 0; r < runs; ++r) {
    std::span<std::byte> mem;
    waits[0].push_back(longest_wait_beside([&] {
      auto m = jtree::map_populated(bytes, 1, true);
      if (m.ok()) mem = *m;
    }));
    jtree::unmap_populated(mem);
    waits[1].push_back(longest_wait_beside([&] { mem = populate_in_one_call(bytes); }));
    if (!mem.empty()) ::munmap(mem.data(), mem.size());
  }
  const double lib = median_of(waits[0]), one = median_of(waits[1]);
  std::printf("another thread's mmap while 128 MiB is populated (one thread, huge pages), its "
              "longest wait: map_populated %.2f ms, one call %.2f ms (%.3fx)\n", lib, one,
              lib / one);
  return 0;
}
