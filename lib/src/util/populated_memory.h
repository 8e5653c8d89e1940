// Anonymous memory whose pages are all faulted in before it is returned, by several threads.
//
// Why: pinning memory for a device (cudaHostRegister) is fast for pages already present (about
// 20-30 GB/s measured on an H200 host) but the kernel faults in and zeroes the missing ones
// on one thread (about 2-3 GB/s, which is also all cudaHostAlloc achieves). Zeroing pages
// spreads over cores, so a staging buffer populated by a few threads first and registered
// after pins several times faster than cudaHostAlloc (bench/gpu.md). Backed by transparent
// huge pages where the kernel gives them (2 MiB-aligned, MADV_HUGEPAGE): one fault and one
// zeroing per 2 MiB instead of 512 faults, about half the time to populate measured on a
// 2-vCPU host (27 -> 14 ms for 128 MiB, 2 threads: bench/bench_populate; bench_device
// measures both, and the registering after, on a GPU host).
#pragma once

#include <cstddef>
#include <span>

#include "jtree/status.h"

namespace jtree {

/// Huge pages are 2 MiB on the platforms jtree pins memory on (x86-64, and arm64 with 4 KiB
/// pages); where they are another size the memory is still correct, only less of it huge.
inline constexpr size_t kHugePageBytes = size_t{2} << 20;

/// `bytes` (> 0) of zeroed, page-aligned, private anonymous memory, every page faulted in by
/// up to `threads` threads (at least 4 MiB each). With `huge_pages` and at least
/// kHugePageBytes, the memory is kHugePageBytes-aligned and advised MADV_HUGEPAGE before it is
/// faulted in, by a write per page where the first write brought a huge page (the kernel may
/// still give small pages: THP "never", or none free); small pages with MADV_POPULATE_WRITE
/// where the kernel has it, else the writes.
/// Faulting huge pages in does not hold up the process's other threads' mmap and munmap
/// (populated_memory.cc says why). Not mapped in a child of fork() (MADV_DONTFORK: the memory
/// is for pinning; populated_memory.cc says why). ResourceExhausted when the memory cannot be
/// had. Free with unmap_populated.
Result<std::span<std::byte>> map_populated(size_t bytes, int threads, bool huge_pages = true);

/// Frees memory from map_populated (the span it returned).
void unmap_populated(std::span<std::byte> memory);

}  // namespace jtree
