// Anonymous memory whose pages are all faulted in before it is returned, by several threads.
//
// Why: pinning memory for a device (cudaHostRegister) is fast for pages already present (about
// 20-30 GB/s measured on an H200 host) but the kernel faults in and zeroes the missing ones
// on one thread (about 2-3 GB/s, which is also all cudaHostAlloc achieves). Zeroing pages
// spreads over cores, so a staging buffer populated by a few threads first and registered
// after pins several times faster than cudaHostAlloc (bench/gpu.md).
#pragma once

#include <cstddef>
#include <span>

#include "jtree/status.h"

namespace jtree {

/// `bytes` (> 0) of zeroed, page-aligned, private anonymous memory, every page faulted in
/// (MADV_POPULATE_WRITE where the kernel has it, else a write per page) by up to `threads`
/// threads (at least one per 4 MiB). ResourceExhausted when the memory cannot be had. Free
/// with unmap_populated.
Result<std::span<std::byte>> map_populated(size_t bytes, int threads);

/// Frees memory from map_populated (the span it returned).
void unmap_populated(std::span<std::byte> memory);

}  // namespace jtree
