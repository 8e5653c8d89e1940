// jtree/reader.h — opening a .jtree file and reading any part of it.
//
// open() reads the preamble + header and the footer + index (two reads issued together; a
// third only for headers or indexes larger than the first reads), validates all of it against
// the file's size and the Limits, and never touches chunk data. It keeps the header bytes and
// reads the structure from them in place: no struct per node or leaf is made until asked for
// (leaf() decodes one leaf; tree() builds the whole Tree). Reads then fetch only the
// chunks a request overlaps, coalesce neighbouring ranges, decode in parallel straight into
// the caller's buffers and verify checksums.
//
// Untrusted input: every structure is validated before use; a damaged or hostile file gives
// Corruption (or NotSupported for newer versions), never a crash, hang, oversized allocation
// or wrong data (with verify_checksums on). Allocations made by the reader are bounded by the
// Limits (memory handed to the caller: per call, by MemoryBudget in options.h); the caller's
// buffers are the caller's.
//
// Thread safety: a Reader is immutable after open(); all const methods may be called from
// many threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jtree/chunk.h"  // ChunkEncoding, ChunkInfo, SegmentSpan
#include "jtree/export.h"
#include "jtree/io.h"
#include "jtree/options.h"
#include "jtree/status.h"
#include "jtree/tree.h"

namespace jtree {

/// What the file says about itself.
struct JTREE_API FileInfo {
  uint64_t file_size = 0;
  uint16_t writer_version = 0;
  uint16_t min_read_version = 0;
  uint16_t min_write_version = 0;
  uint64_t required_features = 0;
  uint64_t optional_features = 0;
  uint64_t generation = 0;
  bool is_segment = false;          ///< one host's part of a multi-host save
  uint32_t process_index = 0;       ///< segment files: which process wrote it...
  uint32_t process_count = 0;       ///< ...of how many...
  uint64_t save_id = 0;             ///< ...in which save
  uint64_t checkpoint_head_offset = 0;  ///< segment 0: where it holds the checkpoint's
                                        ///< preamble + header for the commit (0: it does not)
  bool recovered = false;           ///< the end of the file was torn (interrupted append):
                                    ///< the last committed generation was used
  uint64_t header_offset = 0, header_size = 0;
  uint64_t header_hash = 0;         ///< XXH3 of the header (equal headers, equal trees)
  uint64_t index_offset = 0, index_size = 0;
  uint64_t footer_offset = 0;
  uint64_t prev_footer_offset = 0;  ///< 0 for generation 0
  std::string writer;               ///< the header's writer string
  std::vector<SegmentSpan> segments;
  uint64_t num_chunks = 0;
  uint64_t stored_bytes = 0;        ///< sum of chunk stored sizes (live chunks)
  uint64_t raw_bytes = 0;           ///< sum of chunk raw sizes
  uint64_t inline_bytes = 0;        ///< payload bytes kept in the header
};

/// One part of a read_many(): a leaf, or a box of it, into a caller buffer.
struct JTREE_API ReadRequest {
  uint32_t leaf = 0;
  std::optional<Box> box;    ///< nullopt: the whole leaf
  std::span<std::byte> dst;  ///< C-order, memory layout: exactly box elements x item size
};

/// A leaf's bytes in place in the file's copy-on-write mapping (Reader::mapped_leaf): its
/// C-order array in memory layout, without a copy.
struct JTREE_API MappedLeaf {
  /// Writable: a write changes this process's private copy of the page, never the file.
  std::span<std::byte> bytes;
  /// Keeps the mapping alive (not the Reader): hold it as long as `bytes` is used.
  std::shared_ptr<const void> owner;
  /// False when the leaf cannot be mapped (see Reader::mapped_leaf).
  explicit operator bool() const { return owner != nullptr; }
};

/// One problem found by verify().
struct JTREE_API VerifyProblem {
  std::string where;  ///< "leaf params/w chunk 3", "header", "padding at 1234"...
  Status status;
};

/// The outcome of verify().
struct JTREE_API VerifyReport {
  uint64_t chunks_checked = 0;
  uint64_t bytes_checked = 0;
  uint64_t dead_bytes = 0;  ///< bytes no live structure uses (replaced leaves, old metadata)
  std::vector<VerifyProblem> problems;  ///< empty: the file is intact
  std::vector<std::string> notes;       ///< observations that are not damage
  bool ok() const { return problems.empty(); }
};

class JTREE_API Reader {
 public:
  /// Opens a path or URL. Errors, each naming the file: NotFound, IOError, Corruption (a file
  /// of another format, safetensors, PyTorch, NumPy, GGUF, says which and the `jtree convert`
  /// command that converts it), NotSupported (a newer format; a URL scheme this build cannot
  /// read), ResourceExhausted (a limit, the depth limit included), InvalidArgument (a
  /// directory, saying what checkpoint it holds where it knows, or another non-regular file).
  static Result<std::shared_ptr<Reader>> open(std::string_view path_or_url,
                                              const OpenOptions& options = {});
  /// Opens an already-open source.
  static Result<std::shared_ptr<Reader>> open(std::shared_ptr<Source> source,
                                              const OpenOptions& options = {});

