// jtree/options.h — options for opening, reading and writing, and the parser limits.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "jtree/export.h"
#include "jtree/remote.h"
#include "jtree/shard.h"
#include "jtree/status.h"
#include "jtree/tree.h"

namespace jtree {

/// Called with (bytes done, bytes total) as long operations progress, from any thread but
/// never concurrently with itself. Return false to cancel: the operation stops with Aborted.
using ProgressFn = std::function<bool(uint64_t done, uint64_t total)>;

/// Bounds on what a file may make the library do. Every number read from a file is checked
/// against these (and the file's size) before it is used to allocate, index or loop.
/// The defaults admit files with tens of millions of leaves; lower them for untrusted input
/// in small processes. spec/FORMAT.md, "Limits", lists them with their rationale.
struct JTREE_API Limits {
  uint64_t max_header_bytes = 1ull << 30;  ///< size of the header flatbuffer
  uint64_t max_index_bytes = 1ull << 30;   ///< size of the index flatbuffer
  uint64_t max_nodes = 1ull << 26;         ///< nodes in the tree
  uint64_t max_leaves = 1ull << 26;        ///< leaves in the tree
  uint32_t max_depth = 512;                ///< nesting depth of containers
  uint32_t max_rank = 64;                  ///< dimensions of one array (NumPy's maximum)
  uint64_t max_chunk_bytes = 1ull << 30;   ///< raw bytes of one chunk (format maximum 4 GiB - 1)
  uint64_t max_string_bytes = 1ull << 20;  ///< one key, type name or metadata key
  /// Memory bytes of one leaf (or slice) that a read call allocates for its caller; see
  /// MemoryBudget, which enforces it and max_total_bytes.
  uint64_t max_leaf_bytes = 1ull << 40;
  /// Memory bytes that one read call allocates for its caller in total; see MemoryBudget.
  uint64_t max_total_bytes = 1ull << 42;
};

/// What one read call may allocate for its caller: the one rule for the memory a file can make
/// a loader allocate (SECURITY.md, "Limits", and python/README.md point here).
///
/// - Counted: memory an API allocates to hand to its caller (Reader::read_bytes'
///   string; in Python every array, slice and payload a jtree.load, File.load or LazyArray
///   slice makes), reserved before it is allocated.
/// - Not counted: reads into the caller's own buffers (Reader::read_many, read_box: the caller
///   sized them), memory-mapped views, the reader's own bounded scratch memory.
/// - Each reservation within Limits::max_leaf_bytes, all of one call's within
///   Limits::max_total_bytes: ResourceExhausted naming what, the size and the limit.
/// - Per call, not per Reader: a Reader kept open by a server never runs out. A "call" is one
///   budget: ReadOptions::memory_budget shares one over several native calls (a Python load
///   is many); a call given none makes its own from the open's Limits.
///
/// Thread-safe: concurrent reservations never overshoot the total together.
class JTREE_API MemoryBudget {
 public:
  MemoryBudget(uint64_t max_leaf_bytes, uint64_t max_total_bytes);
  /// The budget of `limits` (max_leaf_bytes, max_total_bytes).
  explicit MemoryBudget(const Limits& limits);
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  /// Accounts for `bytes` the caller is about to allocate, before it allocates them: OK, or
  /// ResourceExhausted (nothing reserved) whose message starts with `what` (say
  /// "ckpt.jtree: leaf params/w"; empty: "needs N bytes...") and names the limit that was hit.
  Status reserve(uint64_t bytes, std::string_view what);
  /// Bytes reserved so far.
  uint64_t reserved() const { return reserved_.load(std::memory_order_relaxed); }
  uint64_t max_leaf_bytes() const { return max_leaf_bytes_; }
  uint64_t max_total_bytes() const { return max_total_bytes_; }

 private:
  uint64_t max_leaf_bytes_;
  uint64_t max_total_bytes_;
  std::atomic<uint64_t> reserved_{0};
};

/// Options for opening a file.
struct JTREE_API OpenOptions {
  Limits limits;
  /// Map local files into memory and read raw chunks straight from the mapping.
  bool use_mmap = true;
  /// First reads issued in parallel when opening: the head (preamble + header) and the tail
  /// (footer + index). Larger values save a round trip on big headers or indexes; smaller ones
  /// fetch fewer bytes that are not metadata (a remote open fetches at most these two, then
  /// only the missing rest of the header and index, in one more round trip).
  uint64_t head_read_bytes = 64 * 1024;
  uint64_t tail_read_bytes = 64 * 1024;
  /// http(s):// and s3:// settings (retries, deadline, concurrency, TLS, credentials...).
  RemoteOptions remote;
};

/// The scratch buffers of the read workers (a chunk's fetched bytes, decoded planes and
/// decoded chunk) and of the save workers are reused from chunk to chunk and kept between
/// calls, so that the next call does not fault fresh memory in; once the last call running
/// ends, the process keeps at most this many bytes for each kind of work (reads, saves,
/// compactions), the most recently used, and frees the rest.
inline constexpr uint64_t kScratchKeptBytes = 64ull << 20;

/// Frees the scratch buffers kept between calls (kScratchKeptBytes) now and returns how many
/// bytes that gave back; calls running meanwhile keep the ones they use. For a process that
/// has done its loading (a server after loading its model) and wants that memory back; the
/// next call allocates its buffers again. Thread-safe.
JTREE_API uint64_t release_scratch_memory();

/// Options for reading leaves.
struct JTREE_API ReadOptions {
  /// Verify each chunk's checksum before using it. Skipping it is the fastest path; a damaged
  /// chunk then yields wrong data or (for compressed chunks) Corruption from the decoder.
  bool verify_checksums = true;
  /// Worker threads for fetching and decoding (0: the machine's hardware threads). Each
  /// worker decodes into buffers of about a chunk's size while it works; between calls the
  /// process keeps at most kScratchKeptBytes of them (release_scratch_memory frees them).
  /// Fetches that wait on storage run more workers, within max_bytes_in_flight: a remote
  /// backend's preferred concurrency, and at least 8 for a local file read with O_DIRECT
  /// because its bytes are not in the page cache (a cold file).
  int threads = 0;
  /// Upper bound on bytes fetched but not yet decoded.
  uint64_t max_bytes_in_flight = 256ull << 20;
  /// Neighbouring chunk ranges closer than this are fetched with one request.
  uint64_t coalesce_gap = 64 * 1024;
  /// Largest single fetch after coalescing (more parallelism below it).
  uint64_t max_fetch_bytes = 16ull << 20;
  ProgressFn progress;
  /// The memory budget of the call (MemoryBudget: what it may allocate for its caller), not
  /// owned, shared by every read given these options. Null: each call that allocates for its
  /// caller (read_bytes) makes its own from the open's Limits.
  MemoryBudget* memory_budget = nullptr;

