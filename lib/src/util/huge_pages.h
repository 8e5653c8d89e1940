// Transparent huge pages for big, freshly allocated metadata arrays.
//
// Opening a file with 100,000 leaves allocates tens of MB (the header bytes, the Tree's node and
// leaf arrays) and touches all of it at once. With 4 KiB pages that is thousands of page
// faults, which cost more than the decoding itself on a VM (measured: 24 MiB first touched in
// 35 ms with 4 KiB pages, 12 ms with 2 MiB pages). Asking for huge pages on the 2 MiB-aligned
// part of such an array makes it a handful of faults.
#pragma once

#include <cstddef>

namespace jtree {

/// Below this size an array is left alone.
inline constexpr size_t kHugePageMinBytes = size_t{4} << 20;

/// Advises the kernel to back [p, p + bytes) with transparent huge pages where it can (the
/// whole 2 MiB pages inside it; Linux's MADV_HUGEPAGE). Only a hint: contents are unaffected,
/// errors are ignored, and it does nothing for arrays under kHugePageMinBytes or elsewhere
/// than Linux. Call it before the memory is first written.
void advise_huge_pages(const void* p, size_t bytes);

}  // namespace jtree
