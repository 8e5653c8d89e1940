// Loads into GPU memory (jtree/device.h) against the bandwidth of pinned host-to-device copies
// measured in the same run: issue 22's target is >= 80% of it for a raw file in the page cache.
// Built only with CUDA support (JTREE_CUDA found the toolkit); needs a CUDA device.
//
//   build/bench/bench_device [--gib 1] [--runs 5] [--dir /dev/shm] [--staging-mib 128]
//                            [--buffers 8] [--threads 0] [--direct auto|on|off] [--cold 0|1]
//                            [--only raw|zstd|all] [--zero-copy both|only|off]
//
// Writes two files of --gib GiB of bf16 weights in 16 leaves (raw, and zstd level 1), then
// times, as medians of --runs runs after a warm-up: cudaMemcpyAsync from one pinned buffer
// (the bound), read_many_to_device of the raw file (checksums verified and not), of the zstd
// file, and a plain host read_many of each for comparison. The FIRST load to the device of
// each kind is timed on its own too: it pins the staging buffers (cudaHostAlloc, slow), which
// later loads of the process find in the engine's cache; a fresh process meets that cost.
// The raw file is also loaded with zero copy (DeviceOptions::zero_copy On: its pages in the
// page cache registered and copied from, no staging buffer), before the staged loads, so
// that its FIRST load is a fresh process's too; --zero-copy only/off keeps or drops those
// rows alone.
// The first load of each file is checked byte for byte against the source. --cold 1 drops
// the file from the page cache (fdatasync + POSIX_FADV_DONTNEED) before every device load
// (use a --dir on a disk: tmpfs keeps its pages). At the end: what pinning memory costs here
// (cudaHostAlloc, and cudaHostRegister of memory already faulted in; eight staging buffers
// pinned one after the other or from eight threads at once) and pageable copies.
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include <atomic>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "jtree/device.h"
#include "jtree/jtree.h"
#include "util/populated_memory.h"

using namespace jtree;
using namespace jtree::bench;

namespace {

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "bench_device: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

void check(const Status& st) {
  if (!st.ok()) {
    std::fprintf(stderr, "bench_device: %s\n", st.to_string().c_str());
    std::exit(1);
  }
}

// Drops a file from the page cache (written back first).
void evict(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0 || ::fdatasync(fd) != 0 || ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0) {
    std::fprintf(stderr, "bench_device: cannot drop %s from the page cache\n", path.c_str());
    std::exit(1);
  }
  ::close(fd);
}

