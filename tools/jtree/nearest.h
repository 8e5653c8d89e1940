// "Did you mean": the key paths of a file nearest a key path it does not have, for the
// command's NotFound messages. The same choice as the Python package's jtree._keypath.nearest
// (difflib's get_close_matches): similarity is Ratcliff/Obershelp's 2 x matches / total length.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "jtree/jtree.h"

namespace jtree::cli {

/// difflib.SequenceMatcher(None, a, b).ratio(): 2 x (characters in matching blocks) / (|a| +
/// |b|), in [0, 1]; 1 for two empty strings.
double similarity(std::string_view a, std::string_view b);

/// The (at most) `n` paths of `paths` most like `path`, best first: those as deep as `path`
/// first (similarity >= 0.5), then any (>= 0.5), then the paths whose last key is like
/// `path`'s last key (>= 0.6): what a typo meant.
std::vector<std::string> nearest_paths(std::string_view path, const std::vector<std::string>& paths,
                                       size_t n = 3);

/// The key paths of the reader's nodes (the root's "" left out; at most 200,000 of them).
std::vector<std::string> node_paths(const Reader& r);

/// `message` followed by " (nearest: 'a', 'b')" when the file has paths near `path`.
std::string with_nearest(const std::string& message, std::string_view path, const Reader& r);

}  // namespace jtree::cli
