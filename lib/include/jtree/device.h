// jtree/device.h — reading leaves straight into GPU (device) memory.
//
// A load to a device goes through a bounded ring of pinned (page-locked) host buffers: the
// Reader's workers fetch and decode chunks into one buffer (raw chunks are read by the backend
// straight into it) while the copies of the buffers filled before it run asynchronously, each
// buffer on its own stream, so reading, decoding and copying overlap. A buffer is refilled only
// after its last copy has completed, so the pinned memory never exceeds
// DeviceOptions::staging_bytes, however slow the copies are.
//
// The copies go through a CopyEngine: the CUDA one (make_cuda_copy_engine, in builds configured
// with JTREE_CUDA=ON or AUTO with the toolkit found) or any other implementation a caller
// provides (another accelerator's runtime, or a host-memory stand-in in tests).
//
// Errors: Status, naming the file and the leaf's key path. An error in the middle of a load
// (a read, a decode, a checksum, a copy) or a cancellation stops the load: no further buffer
// load starts (one a second thread was reading may finish, but nothing of it is copied), no
// further copy is issued, every copy already issued is waited for, every pinned buffer is
// freed, and the first error is returned. The destination then holds partial data.
//
// Thread safety: read_many_staged / read_many_to_device may run on many threads at once (each
// call uses its own buffers and streams). A load fills its buffers from up to four threads
// (the caller's and ones it starts), so a CopyEngine's functions must be thread-safe for calls on
// different streams; the CUDA engine is, and may also be shared by concurrent loads.
//
// O_DIRECT (DeviceOptions::direct_io): pieces that are runs of whole raw chunks stored back to
// back (leaves saved without compression, loaded whole or in whole chunks) are read from a
// local file with O_DIRECT straight into the pinned buffers, their checksums verified there:
// a cold-cache load reads each byte once from the disk into pinned memory, with no copy out
// of the page cache and without filling the page cache with a multi-GB checkpoint. The file
// range read is widened to the file system's alignment (statx STATX_DIOALIGN, else 4096), the
// slack landing in the buffer around the piece. Everything else (compressed chunks, slices of
// chunks, remote files, file systems that refuse O_DIRECT) is read through Reader::read_many,
// the page cache included (read_many reads a local file whose bytes are not in the page cache
// with O_DIRECT of its own, into its scratch buffers). DeviceStats says which path carried
// how many bytes, and why O_DIRECT was not used.
//
// Untrusted input: as for Reader::read_many. The destinations are the caller's: the library
// writes exactly DeviceRequest::dst_bytes bytes at each dst and nothing elsewhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "jtree/export.h"
#include "jtree/options.h"
#include "jtree/reader.h"
#include "jtree/status.h"
#include "jtree/tree.h"

