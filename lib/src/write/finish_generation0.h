// The end of every write of a new file (generation 0): save, compact and commit_segments.
#pragma once

#include <cstddef>
#include <span>

#include "format/index_codec.h"
#include "format/layout.h"
#include "jtree/io.h"
#include "jtree/writer.h"

namespace jtree {

/// Closes a new file whose header (`header`, with versions `version`) stands right after the
/// preamble and whose chunks are all in `sink`: appends the index and the footer of generation
/// 0, records the file's size and its `leaves` in `stats`, and commits the sink (stats->io).
/// On error the sink is left to the caller to abort, as before any commit. Appends end their
/// generations themselves (append.cc): they point back at the previous footer and patch slots.
Status finish_generation0(Sink& sink, const format::IndexData& index,
                          std::span<const std::byte> header, const format::VersionInfo& version,
                          size_t leaves, WriteStats* stats);

}  // namespace jtree
