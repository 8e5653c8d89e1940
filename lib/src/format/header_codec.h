// The header flatbuffer <-> Tree (spec/FORMAT.md, "Header"). Pure functions over bytes.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "jtree/options.h"
#include "jtree/status.h"
#include "jtree/tree.h"

namespace jtree::format {

/// Encodes a tree whose leaves are resolved (storage, chunk grid, filter, codec chosen and
/// inline payloads in stored form). Errors: InvalidArgument when the header would exceed the
/// flatbuffer size limit.
Result<std::vector<std::byte>> encode_header(const Tree& tree, std::string_view writer);

/// Decodes a header: flatbuffer verification bounded by `limits`, then conversion of every
/// field with range checks (enum values, string lengths). The tree is not finalized and its
/// leaf specs are not validated: see validate.h. Errors: Corruption, ResourceExhausted.
Result<Tree> decode_header(std::span<const std::byte> bytes, const Limits& limits,
                           std::string* writer);

/// Totals over the leaves of a header decoded by decode_tree.
struct HeaderSummary {
  uint64_t chunks = 0;        ///< chunks the index must list (validate_leaves' result)
  uint64_t inline_bytes = 0;  ///< bytes of inline payloads
  uint64_t raw_bytes = 0;     ///< stored-form bytes of chunked leaves
};

/// decode_header, then Tree::Finalize(limits.max_depth), then validate_leaves, in fewer passes:
/// each leaf's spec is checked right after it is decoded, while it is in the cache, and
/// Leaf::first_chunk is set there. The errors are those of the three in that order (Finalize's
/// prefixed with "header: " and made Corruption), whatever the ranges' timing: a leaf that
/// fails is reported by running validate_leaves itself once the tree is finalized.
Result<Tree> decode_tree(std::span<const std::byte> bytes, const Limits& limits,
                         std::string* writer, HeaderSummary* summary);

}  // namespace jtree::format
