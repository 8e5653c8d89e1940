#include "write/metadata_writer.h"

#include <algorithm>

#include "codec/checksum.h"
#include "format/header_codec.h"
#include "format/validate.h"
#include "jtree/writer.h"
#include "write/chunk_writer.h"

namespace jtree {

std::string default_writer() { return "jtree " + std::string(version_string()); }

Result<std::vector<std::byte>> header_bytes(const Tree& tree, const std::string& writer) {
  return format::encode_header(tree, writer.empty() ? default_writer() : writer);
}

format::VersionInfo version_for(const Tree& tree, format::FileKind kind) {
  format::VersionInfo v;
  v.kind = kind;
  v.min_read_version = format::tree_min_read_version(tree);
  // Appending rewrites the header: a writer must know every dtype of it too.
  v.min_write_version = v.min_read_version;
  return v;
}

Status write_head(Sink& sink, std::span<const std::byte> header, const format::VersionInfo& v) {
  format::Preamble p;
  p.version = v;
  p.header_offset = format::kPreambleSize;
  p.header_size = header.size();
  p.header_hash = xxh3(header);
  const auto pre = format::encode_preamble(p);
  JTREE_RETURN_IF_ERROR(sink.append(pre));
  return sink.append(header);
}

Status commit_sink(Sink& sink, WriteStats* stats) {
  JTREE_RETURN_IF_ERROR(sink.commit());
  stats->io = sink.stats();
  return Status::success();
}

Result<uint64_t> write_checkpoint_head(Sink& sink, std::span<const std::byte> header,
                                       uint32_t alignment, const format::VersionInfo& v) {
  // Raw chunks keep their alignment in the checkpoint when the head starts on it too; a huge
  // or invalid alignment falls back to 64 (ChunkStream::begin() reports an invalid one).
  const bool usable = alignment != 0 && (alignment & (alignment - 1)) == 0 && alignment <= 4096;
  const uint64_t head_alignment = usable ? std::max<uint64_t>(64, alignment) : 64;
  JTREE_RETURN_IF_ERROR(pad_to(sink, head_alignment));
  const uint64_t head_offset = sink.position();
  JTREE_RETURN_IF_ERROR(write_head(sink, header, v));
  JTREE_RETURN_IF_ERROR(pad_to(sink, head_alignment));
  return head_offset;
}

Result<uint64_t> write_tail(Sink& sink, const format::IndexData& index, const GenerationInfo& g,
                            bool sync_before_footer) {
  const std::vector<std::byte> bytes = format::encode_index(index);
  JTREE_RETURN_IF_ERROR(pad_to(sink, 8));
  format::Footer f;
  f.index_offset = sink.position();
  f.index_size = bytes.size();
  f.index_hash = xxh3(bytes);
  f.header_offset = g.header_offset;
  f.header_size = g.header.size();
  f.header_hash = xxh3(g.header);
  f.generation = g.generation;
  f.prev_footer_offset = g.prev_footer_offset;
  f.version = g.version;
  JTREE_RETURN_IF_ERROR(sink.append(bytes));
  if (sync_before_footer) JTREE_RETURN_IF_ERROR(sink.sync());
  const uint64_t footer_offset = sink.position();
  const auto foot = format::encode_footer(f);
  JTREE_RETURN_IF_ERROR(sink.append(foot));
  return footer_offset;
}

}  // namespace jtree
