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

}  // namespace jtree
