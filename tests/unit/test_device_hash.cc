// The GPU checksum kernel (cuda/device_hash.h, xxh3_kernel.cu) against libxxhash's
// XXH3_64bits_withSeed: every length class, unaligned chunks, many seeds, chunks of 4 MiB, and a
// damaged chunk found by its index. Built only with the kernel (nvcc found). Needs a CUDA device
// (without one: Skipped, see cuda_test_main.h).
#define DOCTEST_CONFIG_IMPLEMENT
#include <cuda_runtime_api.h>
#include <xxhash.h>

#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "cuda/device_hash.h"
#include "unit/cuda_test_main.h"
#include "unit/xxh3_cases.h"

using namespace jtree;
using namespace jtree::testing;

namespace {

struct ChunkSpec {
  uint64_t size;
  unsigned shift;  // bytes past an 8-byte boundary
  uint64_t seed;
};

// Chunks laid out in one device buffer, with their bytes on the host and their expected hashes.
class DeviceBatch {
 public:
  explicit DeviceBatch(const std::vector<ChunkSpec>& specs) {
    std::vector<uint64_t> starts;
    uint64_t end = 0;
    for (const ChunkSpec& c : specs) {
      starts.push_back((end + 7) / 8 * 8 + c.shift);
      end = starts.back() + c.size;
    }
    host_ = xxh3_random_bytes(end, specs.size());
    REQUIRE(cudaMalloc(&device_, std::max<uint64_t>(end, 1)) == cudaSuccess);
    REQUIRE(cudaMemcpy(device_, host_.data(), end, cudaMemcpyHostToDevice) == cudaSuccess);
    for (size_t i = 0; i < specs.size(); ++i) {
      refs_.push_back({static_cast<char*>(device_) + starts[i], specs[i].size, specs[i].seed});
      expected_.push_back(XXH3_64bits_withSeed(host_.data() + starts[i], specs[i].size,
                                               specs[i].seed));
    }
  }
  ~DeviceBatch() { (void)cudaFree(device_); }
  DeviceBatch(const DeviceBatch&) = delete;
  DeviceBatch& operator=(const DeviceBatch&) = delete;

  const std::vector<DeviceChunkRef>& refs() const { return refs_; }
  const std::vector<uint64_t>& expected() const { return expected_; }

  // Flips a byte of chunk i on the device.
  void damage(size_t i, uint64_t at) {
    const auto* src = static_cast<const uint8_t*>(refs_[i].data) + at;
    const uint8_t flipped = host_[src - static_cast<const uint8_t*>(device_)] ^ 0x01;
    REQUIRE(cudaMemcpy(const_cast<uint8_t*>(src), &flipped, 1, cudaMemcpyHostToDevice) ==
            cudaSuccess);
  }

  // Checks the device's hashes against libxxhash's, chunk by chunk.
  void check() const {
    std::vector<uint64_t> got(refs_.size());
    const Status st = hash_chunks_on_device(refs_, got);
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("chunk ", i, ": ", refs_[i].size, " bytes, seed ", refs_[i].seed);
      CHECK(got[i] == expected_[i]);
    }
  }

 private:
  std::vector<uint8_t> host_;
  void* device_ = nullptr;
  std::vector<DeviceChunkRef> refs_;
  std::vector<uint64_t> expected_;
};

}  // namespace

TEST_CASE("GPU XXH3: every length class and its edges, every seed, aligned and not") {
  std::vector<ChunkSpec> specs;
  for (uint64_t size : xxh3_edge_lengths()) {
    for (uint64_t seed : xxh3_seeds()) {
      for (unsigned shift : {0U, 1U, 3U, 4U, 7U}) specs.push_back({size, shift, seed});
    }
  }
  DeviceBatch(specs).check();
}

TEST_CASE("GPU XXH3: random chunks of every size class in one batch, several of 4 MiB") {
  std::mt19937_64 rng(50);
  std::vector<ChunkSpec> specs;
  for (int i = 0; i < 600; ++i) {
    const uint64_t limit = uint64_t{1} << (rng() % 17);  // 1 B .. 64 KiB
    specs.push_back({rng() % (limit + 1), static_cast<unsigned>(rng() % 8), rng()});
  }
  for (int i = 0; i < 6; ++i) specs.push_back({(uint64_t{4} << 20) - i * 61, unsigned(i), rng()});
  DeviceBatch(specs).check();
}

TEST_CASE("GPU XXH3: a damaged chunk is found by its index") {
  std::vector<ChunkSpec> specs;
  for (int i = 0; i < 40; ++i) specs.push_back({uint64_t(1) << (i % 23), unsigned(i % 8), 9u + i});
  DeviceBatch batch(specs);
  auto clean = find_mismatched_chunks(batch.refs(), batch.expected());
  REQUIRE_MESSAGE(clean.ok(), clean.status().to_string());
  CHECK(clean->empty());
  batch.damage(17, 12345);       // 2^17 bytes: the long path
  batch.damage(3, 7);            // 8 bytes
  auto found = find_mismatched_chunks(batch.refs(), batch.expected());
  REQUIRE(found.ok());
  CHECK(*found == std::vector<size_t>{3, 17});
}

TEST_CASE("GPU XXH3: empty batches, empty chunks and the callers' mistakes") {
  std::vector<uint64_t> none;
  CHECK(hash_chunks_on_device({}, none).ok());
  const DeviceChunkRef empty{nullptr, 0, 5};
  uint64_t h = 0;
  REQUIRE(hash_chunks_on_device(std::span(&empty, 1), std::span(&h, 1)).ok());
  CHECK(h == XXH3_64bits_withSeed(nullptr, 0, 5));
  const DeviceChunkRef null_with_bytes{nullptr, 10, 0};
  CHECK(hash_chunks_on_device(std::span(&null_with_bytes, 1), std::span(&h, 1)).code() ==
        StatusCode::kInvalidArgument);
  CHECK(hash_chunks_on_device(std::span(&empty, 1), none).code() ==
        StatusCode::kInvalidArgument);
  CHECK(find_mismatched_chunks(std::span(&empty, 1), none).status().code() ==
        StatusCode::kInvalidArgument);
}

int main(int argc, char** argv) {
  return run_with_cuda_device(argc, argv, "test_device_hash",
                              "the GPU XXH3 kernel is NOT tested (its code is, on the CPU: "
                              "test_xxh3_device)");
}
