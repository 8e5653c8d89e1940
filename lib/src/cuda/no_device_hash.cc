// cuda/device_hash.h in builds without the kernel (JTREE_CUDA off, no CUDA toolkit, or no nvcc).
#include "cuda/device_hash.h"

namespace jtree {

bool device_hash_built() { return false; }

Status hash_chunks_on_device(std::span<const DeviceChunkRef> chunks, std::span<uint64_t> hashes,
                             void* stream) {
  (void)chunks;
  (void)hashes;
  (void)stream;
  return Status::not_supported(
      "jtree: this build has no GPU checksum kernel (it needs JTREE_CUDA on and the CUDA "
      "compiler nvcc at configure time)");
}

}  // namespace jtree
