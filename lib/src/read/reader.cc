// The Reader: open, the tree and chunk accessors, single-leaf reads and the memory
// reservations. read_many, which every read goes through, is in read_many.cc.
#include "jtree/reader.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "codec/checksum.h"
#include "format/chunk_grid.h"
#include "format/validate.h"
#include "read/foreign_format.h"
#include "read/reader_impl.h"
#include "util/thread_pool.h"

namespace jtree {

// ---- Impl helpers ----------------------------------------------------------------------------

ChunkInfo Reader::Impl::chunk(uint64_t i) const {
  const format::ChunkRecord& r = file.index.chunks[i];
  ChunkInfo c;
  c.absent = (r.flags & format::kChunkAbsent) != 0;
  if (!c.absent) {
    const SegmentSpan& seg = file.index.segments[r.segment];
    c.file_offset = seg.file_offset + r.offset;
    c.seed = chunk_seed(seg.salt, r.offset);
  }
  c.stored_size = r.stored_size;
  c.checksum = r.checksum;
  c.segment = r.segment;
  c.encoding = static_cast<ChunkEncoding>(r.encoding);
  return c;
}

int Reader::Impl::fetch_parallelism(const ReadOptions& ro) const {
  const int wanted = std::max(resolve_threads(ro.threads), source->preferred_concurrency());
  const uint64_t per_worker = std::max<uint64_t>(ro.max_fetch_bytes, 1);
  return static_cast<int>(std::clamp<uint64_t>(ro.max_bytes_in_flight / per_worker, 1,
                                               static_cast<uint64_t>(wanted)));
}

ReadOptions Reader::Impl::fetch_options(const ReadOptions& ro) const {
  // Local files: neighbouring chunks are fetched together only up to 1 MiB (a read there
  // costs a system call, not a round trip; larger fetches only need larger buffers).
  constexpr uint64_t kLocalFetchBytes = 1 << 20;
  ReadOptions fetch = ro;
  const uint64_t pref = source->preferred_fetch_bytes();
  fetch.max_fetch_bytes = std::min(fetch.max_fetch_bytes, pref == 0 ? kLocalFetchBytes : pref);
  return fetch;
}

codec::ChunkFormat Reader::Impl::format_of(const Leaf& leaf) {
  codec::ChunkFormat f;
  f.dtype = leaf.dtype;
  f.filter = leaf.filter;
  f.codec = leaf.codec;
  f.level = leaf.level;
  return f;
}

std::string Reader::Impl::chunk_where(uint32_t leaf, uint64_t local) const {
  return source->name() + ": leaf " + file.tree.leaf_path(leaf) + ": chunk " +
         std::to_string(local);
}

Status Reader::Impl::checksum_error(const ChunkInfo& c, uint32_t leaf, uint64_t local) const {
  return Status::corruption(chunk_where(leaf, local) + ": checksum mismatch (file offset " +
                            std::to_string(c.file_offset) + ", " + std::to_string(c.stored_size) +
                            " bytes)");
}

Status Reader::Impl::verify_chunk(const ChunkInfo& c, std::span<const std::byte> stored,
                                  uint32_t leaf, uint64_t local) const {
  return xxh3(stored, c.seed) == c.checksum ? Status::success() : checksum_error(c, leaf, local);
}

// ---- Reader ----------------------------------------------------------------------------------

namespace {

// A local directory opened as a file (the io layer's "not a regular file") says what it is:
// a Hugging Face or orbax checkpoint to convert, or a directory. Other failures stand.
Status explain_open_failure(std::string_view path_or_url, const Status& st) {
  std::string local;
  std::error_code ec;
  if (st.is_invalid_argument() && is_local_path(path_or_url, &local) &&
      std::filesystem::is_directory(local, ec)) {
    return directory_error(path_or_url, local);
  }
  return st;
}

}  // namespace

Reader::Reader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Reader::~Reader() = default;

Result<std::shared_ptr<Reader>> Reader::open(std::string_view path_or_url,
                                             const OpenOptions& options) {
  auto source = open_source(path_or_url, options);
  if (!source.ok()) return explain_open_failure(path_or_url, source.status());
  return open(*std::move(source), options);
}

Result<std::shared_ptr<Reader>> Reader::open(std::shared_ptr<Source> source,
                                             const OpenOptions& options) {
  auto impl = std::make_unique<Impl>();
  JTREE_ASSIGN_OR_RETURN(impl->file, open_file(*source, options));
  impl->source = std::move(source);
  impl->options = options;
  return std::shared_ptr<Reader>(new Reader(std::move(impl)));
}

const std::string& Reader::name() const { return impl_->source->name(); }
const Tree& Reader::tree() const { return impl_->file.tree.tree(); }
uint32_t Reader::num_nodes() const { return impl_->file.tree.num_nodes(); }
uint32_t Reader::num_leaves() const { return impl_->file.tree.num_leaves(); }
NodeView Reader::node(uint32_t i) const { return impl_->file.tree.node(i); }
const Leaf& Reader::leaf(uint32_t i) const { return impl_->file.tree.leaf(i); }
Leaf Reader::decode_leaf(uint32_t i) const {
  Leaf l;
  impl_->file.tree.decode_leaf(i, l);
  return l;
}
std::vector<uint32_t> Reader::children(uint32_t i) const { return impl_->file.tree.children(i); }
uint32_t Reader::subtree_end(uint32_t i) const {
  return impl_->file.tree.navigation().subtree_end[i];
}
uint32_t Reader::parent(uint32_t i) const { return impl_->file.tree.navigation().parent[i]; }
std::string Reader::path(uint32_t i) const { return impl_->file.tree.path(i); }
std::string Reader::leaf_path(uint32_t i) const { return impl_->file.tree.leaf_path(i); }
Result<uint32_t> Reader::find(std::string_view path) const {
  auto node = impl_->file.tree.find(path);
  if (!node.ok()) return node.status().with_prefix(name());
  return node;
}
const std::vector<std::string>& Reader::metadata_text_keys() const {
  return impl_->file.tree.metadata_text_keys();
}

const std::vector<std::pair<std::string, std::string>>& Reader::metadata() const {
  return impl_->file.tree.metadata();
}
const FileInfo& Reader::info() const { return impl_->file.info; }
const OpenOptions& Reader::options() const { return impl_->options; }
ChunkInfo Reader::chunk(uint64_t i) const {
  ChunkInfo c = impl_->chunk(i);
  // Raw size from the owning leaf: the last chunked leaf whose first chunk is at or before i
  // (leaves are in chunk order).
  const ReadTree& t = impl_->file.tree;
  const auto chunked = t.chunked_leaves();
  auto it = std::upper_bound(chunked.begin(), chunked.end(), i, [&](uint64_t v, uint32_t l) {
    return v < t.first_chunk(l);
  });
  if (it != chunked.begin()) {
    const Leaf& leaf = t.leaf(*std::prev(it));
    c.raw_size = format::chunk_raw_size(leaf, i - leaf.first_chunk);
  }
  return c;
}
IoStats Reader::io_stats() const { return impl_->source->stats(); }
std::shared_ptr<Source> Reader::source() const { return impl_->source; }

Result<uint32_t> Reader::find_leaf(std::string_view path) const {
  auto node = find(path);
  if (!node.ok()) return node.status();
  const NodeView n = this->node(*node);
  if (n.kind != NodeKind::kLeaf) {
    return Status::invalid_argument(name() + ": key path '" + std::string(path) + "' is a " +
                                   std::string(node_kind_name(n.kind)) + ", not a leaf");
  }
  return n.leaf;
}

Status Reader::read(uint32_t leaf, std::span<std::byte> dst, const ReadOptions& options) const {
  ReadRequest r{leaf, std::nullopt, dst};
  return read_many(std::span(&r, 1), options);
}

Status Reader::read_box(uint32_t leaf, const Box& box, std::span<std::byte> dst,
                        const ReadOptions& options) const {
  ReadRequest r{leaf, box, dst};
  return read_many(std::span(&r, 1), options);
}

Result<std::string> Reader::read_bytes(uint32_t leaf, const ReadOptions& options) const {
  const ReadTree& t = impl_->file.tree;
  if (leaf >= t.num_leaves()) {
    return Status::invalid_argument(name() + ": leaf number out of range");
  }
  const Leaf& l = t.leaf(leaf);
  if (!l.is_payload() || dtype_info(l.dtype)->item_size != 1 || is_4bit(l.dtype)) {
    return Status::invalid_argument(name() + ": leaf " + t.leaf_path(leaf) +
                                   " is not a byte payload");
  }
  // Inline payloads too: the string returned is a copy the caller receives, counted like any
  // other (the header holds the bytes already, but the limits bound what a call hands out).
  const uint64_t n = l.memory_bytes();
  MemoryBudget own(impl_->options.limits);  // (used when the caller shares none)
  MemoryBudget& budget = options.memory_budget ? *options.memory_budget : own;
  JTREE_RETURN_IF_ERROR(budget.reserve(n, name() + ": leaf " + t.leaf_path(leaf)));
  if (l.storage == Storage::kInline) return l.inline_data;
  std::string out(n, '\0');
  JTREE_RETURN_IF_ERROR(
      read(leaf, {reinterpret_cast<std::byte*>(out.data()), out.size()}, options));
  return out;
}

}  // namespace jtree
