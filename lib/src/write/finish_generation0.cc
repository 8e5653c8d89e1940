#include "write/finish_generation0.h"

#include "write/metadata_writer.h"

namespace jtree {

Status finish_generation0(Sink& sink, const format::IndexData& index,
                          std::span<const std::byte> header, const format::VersionInfo& version,
                          size_t leaves, WriteStats* stats) {
  GenerationInfo g;  // generation 0: no previous footer
  g.header_offset = format::kPreambleSize;
  g.header = header;
  g.version = version;
  JTREE_ASSIGN_OR_RETURN(uint64_t footer, write_tail(sink, index, g));
  stats->file_size = footer + format::kFooterSize;
  stats->leaves = leaves;
  return commit_sink(sink, stats);
}

}  // namespace jtree
