// commit_segments(): assemble one checkpoint from the segments of a multi-process save
// (spec/FORMAT.md, section 11).
#include <algorithm>
#include <vector>

#include "codec/checksum.h"
#include "format/layout.h"
#include "jtree/multihost.h"
#include "jtree/reader.h"
#include "write/chunk_writer.h"
#include "write/finish_generation0.h"
#include "write/metadata_writer.h"
#include "write/save_internal.h"

namespace jtree {
namespace {

constexpr uint32_t kSegmentAlignment = 64;

// Opens every segment and checks that they belong together.
Result<std::vector<std::shared_ptr<Reader>>> open_segments(std::string_view target,
                                                           uint32_t count,
                                                           const RemoteOptions& remote) {
  std::vector<std::shared_ptr<Reader>> segs;
  OpenOptions oo;
  oo.use_mmap = false;
  oo.remote = remote;
  for (uint32_t k = 0; k < count; ++k) {
    const std::string path = segment_path(target, k, count);
    auto r = Reader::open(path, oo);
    if (!r.ok()) {
      if (r.status().is_not_found()) {
        return Status::not_found(path + ": segment " + std::to_string(k) + " of " +
                                std::to_string(count) +
                                " is missing (did that process finish its save?)");
      }
      return r.status();
    }
    const FileInfo& in = (*r)->info();
    if (!in.is_segment) return Status::corruption(path + ": not a segment file");
    if (in.process_index != k || in.process_count != count) {
      return Status::corruption(path + ": holds segment " + std::to_string(in.process_index) +
                                " of " + std::to_string(in.process_count) + ", not " +
                                std::to_string(k) + " of " + std::to_string(count));
    }
    if (!segs.empty()) {
      const FileInfo& first = segs.front()->info();
      if (in.save_id != first.save_id) {
        return Status::corruption(path + ": belongs to another save (save id differs from "
                                         "segment 0's): a leftover of an earlier attempt?");
      }
      if (in.header_hash != first.header_hash || in.header_size != first.header_size) {
        return Status::corruption(path + ": its tree differs from segment 0's (every process "
                                         "must save the same structure and leaf specs)");
      }
    }
    if (in.segments.size() != 1) {
      return Status::corruption(path + ": a segment file must have exactly one data segment");
    }
    segs.push_back(std::move(*r));
  }
  return segs;
}

// For every chunk, the one segment that holds it.
Result<std::vector<uint32_t>> chunk_owners(const std::vector<std::shared_ptr<Reader>>& segs,
                                           std::string_view target) {
  const Tree& tree = segs.front()->tree();
  const uint64_t n = segs.front()->info().num_chunks;
  std::vector<uint32_t> owner(n, UINT32_MAX);
  for (uint32_t k = 0; k < segs.size(); ++k) {
    for (uint64_t i = 0; i < n; ++i) {
      if (segs[k]->chunk(i).absent) continue;
      if (owner[i] != UINT32_MAX) {
        return Status::corruption(std::string(target) + ": chunk " + std::to_string(i) +
                                  " is in segments " + std::to_string(owner[i]) + " and " +
                                  std::to_string(k) + " (two processes wrote the same data)");
      }
      owner[i] = k;
    }
  }
  for (uint32_t l = 0; l < tree.leaves.size(); ++l) {
    const Leaf& leaf = tree.leaves[l];
    for (uint64_t c = 0; c < Tree::chunk_count(leaf); ++c) {
      if (owner[leaf.first_chunk + c] == UINT32_MAX) {
        return Status::corruption(std::string(target) + ": leaf " + tree.leaf_path(l) +
                                  ": chunk " + std::to_string(c) +
                                  " is in no segment (no process held that part)");
      }
    }
  }
  return owner;
}

Status verify_data(const std::vector<std::shared_ptr<Reader>>& segs) {
  for (const auto& r : segs) {
    auto rep = r->verify();
    if (!rep.ok()) return rep.status();
    if (!rep->ok()) return rep->problems.front().status;
  }
  return Status::success();
}

// The bytes of segment k's file that the commit copies as one block: its chunk data, with the
// zeros after it up to a multiple of 64 where its writer left them (spec/FORMAT.md, 11.1).
struct Block {
  uint64_t offset = 0;  // in the segment file
  uint64_t size = 0;
};

Block data_block(const FileInfo& in) {
  const SegmentSpan& seg = in.segments[0];
  const uint64_t padded = (seg.size + 63) / 64 * 64;
  const bool has_padding = seg.file_offset + padded <= in.index_offset;
  return {seg.file_offset, has_padding ? padded : seg.size};
}

// Segment 0's header and its copy of the checkpoint's preamble and header (section 11.1).
struct SegmentHead {
  std::vector<std::byte> header;  // the segment's own header
  uint64_t copy_offset = 0;       // where the copy is; 0 when the segment has none
  std::vector<std::byte> copy;    // the copy, then up to 4 KiB of the padding after it
};

// Reads segment 0's header and head copy in one call (they lie next to each other, so a
// remote source fetches both in one request) and checks the copy byte for byte against the
// header. A writer may omit the copy: the commit then writes the head itself.
Result<SegmentHead> read_segment_head(const Reader& seg0) {
  const FileInfo& in = seg0.info();
  SegmentHead out;
  out.header.resize(in.header_size);
  std::vector<ReadRange> ranges{{in.header_offset, out.header}};
  const uint64_t h = in.checkpoint_head_offset;
  const uint64_t copy_size = format::kPreambleSize + in.header_size;
  if (h != 0) {
    // Placed as section 11.1 says, with at most the largest alignment (1 GiB) of zero padding
    // after it, of which the first 4 KiB are checked.
    const uint64_t data = in.segments[0].file_offset;
    Status placed = format::check_head_placement(h, copy_size, in.header_offset + in.header_size,
                                                 data);
    if (placed.ok() && data - h - copy_size > (1ull << 30) + 64) {
      placed = Status::corruption("more than 1 GiB of padding after the copy of the checkpoint "
                                  "head at " + std::to_string(h));
    }
    if (!placed.ok()) return placed.with_prefix(seg0.name());
    out.copy_offset = h;
    out.copy.resize(copy_size + std::min<uint64_t>(data - h - copy_size, 4096));
    ranges.push_back({h, out.copy});
  }
  JTREE_RETURN_IF_ERROR(seg0.source()->read(ranges));
  if (xxh3(out.header) != in.header_hash) {
    return Status::corruption(seg0.name() + ": header checksum mismatch");
  }
  if (h == 0) return out;
  const auto copy = std::span(out.copy).first(copy_size);
  Status st = format::check_checkpoint_head(copy, out.header);
  if (st.ok() && std::any_of(out.copy.begin() + static_cast<ptrdiff_t>(copy_size),
                             out.copy.end(), [](std::byte b) { return b != std::byte{0}; })) {
    st = Status::corruption("non-zero padding after the copy of the checkpoint head");
  }
  if (!st.ok()) return st.with_prefix(seg0.name() + ": at " + std::to_string(h));
  return out;
}

Status commit_into(const std::vector<std::shared_ptr<Reader>>& segs,
                   const std::vector<uint32_t>& owner, Sink& sink, const CommitOptions& options,
                   WriteStats* stats) {
  const Reader& first = *segs.front();
  const FileInfo& fi = first.info();
  // The header, byte for byte: every segment carries the same one.
  JTREE_ASSIGN_OR_RETURN(const SegmentHead seg_head, read_segment_head(first));
  const std::vector<std::byte>& header = seg_head.header;
  const uint64_t head = seg_head.copy_offset;
  // The segments' own versions, as a checkpoint (the copy of the head carries the same).
  format::VersionInfo version = version_for(first.tree());
  if (head == 0) JTREE_RETURN_IF_ERROR(write_head(sink, header, version));

  // Each segment's data copied as a block (segment 0's with the head in front when it carries
  // one): its chunks keep their offsets and checksums. With every block a multiple of 64 bytes
  // nothing is written between blocks, so on S3 each block of 5 MiB or more is copied on the
  // server and only the index and footer are uploaded.
  format::IndexData index;
  std::vector<uint32_t> new_segment(segs.size(), UINT32_MAX);
  uint64_t done = 0, total = 0;
  for (const auto& r : segs) total += r->info().segments[0].size;
  for (uint32_t k = 0; k < segs.size(); ++k) {
    const SegmentSpan& seg = segs[k]->info().segments[0];
    Block block = data_block(segs[k]->info());
    if (k == 0 && head != 0) {
      block.size += block.offset - head;
      block.offset = head;
    } else if (seg.size == 0) {
      continue;
    } else {
      JTREE_RETURN_IF_ERROR(pad_to(sink, kSegmentAlignment));
    }
    const uint64_t data_start = sink.position() + (seg.file_offset - block.offset);
    JTREE_RETURN_IF_ERROR(sink.append_from(segs[k]->name(), block.offset, block.size));
    if (seg.size == 0) continue;  // segment 0 with the head only
    new_segment[k] = static_cast<uint32_t>(index.segments.size());
    index.segments.push_back({data_start, seg.size, seg.salt});
    done += seg.size;
    if (options.write.progress && !options.write.progress(done, total)) {
      return Status::aborted("commit cancelled");
    }
  }
  const uint64_t n = fi.num_chunks;
  index.chunks.resize(n);
  for (uint64_t i = 0; i < n; ++i) {
    const uint32_t k = owner[i];
    const ChunkInfo c = segs[k]->chunk(i);
    format::ChunkRecord& rec = index.chunks[i];
    rec.segment = new_segment[k];
    rec.offset = c.file_offset - segs[k]->info().segments[0].file_offset;
    rec.stored_size = c.stored_size;
    rec.checksum = c.checksum;
    rec.encoding = static_cast<uint8_t>(c.encoding);
    stats->chunks++;
    stats->raw_bytes += c.raw_size;
    stats->stored_bytes += c.stored_size;
  }
  return finish_generation0(sink, index, header, version, first.tree().leaves.size(), stats);
}

}  // namespace

Result<WriteStats> commit_segments(std::string_view target, uint32_t process_count,
                                   const CommitOptions& options) {
  if (process_count == 0) return Status::invalid_argument("commit of zero segments");
  // Before anything is read: the commit replaces the target as a save does.
  JTREE_RETURN_IF_ERROR(check_save_target(target, options.write));
  JTREE_ASSIGN_OR_RETURN(auto segs, open_segments(target, process_count, options.write.remote));
  JTREE_ASSIGN_OR_RETURN(auto owner, chunk_owners(segs, target));
  if (options.verify_chunks) JTREE_RETURN_IF_ERROR(verify_data(segs));
  SinkOptions so;
  so.overwrite = options.write.overwrite;
  so.sync = options.write.sync;
  so.remote = options.write.remote;
  JTREE_ASSIGN_OR_RETURN(std::unique_ptr<Sink> sink, create_sink(target, so));
  WriteStats stats;
  Status st = commit_into(segs, owner, *sink, options, &stats);
  if (!st.ok()) {
    sink->abort();
    return st.with_prefix(sink->name());
  }
  // The checkpoint is committed: the segments are no longer needed.
  if (!options.keep_segments) {
    for (const auto& r : segs) {
      Status rm = remove_object(r->name(), options.write.remote);
      if (!rm.ok() && !rm.is_not_found()) return rm.with_prefix("committed, but cleaning up");
    }
  }
  return stats;
}

}  // namespace jtree
