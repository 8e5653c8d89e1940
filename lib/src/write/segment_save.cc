// save_segment(): one process's part of a multi-process save.
#include <cstdio>

#include "jtree/multihost.h"
#include "write/save_internal.h"

namespace jtree {

std::string segment_path(std::string_view target, uint32_t index, uint32_t count) {
  char suffix[48];
  std::snprintf(suffix, sizeof suffix, ".seg-%05u-of-%05u", index, count);
  return std::string(target) + suffix;
}

Result<WriteStats> save_segment(Tree tree, std::string_view target, const SegmentOptions& segment,
                                const WriteOptions& options) {
  if (segment.process_count == 0 || segment.process_index >= segment.process_count) {
    return Status::invalid_argument(std::string(target) + ": process " +
                                   std::to_string(segment.process_index) + " of " +
                                   std::to_string(segment.process_count));
  }
  const std::string path = segment_path(target, segment.process_index, segment.process_count);
  SinkOptions so;
  so.overwrite = true;  // a segment left by an interrupted attempt is replaced
  so.sync = options.sync;
  so.remote = options.remote;
  JTREE_ASSIGN_OR_RETURN(std::unique_ptr<Sink> sink, create_sink(path, so));
  WriteStats stats;
  Status st = save_into(tree, *sink, options, &stats, &segment);
  if (!st.ok()) {
    sink->abort();
    return st.with_prefix(sink->name());
  }
  return stats;
}

}  // namespace jtree
