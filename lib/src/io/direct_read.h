// Reads of a local file with O_DIRECT, into memory the caller provides (the pinned staging
// buffers of a load to a device, lib/src/cuda/staging.cc).
//
// Why: a cold-cache load of a raw (uncompressed) file to a GPU then reads each byte once, from
// the disk straight into pinned memory by DMA: no copy out of the page cache, and a
// multi-GB checkpoint does not push everything else out of the page cache (nor stay there,
// taking memory the inference server wants). Buffered reads remain for everything else.
//
// Only the plain local-file Source (open_file_source, what Reader::open gives for a local
// path) offers it: remote backends, memory sources and decorated sources (fault injection)
// answer "not available", and their loads read as before. The O_DIRECT descriptor is a second
// one, opened on first use through /proc/self/fd of the Source's own descriptor, so that it is
// the very file the Source opened even if the path has been replaced since.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "jtree/io.h"

namespace jtree::io {

/// Whether, and with what alignment, `read_direct` works on a Source.
struct DirectReadSupport {
  bool available = false;
  /// File offsets and lengths of direct reads must be multiples of this (statx
  /// STATX_DIOALIGN's stx_dio_offset_align where the kernel reports it, else 4096).
  uint64_t offset_align = 0;
  /// Buffer addresses must be multiples of this (stx_dio_mem_align, else 4096).
  uint64_t memory_align = 0;
  /// Why not, when not available ("tmpfs refuses O_DIRECT"...), for DeviceStats and errors.
  std::string reason;
};

/// Opens the O_DIRECT descriptor of `source` on the first call (once per Source; thread-safe)
/// and says whether direct reads are available. Never an error: "not available" instead.
DirectReadSupport direct_read_support(const Source& source);

/// Reads `dst.size()` bytes at file offset `offset` with O_DIRECT into `dst`. `offset`,
/// `dst.size()` and `dst.data()` must follow direct_read_support's alignment (InvalidArgument
/// otherwise). Returns the bytes read: fewer than asked only at the end of the file.
/// Errors name the file; a refusal of the kernel (EINVAL: an alignment it wants bigger than it
/// reported) is NotSupported, so that the caller may read those bytes buffered instead.
/// Counted in the Source's IoStats like its other reads.
Result<uint64_t> read_direct(const Source& source, uint64_t offset, std::span<std::byte> dst);

/// A byte range [offset, offset + size) of a file.
struct FileExtent {
  uint64_t offset = 0;
  uint64_t size = 0;
};

/// The share of the pages of `extents` (byte ranges of a local file, sorted by offset and not
/// overlapping; clipped to the file: {0, UINT64_MAX} is all of it) that are in the page
/// cache (0 to 1), for DirectIo::kAuto
/// and ZeroCopy::kAuto: bytes read from memory are read faster buffered than with O_DIRECT,
/// which would fetch them from the disk again. Only those bytes are asked about (cachestat(2)
/// per extent, Linux 6.5+, else mincore(2) over mappings of them), so that a load's cost
/// follows the bytes it reads, not the size of the file. 1 for no extents; nullopt for other
/// Sources, or where the kernel answers neither cachestat(2) nor mincore(2).
std::optional<double> cached_fraction(const Source& source, std::span<const FileExtent> extents);

/// Extents closer than this are merged into one (merge_extents): one residency question and
/// one run of reads for both, the bytes between read too, which costs less than another
/// request or system call.
inline constexpr uint64_t kExtentGap = uint64_t{1} << 20;

/// `extents` sorted by offset and merged where they overlap or lie at most kExtentGap apart,
/// empty ones dropped: what cached_fraction and O_DIRECT reads of a load take.
std::vector<FileExtent> merge_extents(std::vector<FileExtent> extents);

/// A load treats a file as warm (reads it buffered: not with O_DIRECT, not by zero copy) when
/// at least this share of the pages it reads is in the page cache (cached_fraction): copying
/// out of memory then beats reading the disk again, and registering cold pages would read
/// them from the disk.
inline constexpr double kCachedEnough = 0.5;

/// All of a file, as an extent for cached_fraction.
inline constexpr FileExtent kWholeFile{0, UINT64_MAX};

/// Tests only: the pages cached_fraction has asked about, in all, since the process started.
uint64_t cached_fraction_pages_asked_for_testing();

/// A shared, read-only mapping (MAP_SHARED, PROT_READ) of the whole local file, for zero-copy
/// loads to a device (DeviceOptions::zero_copy): pinning its pages for DMA pins the page
/// cache's own pages. (The Source's mapping is private and writable: the kernel may give a
/// long-term pin of such a page a copy of its own, which is what zero copy avoids.) Null for
/// other Sources, and where mmap fails.
std::shared_ptr<const MappedFile> map_shared_read_only(const Source& source);

/// How much of the file cached_fraction's mincore(2) fallback maps and asks about at once:
/// its memory is one byte per page of this (256 KiB with 4 KiB pages) whatever the size of
/// the file, and a mapping of a whole file may not fit a 32-bit address space.
inline constexpr uint64_t kMincoreWindowBytes = uint64_t{1} << 30;

/// Tests only: while set, opening the O_DIRECT descriptor fails as on a file system without
/// O_DIRECT (EINVAL), for Sources that have not opened it yet. Kernels since 6.6 accept
/// O_DIRECT on tmpfs, so /dev/shm no longer exercises the fallback by itself.
void set_refuse_direct_open_for_testing(bool refuse);

/// Tests only: while set, every read_direct fails as a kernel refusing the alignment does
/// (EINVAL: NotSupported).
void set_refuse_direct_reads_for_testing(bool refuse);

/// Tests only: while nonzero, cached_fraction skips cachestat(2), as on kernels before 6.5,
/// and asks mincore(2) `window_bytes` of the file at a time (rounded up to whole pages)
/// instead of kMincoreWindowBytes, so that a small file spans several windows. 0: as normal.
void set_cached_fraction_by_mincore_for_testing(uint64_t window_bytes);

}  // namespace jtree::io