namespace jtree {

/// One part of a load to a device: a leaf, or a box of it, into device memory at `dst`.
struct JTREE_API DeviceRequest {
  uint32_t leaf = 0;
  std::optional<Box> box;  ///< nullopt: the whole leaf
  /// Device address (for CUDA: memory from cudaMalloc, or any address cudaMemcpyAsync accepts,
  /// mapped or managed host memory included). Receives the box in C order, memory layout.
  void* dst = nullptr;
  uint64_t dst_bytes = 0;  ///< exactly box elements x item size (as ReadRequest::dst)
};

/// Whether a load to a device reads raw chunks with O_DIRECT (see the top of this file).
enum class DirectIo {
  /// Where possible: a local file on a file system that accepts O_DIRECT, buffers of at least
  /// 4 x (2 x the file offset alignment + the memory alignment), pieces of 32 KiB or more that
  /// are runs of whole raw chunks, and a file less than half of whose pages are in the page
  /// cache (cachestat(2), else mincore(2): a warm file is copied out of memory faster than
  /// O_DIRECT reads it from the disk again). Otherwise buffered, the reason in DeviceStats.
  kAuto,
  /// As kAuto, but whatever the page cache holds (O_DIRECT bypasses it), and a file that
  /// cannot be read with O_DIRECT at all (remote, a file system that refuses it, staging
  /// buffers too small for its alignment) is an error (NotSupported, naming the file and the
  /// reason) instead of a buffered load; pieces that do not qualify (compressed, slices of
  /// chunks) are still read buffered.
  kOn,
  /// Never: everything through Reader::read_many (the page cache).
  kOff,
};

/// Whether a load to a device copies raw chunks straight out of the file's pages in the page
/// cache ("zero copy"): the pages of a shared read-only mapping of the file that hold a
/// batch's pieces are registered with the copy engine (for CUDA: cudaHostRegister, read-only:
/// the page cache's own pages are pinned, not copies of them) and copied to the
/// device from there, their checksums verified by the CPU meanwhile; no staging buffer, no
/// copy into pinned memory (which bounds a warm staged load at the CPU's memcpy speed). The
/// pieces are those O_DIRECT would read (runs of whole raw chunks stored back to back); the
/// rest of the load is staged as usual. At most staging_bytes of the file are registered at
/// once. EXPERIMENTAL and off by default: measured slower than staging on an H200 host
/// (registering the pages cost more than copying them: 7.4 against 33 GB/s, bench/gpu.md);
/// kept for machines where registration is cheaper (bench_device tells).
enum class ZeroCopy {
  /// Where possible: a local file (mmap works on it; OpenOptions::use_mmap is not needed), an
  /// engine that can register host memory read-only, and at least half of the file's pages
  /// in the page cache (registering a page that is not there reads it from the disk first,
  /// on one thread: O_DIRECT serves a cold file better). Otherwise staged, the reason in
  /// DeviceStats::zero_copy_note.
  kAuto,
  /// As kAuto whatever the page cache holds, and a load that cannot use it (not a local file,
  /// an engine that cannot register memory) is an error (NotSupported, naming the file and
  /// why); a registration refused mid-load is the engine's error. Cannot be combined with
  /// DirectIo::kOn (both claim the same pieces).
  kOn,
  /// Never (the default).
  kOff,
};

/// The name of a ZeroCopy setting: "auto", "on" or "off".
JTREE_API std::string_view zero_copy_name(ZeroCopy mode);

/// The ZeroCopy setting named `name` ("auto", "on", "off"; exactly these, lower case).
/// InvalidArgument naming the value and the accepted names otherwise.
JTREE_API Result<ZeroCopy> parse_zero_copy(std::string_view name);

/// The name of a DirectIo setting: "auto", "on" or "off" (what the Python binding's
/// direct_io= and the C API's jtree_direct_io_parse() take).
JTREE_API std::string_view direct_io_name(DirectIo mode);

/// The DirectIo setting named `name` ("auto", "on", "off"; exactly these, lower case).
/// InvalidArgument naming the value and the accepted names otherwise.
JTREE_API Result<DirectIo> parse_direct_io(std::string_view name);

/// What a load to a device did (DeviceOptions::stats), filled whether it succeeds or fails.
struct JTREE_API DeviceStats {
  /// Destination bytes read with O_DIRECT into the staging buffers.
  uint64_t direct_bytes = 0;
  /// Destination bytes that came through Reader::read_many (buffered reads, decoded chunks,
  /// inline leaves; read_many's own O_DIRECT reads of a cold file count here too).
  uint64_t buffered_bytes = 0;
  /// Why O_DIRECT was not used, or stopped being used mid-load; empty when it was used for
  /// every piece that qualifies.
  std::string direct_io_note;
  /// Destination bytes copied to the device straight from the file's registered pages
  /// (DeviceOptions::zero_copy).
  uint64_t zero_copy_bytes = 0;
  /// Why zero copy was not used (or stopped mid-load) where DeviceOptions::zero_copy asked
  /// for it; empty when it was off or served every piece that qualifies.
  std::string zero_copy_note;
};

/// Options for a load to a device.
struct JTREE_API DeviceOptions {
  /// How chunks are read and decoded (verify_checksums, threads, max_bytes_in_flight...).
  /// read.progress, when set, is called with (bytes queued for copying so far, bytes in all)
  /// after each buffer load, from the load's threads (the caller's or its helper's) but never
  /// concurrently with itself; returning false cancels the load (Aborted).
  ReadOptions read;
  /// Pinned host memory for staging, all buffers together: the most the load pins at once.
  /// Smaller loads pin less (no buffer is larger than the bytes it has to carry). Buffers are
  /// allocated as the load first needs them (the first buffer load starts after one
  /// allocation); the CUDA engine keeps them for the next load (kPinnedCacheBytes).
  uint64_t staging_bytes = 128ull << 20;
  /// Number of staging buffers (each staging_bytes / staging_buffers bytes, each with its own
  /// stream): 2 is enough to overlap reading with copying; more keep the copy engine busy when
  /// reads come in bursts. 1 to 64.
  int staging_buffers = 8;
  /// CUDA device ordinal for read_many_to_device (the destinations must be on it, or
  /// reachable from it).
  int device = 0;
  /// O_DIRECT reads of raw chunks (DirectIo).
  DirectIo direct_io = DirectIo::kAuto;
  /// Copies of raw chunks straight from the page cache (ZeroCopy; experimental, off).
  ZeroCopy zero_copy = ZeroCopy::kOff;
  /// When set, receives what the load did (which path read how many bytes).
  DeviceStats* stats = nullptr;

