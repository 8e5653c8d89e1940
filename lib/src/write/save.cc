// save(): a new file, generation 0, one segment (also segment files of multi-process saves).
#include "format/layout.h"
#include "jtree/multihost.h"
#include "jtree/writer.h"
#include "tree/names.h"
#include "write/chunk_writer.h"
#include "write/finish_generation0.h"
#include "write/leaf_planner.h"
#include "write/metadata_writer.h"
#include "write/save_internal.h"

namespace jtree {

Status save_into(Tree& tree, Sink& sink, const WriteOptions& options, WriteStats* stats,
                 const SegmentOptions* segment) {
  JTREE_RETURN_IF_ERROR(tree.finalize());
  JTREE_RETURN_IF_ERROR(check_names(tree));  // what readers refuse, never written
  // Reuse names a leaf of the file an append adds to: a new file has none (the leaf would be
  // written without storage, a file readers refuse).
  for (uint32_t i = 0; i < tree.leaves.size(); ++i) {
    if (tree.leaves[i].reuse()) {
      return Status::invalid_argument("leaf " + tree.leaf_path(i) +
                                     ": reuses a leaf of an existing file, which only an append "
                                     "can do (jtree::append)");
    }
  }
  JTREE_RETURN_IF_ERROR(plan_leaves(tree, options));
  uint64_t chunks = 0;
  for (Leaf& l : tree.leaves) {
    l.first_chunk = chunks;
    chunks += Tree::chunk_count(l);
  }
  JTREE_ASSIGN_OR_RETURN(std::vector<std::byte> header, header_bytes(tree, options.writer));
  const format::VersionInfo version =
      version_for(tree, segment ? format::FileKind::kSegment : format::FileKind::kCheckpoint);
  JTREE_RETURN_IF_ERROR(write_head(sink, header, version));

  format::IndexData index;
  index.chunks.resize(chunks);
  if (segment) {
    index.segment_info = format::SegmentInfo{segment->process_index, segment->process_count,
                                             segment->save_id};
    // Segment 0 carries the checkpoint's own head right before its chunk data, so that a
    // commit can copy head and data as one block (on S3: one server-side part copy).
    if (segment->process_index == 0) {
      JTREE_ASSIGN_OR_RETURN(index.segment_info->head_offset,
                             write_checkpoint_head(sink, header, options.alignment,
                                                   version_for(tree)));
    }
  }
  ChunkStream stream(sink, options.alignment, random_u64(), 0);
  JTREE_RETURN_IF_ERROR(stream.begin());
  const auto process = segment ? std::optional<uint32_t>(segment->process_index) : std::nullopt;
  JTREE_RETURN_IF_ERROR(write_chunks(tree, stream, index.chunks, options, stats, process));
  // A segment file always has its one segment (possibly empty): the commit copies it.
  if (chunks > 0 || segment) index.segments.push_back(stream.span());
  // A segment's data is followed by zeros up to a multiple of 64 bytes from its start, so that
  // the commit can copy whole blocks that keep the next segment aligned.
  if (segment) JTREE_RETURN_IF_ERROR(pad_segment_end(sink, stream.span()));

  return finish_generation0(sink, index, header, version, tree.leaves.size(), stats);
}

Result<WriteStats> save(Tree tree, Sink& sink, const WriteOptions& options) {
  WriteStats stats;
  Status st = save_into(tree, sink, options, &stats, nullptr);
  if (!st.ok()) {
    sink.abort();
    return st.with_prefix(sink.name());
  }
  return stats;
}

Result<WriteStats> save(Tree tree, std::string_view path_or_url, const WriteOptions& options) {
  JTREE_RETURN_IF_ERROR(check_save_target(path_or_url, options));
  SinkOptions so;
  so.overwrite = options.overwrite;
  so.sync = options.sync;
  so.remote = options.remote;
  JTREE_ASSIGN_OR_RETURN(std::unique_ptr<Sink> sink, create_sink(path_or_url, so));
  return save(std::move(tree), *sink, options);
}

}  // namespace jtree
