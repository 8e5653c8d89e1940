// Chunk checksums computed on a CUDA device: XXH3-64 with each chunk's seed (the format's
// `salt ^ offset`, spec/FORMAT.md "Checksums") over bytes already in device memory, one warp per
// chunk (xxh3_kernel.cu, from the same functions as cuda/xxh3_device.h).
//
// Not yet used by loads (issue 50): a load still verifies on the CPU. The kernel is compiled
// only where the CUDA compiler (nvcc) was found with JTREE_CUDA on; elsewhere these functions
// report NotSupported. This header needs no CUDA headers.
//
// Thread safety: the functions may be called from several threads at once (each on its own
// stream, or the same one).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "jtree/status.h"

namespace jtree {

/// A chunk's stored bytes in memory the current CUDA device can read, and its checksum seed.
struct DeviceChunkRef {
  const void* data = nullptr;  ///< device (or device-mapped) memory; unused when size is 0
  uint64_t size = 0;
  uint64_t seed = 0;
};

/// Whether this build has the GPU XXH3 kernel (false: the functions below are NotSupported).
bool device_hash_built();

/// XXH3-64 of each chunk with its seed, written to `hashes[i]` (host memory, as many as chunks),
/// computed on the current CUDA device in `stream` (a cudaStream_t; nullptr for the default
/// stream). Returns when the hashes are in `hashes`.
/// Errors: InvalidArgument (sizes differ, a null pointer with bytes); NotSupported (no kernel in
/// this build); IOError (a CUDA call failed: no device, out of memory, a fault).
/// Unsafe: pointers the device cannot read make the kernel fault, which loses the CUDA context
/// of the whole process. Chunks of up to 240 bytes are hashed by one thread each, slowly.
Status hash_chunks_on_device(std::span<const DeviceChunkRef> chunks, std::span<uint64_t> hashes,
                             void* stream = nullptr);

/// The indices of the chunks whose hash (computed as above) is not `expected[i]`, in order;
/// empty when all match. The caller names them (leaf, chunk) in its Corruption.
/// Errors: those of hash_chunks_on_device; InvalidArgument when the counts differ.
Result<std::vector<size_t>> find_mismatched_chunks(std::span<const DeviceChunkRef> chunks,
                                                   std::span<const uint64_t> expected,
                                                   void* stream = nullptr);

}  // namespace jtree