  /// What every read checks first (read, read_many, map_leaves, mapped_box, Verify, device
  /// reads; the C API's setters at once): threads >= 0, positive bytes in flight and fetch
  /// size. InvalidArgument naming the option otherwise: never silently replaced.
  Status check() const;
};

/// Options for writing a file (save, append, compact).
/// The state of an existing file that an append was planned against (the generation whose
/// tree the caller read, merged and passes to jtree::append). See WriteOptions::append_base.
struct JTREE_API AppendBase {
  uint64_t generation = 0;
  uint64_t footer_offset = 0;  ///< FileInfo::footer_offset of that generation
  std::string etag;            ///< remote objects: Source::etag() as read (empty: not checked)
};

struct JTREE_API WriteOptions {
  Codec codec = Codec::kZstd;
  int level = 1;                              ///< zstd level
  uint64_t target_chunk_bytes = 4ull << 20;   ///< default chunk size (raw bytes)
  /// Payloads up to this many stored bytes go into the header, not into chunks. 512: a
  /// smaller inline payload loads faster from the header than from a chunk of its own, one of
  /// 1 KiB as fast, a larger one slower (a whole load of 20,000 arrays of 2 KiB: 175 ms
  /// inline, 134 chunked), and every open, local or remote, reads the whole header
  /// (bench/python/inline_threshold.py; 4096 until 2026-11-27).
  uint64_t inline_threshold = 512;
  uint32_t alignment = 64;                    ///< file offset alignment of raw chunks (2^k)
  /// Store a chunk raw unless compression saves at least this fraction of it.
  double min_gain = 0.03;
  /// Compression threads (0: hardware threads). Their buffers are kept between saves up to
  /// kScratchKeptBytes, as the read workers' are.
  int threads = 0;
  uint64_t max_bytes_in_flight = 256ull << 20;
  bool overwrite = true;                      ///< replace an existing jtree file
  /// Also replace an existing file that is not a jtree file (refused by default: a typo in a
  /// path must not destroy someone's data).
  bool overwrite_foreign = false;
  bool sync = true;                           ///< fsync before the commit (durability)
  /// A file laid out for tensor-parallel serving on `shard_layout->world` ranks (rank and
  /// nothing else of it ignored): the chunk grid of every array leaf the split rules split is
  /// cut at the edges of every rank's part (jtree::shard_layout_boxes), so that a rank of
  /// that world, or of any divisor of it, reads only whole chunks of its part (no chunk is
  /// fetched or verified for a few of its bytes). Leaves with LeafOptions::chunk_shape and
  /// sharded leaves keep their own grids. A leaf the rules split that cannot be split that
  /// way (a column or row dimension that does not divide by world) is InvalidArgument.
  std::optional<ShardSpec> shard_layout;
  std::string writer = {};                    ///< recorded in the header; default "jtree <v>"
  RemoteOptions remote;                       ///< s3:// targets: credentials, part size...
  ProgressFn progress;
  /// Appends only: the file state the new tree was planned against. jtree::append refuses
  /// with Aborted, writing nothing, when the file's current generation (or, on S3, its ETag)
  /// is another one: a writer appended, compacted or replaced it in between, and the tree
  /// planned against the old generation would silently drop that writer's leaves. Unset: the
  /// append is planned against whatever generation it finds.
  std::optional<AppendBase> append_base;

  /// What every write checks first (save, append, save_segment; the C API's setters at once):
  /// threads >= 0, positive chunk size and bytes in flight, an alignment that is a power of
  /// two up to 1 MiB, min_gain in [0, 1], and a level the codec accepts (zstd: -128 to 22; the
  /// level of a raw save is not looked at). InvalidArgument naming the option and its value
  /// otherwise: a setting out of range is refused, never silently clamped.
  Status check() const;
};

}  // namespace jtree
