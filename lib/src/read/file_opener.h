// Opening a file: fetch and validate preamble, footer, header and index (spec/FORMAT.md,
// "Reading a file"). Touches no chunk data.
#pragma once

#include <vector>

#include "format/index_codec.h"
#include "format/layout.h"
#include "format/validate.h"
#include "jtree/io.h"
#include "jtree/reader.h"
#include "read/read_tree.h"

namespace jtree {

struct OpenedFile {
  ReadTree tree;  ///< validated; read in place from the header
  FileInfo info;
  format::IndexData index;
  format::Footer footer;
  std::vector<format::Region> metadata;  ///< preamble, header, index, footer regions
};

/// Reads and validates everything but chunk data. Errors are prefixed with the source name.
Result<OpenedFile> open_file(Source& source, const OpenOptions& options);

}  // namespace jtree
