// "Did you mean" in the command's NotFound messages: the key paths of a file nearest a key path
// it does not have (jtree::nearest_paths, as the Python package chooses them).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "jtree/jtree.h"

namespace jtree::cli {

/// The key paths of the reader's nodes (the root's "" left out; at most 200,000 of them).
std::vector<std::string> node_paths(const Reader& r);

/// `message` followed by " (nearest: 'a', 'b')" when the file has paths near `path`.
std::string with_nearest(const std::string& message, std::string_view path, const Reader& r);

}  // namespace jtree::cli
