// Writing a file's metadata: the preamble and header of generation 0 at the front, and the
// index and footer that close every generation.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "format/index_codec.h"
#include "format/layout.h"
#include "jtree/io.h"
#include "jtree/tree.h"
#include "jtree/writer.h"

namespace jtree {

/// The header of `tree` (leaves resolved) with the writer string of `options`.
Result<std::vector<std::byte>> header_bytes(const Tree& tree, const std::string& writer);

/// The versions of a new file holding `tree` (resolved leaves): written by this version,
/// readable and appendable by the lowest version that defines every leaf's dtype (1 unless a
/// leaf uses a version-2 addition), so that older readers keep reading what they can.
format::VersionInfo version_for(const Tree& tree,
                                format::FileKind kind = format::FileKind::kCheckpoint);

/// Writes the preamble and the header at the start of an empty sink.
Status write_head(Sink& sink, std::span<const std::byte> header, const format::VersionInfo& v);

/// Segment 0 of a multi-process save: pads the sink, then writes the preamble and header the
/// committed checkpoint will start with (spec/FORMAT.md, section 11.1), padded so that the
/// chunk data can follow, with the checkpoint's versions `v`. Returns the offset of that copy
/// (SegmentInfo::head_offset).
Result<uint64_t> write_checkpoint_head(Sink& sink, std::span<const std::byte> header,
                                       uint32_t alignment, const format::VersionInfo& v);

/// Where a generation's header is and what came before it.
struct GenerationInfo {
  uint64_t generation = 0;
  uint64_t prev_footer_offset = 0;
  uint64_t header_offset = 0;
  std::span<const std::byte> header;
  format::VersionInfo version;
};

/// Appends the index (8-aligned) and the footer. Returns the footer's offset. With
/// `sync_before_footer`, everything before the footer is made durable first (in-place appends:
/// a footer must never be durable before what it points to).
Result<uint64_t> write_tail(Sink& sink, const format::IndexData& index, const GenerationInfo& g,
                            bool sync_before_footer = false);

/// Commits the sink and records what writing it took in stats->io.
Status commit_sink(Sink& sink, WriteStats* stats);

/// The default writer string, "jtree <version>".
std::string default_writer();

}  // namespace jtree