  ~Reader();
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  /// The path or URL.
  const std::string& name() const;
  /// The whole tree as a Tree value (finalized): structure, leaf specs, inline payloads,
  /// metadata. Built on the first call, from the header open() checked: for a big tree that is
  /// most of the cost (a struct per node and per leaf), so code that visits only some of the
  /// tree should use the accessors below, which read the header in place.
  const Tree& tree() const;

  // The tree without building it (all O(1) or O(size of the answer)):

  /// Number of nodes (preorder; node 0 is the root) and of leaves.
  uint32_t num_nodes() const;
  uint32_t num_leaves() const;
  /// Node `i` (< num_nodes()), its strings pointing into the header (valid while the Reader
  /// lives). Not range-checked, like the other accessors here.
  NodeView node(uint32_t i) const;
  /// Leaf `i` (< num_leaves()): spec and inline payload, decoded on first use and kept for the
  /// Reader's life (first_chunk set).
  const Leaf& leaf(uint32_t i) const;
  /// Leaf `i` decoded into a new value that the Reader does not keep: for one pass over many
  /// leaves without keeping a copy of each (or building tree()).
  Leaf decode_leaf(uint32_t i) const;
  /// The children of node `i`, in order (empty for leaves and None).
  std::vector<uint32_t> children(uint32_t i) const;
  /// One past the last node of node `i`'s subtree; the parent of node `i` (the root's is 0).
  uint32_t subtree_end(uint32_t i) const;
  uint32_t parent(uint32_t i) const;
  /// The key path of node `i` / of leaf `i`'s first node (Tree::path's syntax).
  std::string path(uint32_t i) const;
  std::string leaf_path(uint32_t i) const;
  /// The node at a key path, or NotFound naming the first missing component.
  Result<uint32_t> find(std::string_view path) const;
  /// The header's user metadata.
  const std::vector<std::pair<std::string, std::string>>& metadata() const;
  /// The keys of the metadata entries whose values are UTF-8 text (saved as text: format
  /// version 3; the reader checked them); the others are bytes.
  const std::vector<std::string>& metadata_text_keys() const;
  const FileInfo& info() const;
  const OpenOptions& options() const;
  /// The leaf at a key path, or NotFound / InvalidArgument (the path names a container).
  Result<uint32_t> find_leaf(std::string_view path) const;
  /// The index entry of chunk `i` (0 <= i < info().num_chunks).
  ChunkInfo chunk(uint64_t i) const;

  /// Reads a whole payload leaf into `dst` (exactly leaf.memory_bytes() bytes).
  Status read(uint32_t leaf, std::span<std::byte> dst, const ReadOptions& options = {}) const;
  /// Reads the box of an array leaf into `dst` (C-order, exactly box elements x item size),
  /// touching only the chunks the box overlaps.
  Status read_box(uint32_t leaf, const Box& box, std::span<std::byte> dst,
                  const ReadOptions& options = {}) const;
  /// Reads many leaves or boxes in one pass: chunk ranges of all requests are coalesced and
  /// fetched and decoded in parallel. Errors name the leaf and chunk.
  Status read_many(std::span<const ReadRequest> requests,
                   const ReadOptions& options = {}) const;
  /// The payload of a Str/Bytes/ByteArray/CustomLeaf/Pickle (or UInt8) leaf as bytes, its
  /// memory reserved first from options.memory_budget (or a budget of this call's own, from the
  /// open's Limits), inline payloads as chunked ones: ResourceExhausted over MemoryBudget's
  /// limits.
  Result<std::string> read_bytes(uint32_t leaf, const ReadOptions& options = {}) const;


