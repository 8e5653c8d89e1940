// Chunk checksums on a CUDA device (cuda/device_hash.h): XXH3-64 with a seed, one warp per chunk
// over XXH3's long path (cuda/xxh3_warp.h says why a warp can share a chunk), one lane per chunk
// of at most 240 bytes (XXH3's short paths have no such parallelism). The per-lane code is
// cuda/xxh3_warp.h and cuda/xxh3_device.h, tested on the CPU by test_xxh3_device; on a GPU by
// test_device_hash.
#include <cuda_runtime_api.h>

#include <string>

#include "cuda/device_hash.h"
#include "cuda/xxh3_warp.h"

namespace jtree {
namespace {

namespace x = portable_xxh3;

constexpr unsigned kWarp = x::kWarpLanes;
constexpr unsigned kWarpsPerBlock = 2;   // (few threads a CTA: the chunks spread over the SMs)
constexpr unsigned kBlocksPerBatch = 4;  // blocks loaded before any is summed (loads in flight)

// Accumulator (lane % 8)'s total over the warp: each lane's keyed products plus its neighbour's
// raw words (lane ^ 1 holds word ^ 1), summed over the 4 stripe groups (lanes ^ 8, ^ 16).
// (test_xxh3_device emulates exactly these shuffles.)
__device__ uint64_t warp_sum(x::LanePartial p) {
  uint64_t sum = p.products + __shfl_xor_sync(0xffffffffU, p.words, 1);
  sum += __shfl_xor_sync(0xffffffffU, sum, 8);
  return sum + __shfl_xor_sync(0xffffffffU, sum, 16);
}

__device__ uint64_t warp_hash_long(const uint8_t* in, uint64_t len, uint64_t seed, unsigned lane) {
  x::LaneState state(lane, seed);
  const uint64_t blocks = (len - 1) / x::kBlockBytes;
  uint64_t b = 0;
  for (; b + kBlocksPerBatch <= blocks; b += kBlocksPerBatch) {
    uint64_t words[kBlocksPerBatch][x::kStripesPerLane];
#pragma unroll
    for (unsigned j = 0; j < kBlocksPerBatch; ++j) {
      x::load_lane_words(in + (b + j) * x::kBlockBytes, lane, words[j]);
    }
#pragma unroll
    for (unsigned j = 0; j < kBlocksPerBatch; ++j) state.end_block(warp_sum(state.block(words[j])));
  }
  for (; b < blocks; ++b) {
    uint64_t words[x::kStripesPerLane];
    x::load_lane_words(in + b * x::kBlockBytes, lane, words);
    state.end_block(warp_sum(state.block(words)));
  }
  state.end_tail(warp_sum(state.tail(in + blocks * x::kBlockBytes, x::tail_stripes(len),
                                     in + len - x::kStripeBytes)));
  uint64_t acc[8];
  for (unsigned i = 0; i < 8; ++i) acc[i] = __shfl_sync(0xffffffffU, state.accumulator(), i);
  return x::merge_accumulators(acc, len, seed);
}

__global__ void __launch_bounds__(kWarp * kWarpsPerBlock)
    hash_chunks_kernel(const DeviceChunkRef* chunks, uint64_t count, uint64_t* hashes) {
  const uint64_t chunk = uint64_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / kWarp;
  const unsigned lane = threadIdx.x % kWarp;
  if (chunk >= count) return;  // (the whole warp: the shuffles below see every lane)
  const DeviceChunkRef ref = chunks[chunk];
  const auto* in = static_cast<const uint8_t*>(ref.data);
  if (ref.size <= x::kMaxShortInput) {
    if (lane == 0) hashes[chunk] = x::hash_short(in, ref.size, ref.seed);
    return;
  }
  const uint64_t h = warp_hash_long(in, ref.size, ref.seed, lane);
  if (lane == 0) hashes[chunk] = h;
}

Status cuda_failure(const char* what, cudaError_t e) {
  return Status::io_error(std::string("jtree: XXH3 on the device: ") + what + ": " +
                          cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

// Device memory for the chunk list and the hashes, freed in stream order.
Status run_kernel(std::span<const DeviceChunkRef> chunks, std::span<uint64_t> hashes,
                  cudaStream_t stream) {
  const size_t list_bytes = chunks.size_bytes();
  void* mem = nullptr;
  cudaError_t e = cudaMallocAsync(&mem, list_bytes + hashes.size_bytes(), stream);
  if (e != cudaSuccess) return cuda_failure("cudaMallocAsync", e);
  auto* list = static_cast<DeviceChunkRef*>(mem);
  auto* out = reinterpret_cast<uint64_t*>(static_cast<char*>(mem) + list_bytes);
  e = cudaMemcpyAsync(list, chunks.data(), list_bytes, cudaMemcpyHostToDevice, stream);
  if (e == cudaSuccess) {
    const uint64_t grid = (chunks.size() + kWarpsPerBlock - 1) / kWarpsPerBlock;
    hash_chunks_kernel<<<static_cast<unsigned>(grid), kWarp * kWarpsPerBlock, 0, stream>>>(
        list, chunks.size(), out);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) {
    e = cudaMemcpyAsync(hashes.data(), out, hashes.size_bytes(), cudaMemcpyDeviceToHost, stream);
  }
  const cudaError_t freed = cudaFreeAsync(mem, stream);
  const cudaError_t synced = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) return cuda_failure("hashing", e);
  if (freed != cudaSuccess) return cuda_failure("cudaFreeAsync", freed);
  if (synced != cudaSuccess) return cuda_failure("cudaStreamSynchronize", synced);
  return Status();
}

}  // namespace

bool device_hash_built() { return true; }

Status hash_chunks_on_device(std::span<const DeviceChunkRef> chunks, std::span<uint64_t> hashes,
                             void* stream) {
  if (hashes.size() != chunks.size()) {
    return Status::invalid_argument("jtree: " + std::to_string(chunks.size()) +
                                    " chunks to hash on the device, room for " +
                                    std::to_string(hashes.size()) + " hashes");
  }
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (chunks[i].data == nullptr && chunks[i].size != 0) {
      return Status::invalid_argument("jtree: chunk " + std::to_string(i) +
                                      " to hash on the device has no address");
    }
  }
  // (The grid's x dimension holds 2^31 - 1 CTAs: far more chunks than any load has.)
  if (chunks.empty()) return Status();
  if (chunks.size() / kWarpsPerBlock >= (uint64_t{1} << 31) - 1) {
    return Status::invalid_argument("jtree: too many chunks to hash on the device at once");
  }
  return run_kernel(chunks, hashes, static_cast<cudaStream_t>(stream));
}

}  // namespace jtree
