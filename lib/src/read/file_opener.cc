#include "read/file_opener.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "codec/checksum.h"
#include "format/header_codec.h"
#include "read/foreign_format.h"
#include "util/checked_math.h"
#include "util/huge_pages.h"

namespace jtree {
namespace {

using format::kFooterSize;
using format::kPreambleSize;

// A metadata region [offset, offset + size) with the bytes the head and tail buffers already
// hold copied in; [missing_offset, missing_offset + missing_size) is what must still be fetched
// (one range: the head can only cover the region's start, the tail only its end). Fetching just
// that part keeps a remote open within the bytes it needs.
struct Region {
  uint64_t offset = 0;
  // Not zero-filled first: every byte is copied or read in, and the header of a big tree is
  // megabytes.
  std::unique_ptr<std::byte[]> data;
  uint64_t size = 0;
  uint64_t missing_offset = 0;
  uint64_t missing_size = 0;
  std::span<std::byte> bytes() { return {data.get(), size}; }
  std::span<std::byte> missing() {
    return bytes().subspan(missing_offset - offset, missing_size);
  }
};
Region from_buffers(const HeadTail& ht, uint64_t offset, uint64_t size) {
  Region r;
  r.offset = offset;
  r.data = std::make_unique_for_overwrite<std::byte[]>(size);
  r.size = size;
  advise_huge_pages(r.data.get(), size);
  uint64_t lo = offset, hi = offset + size;  // not yet copied
  if (lo < ht.head.size()) {
    const uint64_t end = std::min<uint64_t>(hi, ht.head.size());
    std::memcpy(r.data.get(), ht.head.data() + lo, end - lo);
    lo = end;
  }
  const uint64_t tail_start = ht.size - ht.tail.size();
  if (lo < hi && hi > tail_start) {
    const uint64_t from = std::max(lo, tail_start);
    std::memcpy(r.data.get() + (from - offset), ht.tail.data() + (from - tail_start), hi - from);
    hi = from;
  }
  r.missing_offset = lo;
  r.missing_size = hi - lo;
  return r;
}

// Finds the footer of the newest committed generation: the one at the end of the file, or,
// when the end is torn (an interrupted in-place append), the one a commit slot points to.
Result<format::Footer> find_footer(Source& source, const HeadTail& ht, bool* recovered,
                                   uint64_t* footer_offset) {
  const uint64_t end_offset = ht.size - kFooterSize;
  auto footer = format::decode_footer(std::span(ht.tail).last(kFooterSize));
  if (footer.ok()) {
    *footer_offset = end_offset;
    return footer;
  }
  // A footer whose magic and hash are intact is the current one (FORMAT.md section 5): its
  // refusal stands. Falling back to an older generation would load stale data as current.
  const auto tail = std::span(ht.tail).last(kFooterSize);
  if (footer.status().is_not_supported() || format::footer_intact(tail)) {
    return footer.status().with_prefix("the current footer (at the end of the file)");
  }
  // Newest committed generation first; a slot whose footer is not intact is skipped.
  Status last = footer.status();
  for (const format::CommitSlot& slot : format::valid_slots(std::span(ht.head).first(kPreambleSize))) {
    if (slot.footer_offset < kPreambleSize || slot.footer_offset > end_offset) continue;
    std::vector<std::byte> buf(kFooterSize);
    ReadRange r{slot.footer_offset, buf};
    JTREE_RETURN_IF_ERROR(source.read(std::span(&r, 1)));
    auto older = format::decode_footer(buf);
    if (!older.ok() || older->generation != slot.generation) {
      last = Status::corruption("the end of the file is damaged (" + footer.status().message() +
                                ") and so is the committed footer a commit slot points to");
      continue;
    }
    *recovered = true;
    *footer_offset = slot.footer_offset;
    return older;
  }
  return last;
}

// Checks a metadata region's place in the file: after the preamble, before the footer,
// 8-byte aligned, non-empty and within its limit.
Status check_region(const char* what, uint64_t offset, uint64_t size, uint64_t footer_offset,
                    uint64_t limit) {
  if (size == 0) return Status::corruption(std::string(what) + " is empty");
  if (size > limit) {
    return Status::resource_exhausted(std::string(what) + " is " + std::to_string(size) +
                                     " bytes, over the limit of " + std::to_string(limit));
  }
  if (offset < kPreambleSize || offset % 8 != 0 ||
      !range_within(offset, size, footer_offset)) {
    return Status::corruption(std::string(what) + " at [" + std::to_string(offset) + ", +" +
                              std::to_string(size) + ") is outside the metadata area");
  }
  return Status::success();
}

Result<OpenedFile> open_unprefixed(Source& source, const OpenOptions& options) {
  const Limits& limits = options.limits;
  JTREE_ASSIGN_OR_RETURN(HeadTail ht,
                         source.read_head_tail(std::max<uint64_t>(options.head_read_bytes,
                                                                  kPreambleSize),
                                               std::max<uint64_t>(options.tail_read_bytes,
                                                                  kFooterSize)));
  // A file of another format (safetensors, PyTorch, NumPy, GGUF) is named, with the command
  // that converts it, from the bytes just read; still Corruption, as any file not jtree's.
  if (auto foreign = identify_foreign_file(ht.head, ht.tail, ht.size)) {
    return Status::corruption(foreign_message(source.name(), *foreign));
  }
  if (ht.size < kPreambleSize + kFooterSize + 16) {
    return Status::corruption("file of " + std::to_string(ht.size) +
                              " bytes is too short to be a jtree file");
  }
  JTREE_ASSIGN_OR_RETURN(format::Preamble pre, format::decode_preamble(ht.head));
  OpenedFile f;
  uint64_t footer_offset = 0;
  JTREE_ASSIGN_OR_RETURN(f.footer, find_footer(source, ht, &f.info.recovered, &footer_offset));
  const format::Footer& ft = f.footer;
  if (ft.version.kind != pre.version.kind) {
    return Status::corruption("preamble and footer disagree on the file kind");
  }
  JTREE_RETURN_IF_ERROR(check_region("header", ft.header_offset, ft.header_size, footer_offset,
                                     limits.max_header_bytes));
  JTREE_RETURN_IF_ERROR(check_region("index", ft.index_offset, ft.index_size, footer_offset,
                                     limits.max_index_bytes));
  if (ft.header_offset < ft.index_offset + ft.index_size &&
      ft.index_offset < ft.header_offset + ft.header_size) {
    return Status::corruption("header and index overlap");
  }
  if (ft.generation == 0 &&
      (ft.header_offset != pre.header_offset || ft.header_size != pre.header_size ||
       ft.header_hash != pre.header_hash || ft.prev_footer_offset != 0)) {
    return Status::corruption("generation 0 footer disagrees with the preamble");
  }
  if (ft.generation > 0 &&
      (ft.prev_footer_offset < kPreambleSize || ft.prev_footer_offset >= footer_offset)) {
    return Status::corruption("previous footer offset out of range");
  }

  // Header and index: from the first reads when they cover them, else with one more request.
  // (Not from a file mapping: a mapping turns a concurrent truncation into SIGBUS.)
  Region header_buf = from_buffers(ht, ft.header_offset, ft.header_size);
  Region index_buf = from_buffers(ht, ft.index_offset, ft.index_size);
  std::vector<ReadRange> ranges;
  for (Region* region : {&header_buf, &index_buf}) {
    if (region->missing_size > 0) ranges.push_back({region->missing_offset, region->missing()});
  }
  if (!ranges.empty()) JTREE_RETURN_IF_ERROR(source.read(ranges));
  const std::span<const std::byte> header = header_buf.bytes(), index = index_buf.bytes();
  if (xxh3(header) != ft.header_hash) return Status::corruption("header checksum mismatch");
  if (xxh3(index) != ft.index_hash) return Status::corruption("index checksum mismatch");

  // Every node and leaf checked as format::decode_tree checks them, without building a Tree:
  // the Reader reads the header in place and keeps it.
  format::HeaderSummary summary;
  JTREE_ASSIGN_OR_RETURN(format::HeaderView header_view,
                         format::open_header(std::move(header_buf.data), header_buf.size,
                                             limits, &f.info.writer, &summary));
  // A file whose leaves use a newer version's additions must say so (FORMAT.md 10.1): a reader
  // of the version it claims would refuse or misread it.
  if (summary.min_read_version > ft.version.min_read_version) {
    return Status::corruption("the header uses format version " +
                              std::to_string(summary.min_read_version) +
                              " additions (dtypes or rectilinear chunk grids) but the file's "
                              "min_read_version is " +
                              std::to_string(ft.version.min_read_version));
  }
  f.tree = ReadTree(std::move(header_view));
  const uint64_t chunks = summary.chunks;
  JTREE_ASSIGN_OR_RETURN(f.index, format::decode_index(index, limits));
  f.metadata = {{0, kPreambleSize, "preamble"},
                {ft.header_offset, ft.header_size, "header"},
                {ft.index_offset, ft.index_size, "index"},
                {footer_offset, kFooterSize, "footer"}};
  const ReadTree& tree = f.tree;
  const format::ChunkedLeaves chunked{tree.chunked_leaves(),
                                      [&](uint32_t i, Leaf& out) { tree.decode_grid(i, out); },
                                      [&](uint32_t i) { return tree.leaf_path(i); }};
  JTREE_RETURN_IF_ERROR(format::validate_index(chunked, f.index, chunks,
                                               footer_offset + kFooterSize, f.metadata,
                                               ft.version.kind, ft.generation));

  FileInfo& info = f.info;
  info.file_size = ht.size;
  info.writer_version = ft.version.writer_version;
  info.min_read_version = ft.version.min_read_version;
  info.min_write_version = ft.version.min_write_version;
  info.required_features = ft.version.required_features;
  info.optional_features = ft.version.optional_features;
  info.generation = ft.generation;
  info.is_segment = ft.version.kind == format::FileKind::kSegment;
  info.header_offset = ft.header_offset;
  info.header_size = ft.header_size;
  info.header_hash = ft.header_hash;
  if (f.index.segment_info) {
    info.process_index = f.index.segment_info->process_index;
    info.process_count = f.index.segment_info->process_count;
    info.save_id = f.index.segment_info->save_id;
    info.checkpoint_head_offset = f.index.segment_info->head_offset;
  }
  info.index_offset = ft.index_offset;
  info.index_size = ft.index_size;
  info.footer_offset = footer_offset;
  info.prev_footer_offset = ft.prev_footer_offset;
  info.segments = f.index.segments;
  info.num_chunks = f.index.chunks.size();
  info.inline_bytes = summary.inline_bytes;
  info.raw_bytes = summary.raw_bytes;
  for (const auto& c : f.index.chunks) info.stored_bytes += c.stored_size;
  return f;
}

}  // namespace

Result<OpenedFile> open_file(Source& source, const OpenOptions& options) {
  auto r = open_unprefixed(source, options);
  if (!r.ok()) return r.status().with_prefix(source.name());
  return r;
}

}  // namespace jtree
