// Chunk checksums on the GPU (cuda/device_hash.h: the XXH3 kernel, issue 50) against the CPU's
// libxxhash on the same chunks: the hash rate of --mib MiB cut into chunks of --chunk-mib MiB
// with the format's kind of seeds, in GB/s (1e9), median of --runs runs after a warm-up.
//
//   build/bench/bench_device_hash [--mib 1024] [--chunk-mib 4] [--runs 5] [--threads 0]
//
// CPU rows: libxxhash as loads call it (codec/checksum.h), on one thread, and on --threads
// threads (0: one a core) each hashing whole chunks, as a load's verifying workers do.
// GPU row (only in builds with the kernel, on a CUDA device): the chunks already in device
// memory, hash_chunks_on_device for all of them (one launch, the chunk list copied in and the
// hashes out included), its hashes checked against libxxhash's (exit 1 if they differ). Without
// a device, or without the kernel, the GPU row says why and the program still succeeds.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#if JTREE_BENCH_DEVICE_HASH_KERNEL
#include <cuda_runtime_api.h>
#endif

#include "bench_util.h"
#include "codec/checksum.h"
#include "cuda/device_hash.h"

using namespace jtree;
using namespace jtree::bench;

namespace {

void row(const std::string& what, const std::string& result) {
  std::printf("%-34s: %s\n", what.c_str(), result.c_str());
}

struct Chunks {
  std::vector<uint8_t> bytes;
  uint64_t chunk_size = 0;
  std::vector<uint64_t> seeds;  // one a chunk: salt ^ offset
  size_t count() const { return seeds.size(); }
  uint64_t size(size_t i) const { return std::min(chunk_size, bytes.size() - i * chunk_size); }
};

Chunks make_chunks(uint64_t total, uint64_t chunk_size) {
  Chunks c;
  c.chunk_size = chunk_size;
  c.bytes.resize(total);
  uint64_t x = 0x9E3779B97F4A7C15ULL;  // (splitmix64: fast, incompressible enough for a hash)
  for (uint64_t i = 0; i + 8 <= total; i += 8) {
    x += 0x9E3779B97F4A7C15ULL;
    uint64_t z = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    std::memcpy(c.bytes.data() + i, &z, 8);
  }
  const uint64_t salt = 0xC0FFEE5A17ED0000ULL;
  for (uint64_t off = 0; off < total; off += chunk_size) c.seeds.push_back(chunk_seed(salt, off));
  return c;
}

// The chunks' XXH3 on `threads` threads, each taking the next chunk.
std::vector<uint64_t> cpu_hashes(const Chunks& c, unsigned threads) {
  std::vector<uint64_t> out(c.count());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < c.count();) {
      out[i] = xxh3(std::as_bytes(std::span(c.bytes.data() + i * c.chunk_size, c.size(i))),
                    c.seeds[i]);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  return out;
}

#if JTREE_BENCH_DEVICE_HASH_KERNEL
void gpu_row(const Chunks& c, const std::vector<uint64_t>& want, int runs) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    row("GPU XXH3 (kernel)", "not measured: no CUDA device");
    return;
  }
  void* mem = nullptr;
  if (cudaMalloc(&mem, c.bytes.size()) != cudaSuccess ||
      cudaMemcpy(mem, c.bytes.data(), c.bytes.size(), cudaMemcpyHostToDevice) != cudaSuccess) {
    row("GPU XXH3 (kernel)", "not measured: cudaMalloc/cudaMemcpy failed");
    return;
  }
  std::vector<DeviceChunkRef> refs;
  for (size_t i = 0; i < c.count(); ++i) {
    refs.push_back({static_cast<char*>(mem) + i * c.chunk_size, c.size(i), c.seeds[i]});
  }
  std::vector<uint64_t> got(c.count());
  Status st;
  const Stat s = measure(runs, [&] { st = hash_chunks_on_device(refs, got); });
  (void)cudaFree(mem);
  if (!st.ok()) {
    row("GPU XXH3 (kernel)", "failed: " + st.to_string());
    std::exit(1);
  }
  const char* verdict = got == want ? "  (hashes = libxxhash's)" : "  !!! NOT libxxhash's HASHES";
  row("GPU XXH3 (kernel)", gbps(c.bytes.size(), s) + verdict);
  if (got != want) std::exit(1);
}
#else
void gpu_row(const Chunks&, const std::vector<uint64_t>&, int) {
  row("GPU XXH3 (kernel)", "not measured: this build has no GPU checksum kernel (needs nvcc)");
}
#endif

}  // namespace

int main(int argc, char** argv) {
  uint64_t mib = 1024, chunk_mib = 4;
  int runs = 5;
  unsigned threads = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--mib") mib = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--chunk-mib") chunk_mib = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--runs") runs = std::atoi(argv[i + 1]);
    else if (a == "--threads") threads = static_cast<unsigned>(std::atoi(argv[i + 1]));
  }
  if (mib == 0 || chunk_mib == 0 || runs < 1) {
    std::fprintf(stderr, "bench_device_hash: --mib, --chunk-mib and --runs must be positive\n");
    return 2;
  }
  if (threads == 0) threads = std::max(1U, std::thread::hardware_concurrency());
  const Chunks c = make_chunks(mib << 20, chunk_mib << 20);
  std::printf("XXH3-64 with seeds of %zu chunks of %llu MiB (%llu MiB), median of %d runs:\n",
              c.count(), static_cast<unsigned long long>(chunk_mib),
              static_cast<unsigned long long>(mib), runs);
  std::vector<uint64_t> want;
  const Stat one = measure(runs, [&] { want = cpu_hashes(c, 1); });
  row("CPU XXH3 (libxxhash), 1 thread", gbps(c.bytes.size(), one));
  const Stat all = measure(runs, [&] { (void)cpu_hashes(c, threads); });
  row("CPU XXH3 (libxxhash), " + std::to_string(threads) + " threads", gbps(c.bytes.size(), all));
  gpu_row(c, want, runs);
  return 0;
}
