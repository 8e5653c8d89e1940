// Cold reads of local files: when the bytes a read_many call fetches (a host load's
// compressed chunks and the leaves it does not map; the pieces a load to a device stages
// buffered) are mostly not in the page cache, every fetch unit is read with O_DIRECT, up to
// kPartBytes at a time, many at once, into a scratch buffer backed by transparent huge pages
// (read_many.cc, fetch_direct); everything else reads as before (pread, the file's mapping).
//
// Why O_DIRECT: a buffered read of a cold file has the kernel allocate page-cache pages and
// copy every byte out of them after the disk filled them, and the page cache's readahead
// keeps only a few requests in flight per reader. Why huge pages: a block device takes a
// bounded number of memory segments per request (virtio: 254), so an O_DIRECT read into
// 4 KiB pages is cut into requests of about 1 MiB, while 2 MiB pages let each request be as
// large as the device allows (on this project's CI VM, ext4 on virtio, a 1.6 GiB file, 8
// reads of 8 MiB in flight: 0.55-0.65 GB/s into 4 KiB pages, 2-5 GB/s into reused huge
// pages; bench/README.md, "Cold reads"). Why the buffers are reused scratch: fresh memory
// costs a page fault and zeroing per page, which on that VM made O_DIRECT into new memory
// (0.6-2.2 GB/s, 0.8-2.4 s of system time for 1.6 GiB) slower than the page cache. For that
// reason the leaves a host load maps (Reader::map_leaves: raw leaves, views of the file's
// map) stay on the page cache, cold or not: their memory is the page cache's own pages,
// which the disk fills without a copy or a zeroing.
// Why threads of preads, not io_uring: the reads are few and large (8 MiB), so a thread per
// read in flight costs nothing measurable, and io_uring would need liburing (not a
// dependency of this project) or raw system calls that some container runtimes forbid.
//
// What decides: the share of the call's own extents that is in the page cache
// (io::cached_fraction, asked once per call about those extents only, never the whole file),
// the file system's acceptance of O_DIRECT (io::direct_read_support: tmpfs before Linux 6.6
// refuses it; on later kernels a tmpfs file is always in memory, so residency says no), and
// a minimum size. A read the kernel refuses mid-load (EINVAL) is read buffered instead;
// checksums are verified on the bytes read, as on every other path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "io/direct_read.h"
#include "jtree/io.h"
#include "jtree/options.h"

namespace jtree::cold {

/// The size of one O_DIRECT read: large enough for the device's largest requests, small
/// enough that a queue of them stays within ReadOptions::max_bytes_in_flight.
inline constexpr uint64_t kPartBytes = uint64_t{8} << 20;

/// O_DIRECT reads in flight at least (more with more threads asked for): measured on the CI
/// VM, 4 reads of 8 MiB already reach the disk's rate, 8 leave a margin for faster disks.
inline constexpr int kMinQueueDepth = 8;

/// Calls that fetch fewer bytes than this read buffered: the alignment slack and the set-up (the
/// O_DIRECT descriptor, the residency question) are not worth it for them.
inline constexpr uint64_t kMinDirectBytes = uint64_t{1} << 20;

/// Whether a read of `merged` (io::merge_extents' output) uses O_DIRECT: a local file whose
/// file system accepts it, at least kMinDirectBytes, less than io::kCachedEnough of it in the
/// page cache. On true, `support` is the file's O_DIRECT alignment.
bool use_direct(const Source& source, std::span<const io::FileExtent> merged,
                io::DirectReadSupport& support);

/// O_DIRECT reads a call keeps in flight (its workers: each reads a unit, then decodes it): at
/// least kMinQueueDepth, or the threads asked for, but no more parts than
/// max_bytes_in_flight holds.
int queue_depth(const ReadOptions& options);

/// One aligned O_DIRECT read: file bytes [file_offset, file_offset + length) into `dst`, of
/// which the first `needed` bytes must arrive (the rest is alignment slack, possibly past the
/// end of the file).
struct Part {
  uint64_t file_offset = 0;
  uint64_t length = 0;
  uint64_t needed = 0;
  std::byte* dst = nullptr;
};

/// What file offsets and buffer addresses of O_DIRECT reads are rounded to: the larger of the
/// file system's two alignments.
uint64_t part_alignment(const io::DirectReadSupport& support);

/// Reads `part` with O_DIRECT; where the kernel refuses it (NotSupported), its needed bytes
/// are read buffered instead. IOError for a file shorter than the part needs.
Status read_part(Source& source, const Part& part);

/// Tests only: bytes read_part has read with O_DIRECT (parts not refused), in all, since
/// the process started.
uint64_t direct_bytes_read_for_testing();

}  // namespace jtree::cold
