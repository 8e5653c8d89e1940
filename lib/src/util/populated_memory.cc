// See populated_memory.h.
#include "util/populated_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <system_error>
#include <thread>
#include <vector>

namespace jtree {

namespace {

// Whether the page fault that wrote p[0] (p: a huge page's start) brought a whole huge page:
// every small page of [p, p + kHugePageBytes) resident now (mincore).
// (On the stack: this runs on the populating threads, where nothing may throw.)
bool faulted_in_huge(std::byte* p, size_t page) {
  std::array<unsigned char, kHugePageBytes / 4096> resident;  // (pages are 4 KiB or more)
  const size_t pages = kHugePageBytes / page;
  if (pages > resident.size() || ::mincore(p, kHugePageBytes, resident.data()) != 0) return false;
  return std::all_of(resident.begin(), resident.begin() + static_cast<std::ptrdiff_t>(pages),
                     [](unsigned char r) { return r & 1; });
}

// Faults in [p, p + n) (page-aligned p; `huge`: advised for huge pages, p then a huge page's
// start). Where the kernel gives huge pages: a write per page (a fault per huge page; the
// other writes land in pages already there). Why not MADV_POPULATE_WRITE there: the kernel
// holds the process's mmap lock through a whole call, and every mmap and munmap of the
// process waits for it (cudaMalloc's mappings, an allocator's fresh arenas: the allocations
// of the thread that loads while its staging buffers are pinned ahead), even in pieces
// (readers keep taking the lock back until the waiting writer's hand-off, milliseconds
// later). A fault takes only its mapping's lock (per-VMA locks, Linux 6.4+). Measured on a
// 2-vCPU host (bench_populate, bench/gpu.md): another thread's mmap waited 15 ms, all of a
// one-call populate of 128 MiB, and under 0.3 ms beside the writes, which fault the huge pages
// in 3-4% slower. Small pages (none asked for, or the first write got none: THP "never", none
// free): MADV_POPULATE_WRITE (Linux 5.14+; a fault per 4 KiB page takes three times as
// long), else the writes.
void populate(std::byte* p, size_t n, size_t page, bool huge) {
  size_t at = 0;
  if (huge && n >= kHugePageBytes) {
    *reinterpret_cast<volatile std::byte*>(p) = std::byte{0};  // (fresh memory is zero)
    if (faulted_in_huge(p, page)) {
      for (at = kHugePageBytes; at < n; at += page) {
        *reinterpret_cast<volatile std::byte*>(p + at) = std::byte{0};
      }
      return;
    }
  }
#ifdef MADV_POPULATE_WRITE
  if (::madvise(p, n, MADV_POPULATE_WRITE) == 0) return;
#endif
  for (; at < n; at += page) {
    *reinterpret_cast<volatile std::byte*>(p + at) = std::byte{0};
  }
}

// `bytes` of fresh anonymous memory starting at a multiple of `align` (a multiple of the
// page size): mapped with `align` to spare, the slack before and after unmapped again, so
// that unmap_populated frees exactly [start, start + bytes).
std::byte* map_aligned(size_t bytes, size_t align, size_t page) {
  const size_t length = bytes + (align > page ? align : 0);
  void* addr = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (addr == MAP_FAILED) return nullptr;
  auto* raw = static_cast<std::byte*>(addr);
  const uintptr_t at = reinterpret_cast<uintptr_t>(raw);
  std::byte* p = raw + ((align - at % align) % align);
  std::byte* end = p + (bytes + page - 1) / page * page;
  if (p > raw) ::munmap(raw, static_cast<size_t>(p - raw));
  if (raw + length > end) ::munmap(end, static_cast<size_t>(raw + length - end));
  return p;
}

}  // namespace

Result<std::span<std::byte>> map_populated(size_t bytes, int threads, bool huge_pages) {
  if (bytes == 0) return Status::invalid_argument("map_populated: 0 bytes");
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const bool huge = huge_pages && bytes >= kHugePageBytes && kHugePageBytes % page == 0;
  std::byte* p = map_aligned(bytes, huge ? kHugePageBytes : page, page);
  if (p == nullptr) {
    return Status::resource_exhausted("mmap of " + std::to_string(bytes) +
                                      " bytes: " + std::strerror(errno));
  }
#ifdef MADV_HUGEPAGE
  // (Fails only where the kernel has no transparent huge pages: small pages then, as asked.)
  if (huge) (void)::madvise(p, bytes, MADV_HUGEPAGE);
#endif
  // Not inherited by fork()'s children: the memory is for pinning, and the kernel copies a
  // pinned page into the child at the fork (Linux 5.9+: it cannot be shared copy-on-write
  // while a device may read it), so every fork after a GPU load (a data loader's workers)
  // would copy all the staging memory, for a child that cannot use the device anyway.
  (void)::madvise(p, bytes, MADV_DONTFORK);
  const size_t pages = (bytes + page - 1) / page;
  // Parts of at least 4 MiB: thread start-up is worth it only above that. Each part a whole
  // number of huge pages, so that no two threads fault in the same one.
  const size_t min_part_pages = std::max<size_t>(1, (4u << 20) / page);
  const size_t unit = huge ? kHugePageBytes / page : 1;
  const size_t parts = std::clamp<size_t>(pages / min_part_pages, 1,
                                          static_cast<size_t>(std::max(1, threads)));
  const size_t per = ((pages + parts - 1) / parts + unit - 1) / unit * unit;
  auto part = [&](size_t i) {
    const size_t first = i * per;
    if (first >= pages) return;
    const size_t n = std::min(per, pages - first);
    populate(p + first * page, std::min(n * page, bytes - first * page), page, huge);
  };
  std::vector<std::thread> helpers;
  for (size_t i = 1; i < parts; ++i) {
    try {
      helpers.emplace_back(part, i);
    } catch (const std::system_error&) {
      part(i);  // (no thread to be had: this one does that part too)
    }
  }
  part(0);
  for (std::thread& t : helpers) t.join();
  return std::span<std::byte>(p, bytes);
}

void unmap_populated(std::span<std::byte> memory) {
  if (!memory.empty()) ::munmap(memory.data(), memory.size());
}

}  // namespace jtree