  /// The largest staging_bytes accepted (1 TiB): far above any host's pinnable memory, low
  /// enough that a wrapped-around negative number (a C caller's -1) is refused, not pinned.
  static constexpr uint64_t kMaxStagingBytes = 1ull << 40;
  /// The smallest staging buffer accepted (staging_bytes / staging_buffers): smaller ones
  /// would make a call per few elements.
  static constexpr uint64_t kMinBufferBytes = 4096;

  /// What every load to a device checks first (read_many_staged, read_many_to_device; the
  /// Python binding and the C API's setters at once): read.check(), staging_buffers from 1 to
  /// 64, staging_bytes at most kMaxStagingBytes and at least kMinBufferBytes per buffer,
  /// device >= 0, direct_io and zero_copy one of their values and not both kOn.
  /// InvalidArgument naming the setting and its value otherwise: never silently clamped.
  Status check() const;
};

/// What a load to a device copies through: pinned host buffers, streams, asynchronous copies.
/// Implementations report failures as Status (IOError for a runtime error, ResourceExhausted
/// when pinned memory cannot be had) and must never block forever in sync().
class JTREE_API CopyEngine {
 public:
  virtual ~CopyEngine();
  /// A name for messages ("cuda:0").
  virtual std::string name() const = 0;
  /// Page-locked host memory of `bytes` bytes (aligned to at least 64 bytes; page-aligned
  /// buffers, as CUDA's, also let raw chunks be read into them with O_DIRECT).
  virtual Result<std::span<std::byte>> allocate_pinned(size_t bytes) = 0;
  /// Frees memory from allocate_pinned (no copy from it may still be pending).
  virtual void free_pinned(std::span<std::byte> buffer) = 0;
  /// A new stream (an in-order queue of copies); its handle.
  virtual Result<int> create_stream() = 0;
  /// Destroys a stream (no copy on it may still be pending: sync it first).
  virtual void destroy_stream(int stream) = 0;
  /// Queues a copy of `bytes` bytes from pinned `src` to `dst` on `stream` and returns without
  /// waiting for it. `src` must stay unchanged until sync(stream) has returned.
  virtual Status copy_async(void* dst, const std::byte* src, size_t bytes, int stream) = 0;
  /// Waits for every copy queued on `stream`; an error of any of them (for runtimes that
  /// report copy failures late) is returned here.
  virtual Status sync(int stream) = 0;
  /// Makes `bytes` of existing host memory at `p` (page-aligned, a whole number of pages; the
  /// pages of a read-only file mapping) a valid source of copy_async until
  /// unregister_host(p); the memory is only read. NotSupported where the engine cannot (the
  /// default): zero copy (DeviceOptions::zero_copy) then stages the bytes.
  virtual Status register_host(const std::byte* p, size_t bytes);
  /// Ends a registration of register_host (no copy from it may still be pending: sync the
  /// streams that copy from it first).
  virtual void unregister_host(const std::byte* p);
};

/// Reads the requests into their destinations through `engine` (see the top of this file).
/// Errors: InvalidArgument (a bad request, naming the leaf; bad options), every error of
/// Reader::read_many, the engine's errors prefixed with the file and the leaf, Aborted when
/// options.read.progress cancels.
JTREE_API Status read_many_staged(const Reader& reader, std::span<const DeviceRequest> requests,
                                  CopyEngine& engine, const DeviceOptions& options = {});

/// read_many_staged through a CUDA copy engine on options.device. NotSupported in builds
/// without CUDA or on machines without a CUDA device (the message says which).
JTREE_API Status read_many_to_device(const Reader& reader,
                                     std::span<const DeviceRequest> requests,
                                     const DeviceOptions& options = {});

/// Pinned host memory the CUDA copy engine keeps between loads (at most this much; see
/// release_pinned_memory).
inline constexpr uint64_t kPinnedCacheBytes = 256ull << 20;

/// The CUDA copy engine for device `device`: pinned buffers (anonymous memory faulted in by
/// several threads, then cudaHostRegister'ed, portable; cudaHostAlloc where registering
/// fails), cudaMemcpyAsync on non-blocking streams. Pinning memory is slow, so the buffers a
/// load frees are kept for the next load of the process, up to kPinnedCacheBytes in all,
/// shared by every engine and device. The calling thread's current device is left as it
/// was, except on a thread that had no CUDA context current: it is not made to create one on
/// device 0 again (it keeps the engine's device; PyTorch's rule, lib/src/cuda/device_scope.h).
/// Thread-safe. NotSupported without CUDA support or without a device; InvalidArgument
/// for a device number out of range.
JTREE_API Result<std::unique_ptr<CopyEngine>> make_cuda_copy_engine(int device = 0);

/// Memory on a CUDA device (allocate_device_memory), freed when the object is destroyed.
class JTREE_API DeviceMemory {
 public:
  virtual ~DeviceMemory();
  virtual void* data() const = 0;     ///< the device address
  virtual uint64_t size() const = 0;  ///< bytes
  virtual int device() const = 0;     ///< the CUDA device ordinal
};

/// `bytes` of memory on CUDA device `device` from the CUDA runtime (cudaMalloc: aligned to at
/// least 256 bytes; not initialised), for destinations a caller's framework cannot allocate
/// without cost: jtree's Python binding gives a JAX load its memory this way (a compiled
/// allocation of JAX's own costs about 100 ms per new size on an H200 host), each leaf a
/// DLPack view of it. `keep_free` > 0: the allocation is refused unless at least that many
/// bytes of the device stay free after it (cudaMemGetInfo first): room a framework needs
/// outside its own pool (XLA's kernels, cuBLAS and NCCL workspaces), which a load of jtree's
/// must not take. The calling thread's current device is left as it was (made current again
/// only where that creates no CUDA context), and the memory may be freed on any thread.
/// ResourceExhausted when the device lacks the memory or the room to keep (naming the bytes
/// free), NotSupported without CUDA support or device, InvalidArgument for a device number
/// out of range.
JTREE_API Result<std::unique_ptr<DeviceMemory>> allocate_device_memory(int device,
                                                                       uint64_t bytes,
                                                                       uint64_t keep_free = 0);

/// True when this build of the library has CUDA support (JTREE_CUDA found the toolkit).
JTREE_API bool cuda_built();

/// Frees the pinned staging buffers the CUDA engine keeps between loads (make_cuda_copy_engine)
/// and returns how many bytes that gave back; loads running meanwhile keep theirs. 0 in
/// builds without CUDA. Thread-safe.
JTREE_API uint64_t release_pinned_memory();

/// Starts pinning, on a thread of its own, the staging buffers a large load with `options`
/// will ask for (options.staging_buffers buffers of staging_bytes / staging_buffers bytes,
/// less those the cache of make_cuda_copy_engine already holds) and returns at once. Pinning
/// is slow (about 25 ms for the default 128 MiB on an H200 host, bench/gpu.md): a caller that
/// calls this as soon as it knows a load to the device is coming, and then plans the load
/// and allocates its device memory, finds the buffers pinned when the load starts. A load
/// that needs a buffer one of them will serve waits for it rather than pinning another.
/// The buffers go into the cache (kPinnedCacheBytes; release_pinned_memory frees them).
/// Errors: InvalidArgument for bad options (DeviceOptions::check), NotSupported without CUDA
/// support or device (as make_cuda_copy_engine); a failure to pin is left to the load, which
/// then pins its own buffers and reports its own error. Thread-safe.
JTREE_API Status pin_staging_buffers_async(const DeviceOptions& options = {});

/// The number of CUDA devices this process can use: 0 in builds without CUDA, without a driver
/// or without a device (never an error).
JTREE_API int cuda_device_count();

}  // namespace jtree
