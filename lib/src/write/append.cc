// append(): a new generation after the end of an existing local file (spec/FORMAT.md,
// "Generations").
//
// Order of writes, so that a crash at any point leaves the last committed generation
// readable:
//  1. a commit slot in the preamble is made to point at the current footer (if none does);
//     sync;
//  2. new chunks, the new header, index and footer are appended; sync;
//  3. the other commit slot is pointed at the new footer; sync.
// Until 2 completes the end of the file is not a valid footer and readers follow the slot of
// step 1; after it, the new footer at the end wins.
//
// Objects that cannot change in place (s3://) get a new version instead: its first bytes are
// the old object (copied on the server side), then the new generation; it replaces the old
// object atomically on commit, so the commit slots are left as they were (no patch).
#include "format/layout.h"
#include "format/validate.h"
#include "jtree/reader.h"
#include "jtree/writer.h"
#include "write/append_guard.h"
#include "tree/names.h"
#include "write/chunk_writer.h"
#include "write/leaf_planner.h"
#include "write/metadata_writer.h"

namespace jtree {
namespace {

Status patch_slot(Sink& sink, uint64_t generation, uint64_t footer_offset) {
  const auto slot = format::encode_slot({generation, footer_offset});
  return sink.patch(format::kSlotOffset[generation % 2], slot);
}

// Gives reused leaves their old spec and data.
Status resolve_reused(Tree& tree, const Tree& base) {
  for (size_t i = 0; i < tree.leaves.size(); ++i) {
    Leaf& l = tree.leaves[i];
    const auto from = l.reuse();
    if (!from) continue;
    if (*from >= base.leaves.size()) {
      return Status::invalid_argument("leaf " + tree.leaf_path(static_cast<uint32_t>(i)) +
                                     ": reuses leaf " + std::to_string(*from) + " of " +
                                     std::to_string(base.leaves.size()));
    }
    auto input = std::move(l.input);
    l = base.leaves[*from];
    l.input = std::move(input);
  }
  return Status::success();
}

Status append_into(Sink& sink, const Reader& reader, Tree& tree, const WriteOptions& options,
                   WriteStats* stats) {
  const FileInfo& info = reader.info();
  const Tree& base = reader.tree();
  JTREE_RETURN_IF_ERROR(tree.finalize());
  JTREE_RETURN_IF_ERROR(check_names(tree));  // what readers refuse, never written
  JTREE_RETURN_IF_ERROR(resolve_reused(tree, base));
  JTREE_RETURN_IF_ERROR(plan_leaves(tree, options));

  // Chunk table: reused leaves keep their records (and segments); new leaves get new ones.
  format::IndexData index;
  index.generation = info.generation + 1;
  index.segments = info.segments;
  uint64_t chunks = 0;
  for (Leaf& l : tree.leaves) {
    l.first_chunk = chunks;
    chunks += Tree::chunk_count(l);
  }
  index.chunks.resize(chunks);
  for (const Leaf& l : tree.leaves) {
    if (!l.reuse() || l.storage != Storage::kChunked) continue;
    const Leaf& old = base.leaves[*l.reuse()];
    for (uint64_t k = 0; k < Tree::chunk_count(l); ++k) {
      const ChunkInfo c = reader.chunk(old.first_chunk + k);
      format::ChunkRecord& r = index.chunks[l.first_chunk + k];
      r.segment = c.segment;
      r.offset = c.file_offset - info.segments[c.segment].file_offset;
      r.stored_size = c.stored_size;
      r.checksum = c.checksum;
      r.encoding = static_cast<uint8_t>(c.encoding);
    }
  }

  // 1. A slot points at the current generation, and none at a newer one: a slot left by an
  //    append that was aborted after its last step (its generation truncated away) would
  //    otherwise be the newest slot if this append is interrupted, and readers, who trust the
  //    newest slot, would refuse the file instead of recovering this generation.
  std::vector<std::byte> preamble(format::kPreambleSize);
  ReadRange head{0, preamble};
  JTREE_RETURN_IF_ERROR(reader.source()->read(std::span(&head, 1)));
  if (sink.can_patch()) {
    bool current = false, patched = false;
    for (const format::CommitSlot& s : format::valid_slots(preamble)) {
      if (s.generation == info.generation && s.footer_offset == info.footer_offset) {
        current = true;
      } else if (s.generation > info.generation && s.generation % 2 != info.generation % 2) {
        static const std::byte kEmpty[format::kSlotSize] = {};
        JTREE_RETURN_IF_ERROR(sink.patch(format::kSlotOffset[s.generation % 2], kEmpty));
        patched = true;
      }
    }
    if (!current) {
      JTREE_RETURN_IF_ERROR(patch_slot(sink, info.generation, info.footer_offset));
      patched = true;
    }
    if (patched) JTREE_RETURN_IF_ERROR(sink.sync());
  }

  // 2. Chunks, header, index, footer.
  const uint32_t segment_id = static_cast<uint32_t>(index.segments.size());
  ChunkStream stream(sink, options.alignment, random_u64(), segment_id);
  JTREE_RETURN_IF_ERROR(stream.begin());
  JTREE_RETURN_IF_ERROR(write_chunks(tree, stream, index.chunks, options, stats));
  if (stats->chunks > 0) index.segments.push_back(stream.span());

  JTREE_ASSIGN_OR_RETURN(std::vector<std::byte> header, header_bytes(tree, options.writer));
  JTREE_RETURN_IF_ERROR(pad_to(sink, 8));
  GenerationInfo g;
  g.generation = info.generation + 1;
  g.prev_footer_offset = info.footer_offset;
  g.header_offset = sink.position();
  g.header = header;
  g.version.writer_version = format::kFormatVersion;
  // The file's versions, raised when the new generation adds a leaf of a newer dtype (kept
  // leaves are covered by the file's own versions).
  const uint16_t needed = format::tree_min_read_version(tree);
  g.version.min_read_version = std::max<uint16_t>({info.min_read_version, needed, 1});
  g.version.min_write_version = std::max<uint16_t>({info.min_write_version, needed, 1});
  g.version.required_features = info.required_features;
  g.version.optional_features = info.optional_features;
  JTREE_RETURN_IF_ERROR(sink.append(header));
  // In place, the footer is written only once everything it points to is durable: a power
  // loss must not leave a valid footer at the end over data that never reached the disk.
  JTREE_ASSIGN_OR_RETURN(uint64_t footer, write_tail(sink, index, g, sink.can_patch()));
  JTREE_RETURN_IF_ERROR(sink.sync());

  // 3. The other slot points at the new generation.
  if (sink.can_patch()) JTREE_RETURN_IF_ERROR(patch_slot(sink, g.generation, footer));
  stats->generation = g.generation;
  stats->file_size = footer + format::kFooterSize;
  stats->leaves = tree.leaves.size();
  return commit_sink(sink, stats);
}

}  // namespace

Result<WriteStats> append(std::string_view path, Tree tree, const WriteOptions& options) {
  const std::string target(path);  // a path or URL (s3:// objects get a new version)
  // One append at a time per local file, and the generation read under the lock is the one
  // appended to: another append that commits between our read and our truncation of the
  // remains of interrupted appends would otherwise be cut away.
  JTREE_ASSIGN_OR_RETURN(const AppendLock lock, AppendLock::acquire(target));
  OpenOptions oo;
  oo.use_mmap = false;
  oo.remote = options.remote;
  JTREE_ASSIGN_OR_RETURN(std::shared_ptr<Reader> reader, Reader::open(target, oo));
  JTREE_RETURN_IF_ERROR(lock.still_current());
  JTREE_RETURN_IF_ERROR(check_append_base(*reader, options, target));
  const FileInfo& info = reader->info();
  if (info.is_segment) {
    return Status::invalid_argument(target + ": cannot append to a segment file");
  }
  if (info.min_write_version > format::kFormatVersion) {
    return Status::not_supported(target + ": file needs format version " +
                                std::to_string(info.min_write_version) +
                                " to write; this jtree writes version " +
                                std::to_string(format::kFormatVersion));
  }
  SinkOptions so;
  so.sync = options.sync;
  so.remote = options.remote;
  JTREE_ASSIGN_OR_RETURN(std::unique_ptr<Sink> sink,
                         open_append_sink(target, info.footer_offset + format::kFooterSize, so,
                                          reader->source()->etag()));
  WriteStats stats;
  Status st = append_into(*sink, *reader, tree, options, &stats);
  if (!st.ok()) {
    sink->abort();
    return st.with_prefix(target);
  }
  return stats;
}

}  // namespace jtree
