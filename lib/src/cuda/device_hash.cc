// Comparing chunk checksums computed on the device with the expected ones (every build: the
// hashing itself is xxh3_kernel.cu or, without nvcc, no_device_hash.cc).
#include "cuda/device_hash.h"

namespace jtree {

Result<std::vector<size_t>> find_mismatched_chunks(std::span<const DeviceChunkRef> chunks,
                                                   std::span<const uint64_t> expected,
                                                   void* stream) {
  if (expected.size() != chunks.size()) {
    return Status::invalid_argument("jtree: " + std::to_string(chunks.size()) +
                                    " chunks to verify on the device, " +
                                    std::to_string(expected.size()) + " checksums");
  }
  std::vector<uint64_t> got(chunks.size());
  if (Status st = hash_chunks_on_device(chunks, got, stream); !st.ok()) return st;
  std::vector<size_t> mismatched;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != expected[i]) mismatched.push_back(i);
  }
  return mismatched;
}

}  // namespace jtree
