// jtree/key_path.h — key paths: "params/layers/0/w", the one rule for writing and splitting
// them (Tree::path, Reader::find, the jtree command and, through the native module, the Python
// package's jtree._keypath use it). Components are joined by '/'; inside a string key, '/'
// and '\' are escaped with '\'. List and tuple items and int keys are written in decimal.
// The empty string key is written "\e" (an escape nothing else writes): without it a
// top-level key "" would have the root's path "", and f[""] could not name it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "jtree/export.h"
#include "jtree/status.h"
#include "jtree/tree.h"

namespace jtree {

/// Appends the path component for `key` (or the position `index` for keyless children),
/// after a '/' unless it is the `first` component: "\e" for the empty string key.
JTREE_API void append_path_component(std::string& out, const KeyView& key, uint32_t index,
                                     bool first);
inline void append_path_component(std::string& out, const Key& key, uint32_t index, bool first) {
  append_path_component(out, key.view(), index, first);
}

/// Splits a path into unescaped components; "" (the root's path) gives none. "\e" stands for
/// nothing, so the component "\e" is the empty string key; '\' followed by any other
/// character is that character. An empty component between separators ("a/" or "/a", as
/// paths were written before "\e") is the empty string key too. A trailing '\' (an
/// unfinished escape) is InvalidArgument.
JTREE_API Result<std::vector<std::string>> split_path(std::string_view path);

/// "Did you mean": the (at most) `n` of `paths` most like `path` (a key path or a key-path
/// pattern that matched nothing), best first, by Ratcliff/Obershelp similarity (Python's
/// difflib.get_close_matches): those as deep as `path` first (similarity >= 0.5), then any
/// (>= 0.5), then, unless its last key has wildcards, the first path of each last key like
/// `path`'s last key (>= 0.6). Every error message that names a missing key path in the
/// library, the jtree command and the Python package takes its suggestions from here.
JTREE_API std::vector<std::string> nearest_paths(std::string_view path,
                                                 const std::vector<std::string>& paths,
                                                 size_t n = 3);

}  // namespace jtree