  /// A leaf's bytes straight from the file's copy-on-write mapping, without a copy: set for
  /// a local file opened with use_mmap whose leaf is stored as its C-order array (every chunk
  /// Raw, chunks cutting only along a run of leading dimensions, stored back to back in grid
  /// order, the first aligned for the dtype: what jtree writes for leaves saved without
  /// compression, spec/FORMAT.md 8.2); empty (false) for any other leaf (compressed, 4-bit,
  /// inline, remote...), which read() decodes instead. With options.verify_checksums every
  /// chunk is checked before returning (which also faults the pages in); Corruption names
  /// the leaf and chunk. Errors: InvalidArgument for a leaf number out of range.
  /// The mapping outlives the Reader while `owner` is held. Unsafe if another program
  /// truncates the file while it is mapped: touching the lost pages raises SIGBUS (every
  /// other read uses pread and reports an error instead); see MappedFile.
  Result<MappedLeaf> mapped_leaf(uint32_t leaf, const ReadOptions& options = {}) const;
  /// mapped_leaf() of many leaves at once, their checksums verified in parallel on
  /// options.threads workers (the hashing faults the pages in on all of them: faster than
  /// a consumer touching them on one thread). One entry per leaf, empty where the leaf
  /// cannot be mapped. The first damaged chunk fails the whole call. Each call (mapped_leaf
  /// too) maps the range its leaves span anew (Source::map_range): a write into one call's
  /// leaves is seen by no other call's, and never by what a later call verifies.
  Result<std::vector<MappedLeaf>> map_leaves(std::span<const uint32_t> leaves,
                                             const ReadOptions& options = {}) const;
  /// A box of a leaf that mapped_leaf() would map, in place, checking only the chunks the box
  /// overlaps (a slice of a large leaf costs what the slice touches, not the leaf). `bytes`
  /// runs from the box's first element to one past its last in the leaf's C-order layout: the
  /// box's elements lie at the leaf's strides (item size x the product of the later
  /// dimensions) from bytes.data(); bytes between them that the box does not select are part
  /// of the span but are neither verified nor paged in. With options.verify_checksums the
  /// overlapped chunks are checked in parallel, each paged in first (MADV_POPULATE_READ);
  /// chunks outside the box are not read. Each call maps its range anew (Source::map_range),
  /// copy-on-write: a write into one box changes no other box or mapped leaf, and never the
  /// file. Empty (false) where the leaf cannot be mapped (see mapped_leaf) or the range's
  /// mapping fails (read_box reads it instead); an empty box of a mappable leaf gives `owner`
  /// set and empty `bytes`.
  /// Errors: InvalidArgument for a leaf out of range or a box of the wrong rank or out of
  /// bounds; Corruption naming the leaf and chunk.
  Result<MappedLeaf> mapped_box(uint32_t leaf, const Box& box,
                                const ReadOptions& options = {}) const;
  /// A box that is exactly one raw chunk of a leaf, in place: `bytes` is the chunk, which is
  /// the box's own C-order array in memory layout (not at the leaf's strides: this serves
  /// leaves mapped_box() cannot map, whose grid cuts later dimensions, such as the column
  /// tiles of a file laid out for tensor-parallel ranks, WriteOptions::shard_layout). The
  /// chunk is verified unless options.verify_checksums is off; mapped copy-on-write as
  /// mapped_box's. Empty (false) where the box is not exactly one chunk, the chunk is not
  /// raw, the file is not mapped, or the mapping fails. Errors as mapped_box's.
  Result<MappedLeaf> mapped_chunk(uint32_t leaf, const Box& box,
                                  const ReadOptions& options = {}) const;

  /// Checks every checksum, decodes every chunk, and accounts for every byte of the file.
  Result<VerifyReport> verify(const ReadOptions& options = {}) const;

  /// The storage backend's counters (requests, bytes, retries).
  IoStats io_stats() const;
  std::shared_ptr<Source> source() const;

  struct Impl;

 private:
  explicit Reader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace jtree