double seconds_of(const std::function<void()>& fn) {
  auto t0 = Clock::now();
  fn();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  double gib = 1;
  const DeviceOptions defaults;
  int runs = 5, buffers = defaults.staging_buffers, threads = 0;
  uint64_t staging_mib = defaults.staging_bytes >> 20;
  std::string dir = "/dev/shm", direct = "auto", only = "all", zero_copy = "both";
  bool cold = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--gib") gib = std::atof(argv[i + 1]);
    else if (a == "--runs") runs = std::atoi(argv[i + 1]);
    else if (a == "--dir") dir = argv[i + 1];
    else if (a == "--staging-mib") staging_mib = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--buffers") buffers = std::atoi(argv[i + 1]);
    else if (a == "--threads") threads = std::atoi(argv[i + 1]);
    else if (a == "--direct") direct = argv[i + 1];
    else if (a == "--cold") cold = std::string(argv[i + 1]) == "1";
    else if (a == "--only") only = argv[i + 1];
    else if (a == "--zero-copy") zero_copy = argv[i + 1];
    else {
      std::fprintf(stderr, "bench_device: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (cuda_device_count() == 0) {
    std::fprintf(stderr, "bench_device: no CUDA device: nothing measured\n");
    return 1;
  }
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  constexpr int kLeaves = 16;
  const uint64_t per_leaf = static_cast<uint64_t>(gib * (1ull << 30)) / kLeaves / 2 * 2;
  const uint64_t total = per_leaf * kLeaves;
  if (direct != "auto" && direct != "on" && direct != "off") {
    std::fprintf(stderr, "bench_device: --direct is auto, on or off\n");
    return 2;
  }
  if (zero_copy != "both" && zero_copy != "only" && zero_copy != "off") {
    std::fprintf(stderr, "bench_device: --zero-copy is both, only or off\n");
    return 2;
  }
  const DirectIo direct_io = direct == "on" ? DirectIo::kOn
                             : direct == "off" ? DirectIo::kOff : DirectIo::kAuto;
  std::printf("device: %s; %d leaves, %.2f GiB; staging %llu MiB in %d buffers; dir %s; "
              "direct_io %s; page cache %s\n",
              prop.name, kLeaves, total / double(1ull << 30),
              static_cast<unsigned long long>(staging_mib), buffers, dir.c_str(), direct.c_str(),
              cold ? "dropped before each device load" : "warm");

  // The source and the files.
  std::vector<std::vector<std::byte>> src;
  for (int i = 0; i < kLeaves; ++i) src.push_back(bf16_weights(per_leaf / 2, 100 + i));
  const std::string raw_path = dir + "/bench_device_raw.jtree";
  const std::string zstd_path = dir + "/bench_device_zstd.jtree";
  for (const auto& [path, codec] : {std::pair{raw_path, Codec::kRaw}, {zstd_path, Codec::kZstd}}) {
    TreeBuilder b;
    b.list();
    LeafOptions lo;
    lo.codec = codec;
    for (int i = 0; i < kLeaves; ++i) {
      b.array(DType::kBFloat16, {per_leaf / 2}, ArrayView{src[i].data()}, lo);
    }
    b.end();
    auto tree = std::move(b).finish();
    check(tree.status());
    WriteOptions wo;
    wo.codec = codec;
    check(save(std::move(*tree), path, wo).status());
  }

  std::vector<void*> dev(kLeaves);
  for (auto& p : dev) check_cuda(cudaMalloc(&p, per_leaf), "cudaMalloc");

  // The bound: pinned host -> device in 64 MiB copies on one stream.
  {
    const size_t piece = std::min<uint64_t>(64ull << 20, per_leaf);
    void* pinned = nullptr;
    check_cuda(cudaHostAlloc(&pinned, piece, cudaHostAllocPortable), "cudaHostAlloc");
    std::memset(pinned, 1, piece);
    cudaStream_t s;
    check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    Stat st = measure(runs, [&] {
      for (int i = 0; i < kLeaves; ++i) {
        for (uint64_t off = 0; off < per_leaf; off += piece) {
          check_cuda(cudaMemcpyAsync(static_cast<std::byte*>(dev[i]) + off, pinned,
                                     std::min<uint64_t>(piece, per_leaf - off),
                                     cudaMemcpyHostToDevice, s),
                     "cudaMemcpyAsync");
        }
      }
      check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    });
    std::printf("%-44s %s\n", "pinned host->device (cudaMemcpyAsync)", gbps(total, st).c_str());
    check_cuda(cudaStreamDestroy(s), "cudaStreamDestroy");
    check_cuda(cudaFreeHost(pinned), "cudaFreeHost");
  }

  std::vector<std::byte> host(total);
  bool first_in_process = true;
  for (const auto& [label, path] : {std::pair{"raw", raw_path}, {"zstd", zstd_path}}) {
    if (only != "all" && only != label) continue;
    auto reader = Reader::open(path);
    check(reader.status());
    // (Zero copy first: it pins no staging buffer, so its FIRST load is a fresh process's.)
    std::vector<std::pair<bool, bool>> variants;  // (zero copy, verify)
    for (bool zc : {true, false}) {
      if (zc && (std::string(label) != "raw" || zero_copy == "off")) continue;
      if (!zc && zero_copy == "only") continue;
      for (bool verify : {true, false}) variants.push_back({zc, verify});
    }
    for (const auto& [zc, verify] : variants) {
      DeviceOptions o;
      DeviceStats stats;
      o.staging_bytes = staging_mib << 20;
      o.staging_buffers = buffers;
      o.read.threads = threads;
      o.read.verify_checksums = verify;
      o.direct_io = zc ? DirectIo::kOff : direct_io;
      o.zero_copy = zc ? ZeroCopy::kOn : ZeroCopy::kOff;
      o.stats = &stats;
      std::vector<DeviceRequest> reqs;
      std::vector<ReadRequest> host_reqs;
      for (int i = 0; i < kLeaves; ++i) {
        reqs.push_back({static_cast<uint32_t>(i), std::nullopt, dev[i], per_leaf});
        host_reqs.push_back({static_cast<uint32_t>(i), std::nullopt,
                             std::span(host).subspan(i * per_leaf, per_leaf)});
      }
      check_cuda(cudaMemset(dev[0], 0, per_leaf), "cudaMemset");
      if (cold) evict(path);
      Status first_status;
      const double first =
          seconds_of([&] { first_status = read_many_to_device(**reader, reqs, o); });
      if (zc && first_status.is_not_supported()) {
        std::printf("%-44s %s\n", "raw -> device, zero copy", first_status.message().c_str());
        continue;
      }
      check(first_status);
      const std::string v =
          std::string(zc ? "zero copy, " : "") + (verify ? "verified" : "unverified");
      const std::string how = zc ? "registers the file's pages"
                              : first_in_process ? "pins its buffers" : "buffers from the cache";
      std::printf("%-44s %.2f GB/s (%.1f ms; %s; O_DIRECT %.0f%%, zero copy %.0f%%%s%s)\n",
                  (std::string(label) + " -> device, FIRST load, " + v).c_str(),
                  total / first / 1e9, first * 1e3, how.c_str(),
                  100.0 * stats.direct_bytes / std::max<uint64_t>(1, total),
                  100.0 * stats.zero_copy_bytes / std::max<uint64_t>(1, total),
                  stats.direct_io_note.empty() ? "" : "; ", stats.direct_io_note.c_str());
      if (!zc) first_in_process = false;
      std::vector<std::byte> back(per_leaf);
      for (int i = 0; i < kLeaves; ++i) {
        check_cuda(cudaMemcpy(back.data(), dev[i], per_leaf, cudaMemcpyDeviceToHost), "cudaMemcpy");
        if (back != src[i]) {
          std::fprintf(stderr, "bench_device: %s leaf %d differs on the device\n", label, i);
          return 1;
        }
      }
      Stat d = measure(runs, [&] {
        if (cold) evict(path);  // (timed: about a millisecond)
        check(read_many_to_device(**reader, reqs, o));
      });
      std::printf("%-44s %s\n", (std::string(label) + " file -> device, " + v).c_str(),
                  gbps(total, d).c_str());
      if (zc) continue;  // (the host load is the same as the staged rows')
      Stat h = measure(runs, [&] { check((*reader)->read_many(host_reqs, o.read)); });
      std::printf("%-44s %s\n", (std::string(label) + " file -> host memory, " + v).c_str(),
                  gbps(total, h).c_str());
    }
  }
  // What pinning costs here, and pageable copies (what a plain tensor.to("cuda") uses).
  release_pinned_memory();
  for (uint64_t mib : {16, 64, 256}) {
    void* p = nullptr;
    const double t = seconds_of([&] {
      check_cuda(cudaHostAlloc(&p, mib << 20, cudaHostAllocPortable), "cudaHostAlloc");
    });
    const double f = seconds_of([&] { check_cuda(cudaFreeHost(p), "cudaFreeHost"); });
    std::printf("cudaHostAlloc %4llu MiB: %.1f ms (%.2f GB/s), cudaFreeHost %.1f ms\n",
                static_cast<unsigned long long>(mib), t * 1e3, (mib << 20) / t / 1e9, f * 1e3);
  }
  // Eight 16 MiB buffers (the default staging), pinned the ways a load could: one after the
  // other or from eight threads at once (does the driver serialize them?), with cudaHostAlloc
  // or as populated memory registered (what the engine does), and as one 128 MiB block.
  {
    constexpr int kN = 8;
    constexpr size_t kPiece = 16ull << 20;
    auto alloc_host = [](void** p) {
      check_cuda(cudaHostAlloc(p, kPiece, cudaHostAllocPortable), "cudaHostAlloc");
    };
    auto alloc_registered = [](void** p) {
      Result<std::span<std::byte>> m = map_populated(kPiece, 1);
      check(m.status());
      check_cuda(cudaHostRegister(m->data(), kPiece, cudaHostRegisterPortable),
                 "cudaHostRegister");
      *p = m->data();
    };
    auto free_host = [](void* p) { check_cuda(cudaFreeHost(p), "cudaFreeHost"); };
    auto free_registered = [](void* p) {
      check_cuda(cudaHostUnregister(p), "cudaHostUnregister");
      unmap_populated({static_cast<std::byte*>(p), kPiece});
    };
    struct Way {
      const char* name;
      std::function<void(void**)> alloc;
      std::function<void(void*)> free;
    };
    for (const Way& w : {Way{"cudaHostAlloc", alloc_host, free_host},
                         Way{"populate(1 thread)+cudaHostRegister", alloc_registered,
                             free_registered}}) {
      void* ptrs[kN] = {};
      const double one_by_one = seconds_of([&] {
        for (void*& p : ptrs) w.alloc(&p);
      });
      for (void* p : ptrs) w.free(p);
      const double at_once = seconds_of([&] {
        std::vector<std::thread> ts;
        for (void*& p : ptrs) ts.emplace_back([&w, &p] { w.alloc(&p); });
        for (std::thread& t : ts) t.join();
      });
      for (void* p : ptrs) w.free(p);
      std::printf("%s 8 x 16 MiB: one after the other %.1f ms, from 8 threads at once %.1f ms\n",
                  w.name, one_by_one * 1e3, at_once * 1e3);
    }
    // 128 MiB populated by 8 threads, then registered: with huge pages (map_populated's
    // default, the engine's) and without (bench_populate measures the populating alone).
    for (bool huge : {false, true}) {
      std::span<std::byte> block;
      const double populate = seconds_of([&] {
        Result<std::span<std::byte>> m = map_populated(kN * kPiece, 8, huge);
        check(m.status());
        block = *m;
      });
      const double reg = seconds_of([&] {
        check_cuda(cudaHostRegister(block.data(), block.size(), cudaHostRegisterPortable),
                   "cudaHostRegister");
      });
      check_cuda(cudaHostUnregister(block.data()), "cudaHostUnregister");
      unmap_populated(block);
      std::printf("populate(8 threads) 128 MiB, %s: %.1f ms, then cudaHostRegister: %.1f ms\n",
                  huge ? "huge pages (the engine's)" : "small pages", populate * 1e3, reg * 1e3);
    }
  }
  {
    const size_t bytes = 256ull << 20;
    void* p = nullptr;
    const double fault = seconds_of([&] {
      p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                 -1, 0);
    });
    const double reg = seconds_of([&] {
      check_cuda(cudaHostRegister(p, bytes, cudaHostRegisterPortable), "cudaHostRegister");
    });
    std::printf("mmap+MAP_POPULATE 256 MiB: %.1f ms; then cudaHostRegister: %.1f ms (%.2f GB/s)\n",
                fault * 1e3, reg * 1e3, bytes / reg / 1e9);
    (void)cudaHostUnregister(p);
    ::munmap(p, bytes);
    std::vector<std::byte> pageable(per_leaf, std::byte{1});
    Stat st = measure(runs, [&] {
      check_cuda(cudaMemcpy(dev[0], pageable.data(), per_leaf, cudaMemcpyHostToDevice),
                 "cudaMemcpy");
    });
    std::printf("%-44s %s\n", "pageable host->device (cudaMemcpy)", gbps(per_leaf, st).c_str());
  }
  // Zero copy from the page cache: the raw file mapped, its pages faulted in (8 threads) and
  // registered read-only (in one call, and in 8 parts from 8 threads), then copied to the
  // device straight from the mapping. What a load without staging buffers would cost: if
  // registering is fast enough, DMA from the page cache saves the copy into pinned memory.
  {
    const int fd = ::open(raw_path.c_str(), O_RDONLY);
    void* map = fd < 0 ? MAP_FAILED : ::mmap(nullptr, total, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
      std::printf("zero copy: cannot map %s\n", raw_path.c_str());
    } else {
      auto* base = static_cast<std::byte*>(map);
      constexpr int kParts = 8;
      const uint64_t part = (total / kParts + 4095) / 4096 * 4096;
      auto in_parts = [&](const std::function<void(std::byte*, uint64_t)>& fn) {
        std::vector<std::thread> ts;
        for (uint64_t off = 0; off < total; off += part) {
          ts.emplace_back([&fn, base, off, n = std::min(part, total - off)] { fn(base + off, n); });
        }
        for (std::thread& t : ts) t.join();
      };
      const double fault = seconds_of([&] {
        in_parts([](std::byte* p, uint64_t n) { (void)::madvise(p, n, MADV_POPULATE_READ); });
      });
      const unsigned flags = cudaHostRegisterPortable | cudaHostRegisterReadOnly;
      cudaError_t e = cudaSuccess;
      const double whole = seconds_of([&] { e = cudaHostRegister(map, total, flags); });
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        std::printf("zero copy: cudaHostRegister of the mapped file: %s\n", cudaGetErrorString(e));
      } else {
        (void)cudaHostUnregister(map);
        std::atomic<int> failed{0};
        const double parts = seconds_of([&] {
          in_parts([&](std::byte* p, uint64_t n) {
            if (cudaHostRegister(p, n, flags) != cudaSuccess) failed.fetch_add(1);
          });
        });
        cudaStream_t stream;
        check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
        const double copy = seconds_of([&] {
          for (int i = 0; i < kLeaves; ++i) {
            check_cuda(cudaMemcpyAsync(dev[i], base + i * per_leaf, per_leaf,
                                       cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync");
          }
          check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
        });
        (void)cudaStreamDestroy(stream);
        for (uint64_t off = 0; off < total; off += part) (void)cudaHostUnregister(base + off);
        std::printf("zero copy, %.2f GiB mapped file: fault in (8 threads) %.1f ms, register "
                    "%.1f ms in one call / %.1f ms in 8 parts at once%s, copy %.1f ms (%.2f "
                    "GB/s); all: %.2f GB/s\n",
                    total / double(1ull << 30), fault * 1e3, whole * 1e3, parts * 1e3,
                    failed.load() ? " (some parts FAILED)" : "", copy * 1e3, total / copy / 1e9,
                    total / (fault + parts + copy) / 1e9);
      }
      ::munmap(map, total);
    }
    if (fd >= 0) ::close(fd);
  }
  for (auto* p : dev) (void)cudaFree(p);
  std::remove(raw_path.c_str());
  std::remove(zstd_path.c_str());
  return 0;
}
