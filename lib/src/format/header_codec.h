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

}  // namespace jtree::format
