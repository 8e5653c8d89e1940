#include "jtree/key_path.h"

namespace jtree {

void append_path_component(std::string& out, const KeyView& key, uint32_t index, bool first) {
  if (!first) out += '/';
  switch (key.kind) {
    case Key::Kind::kNone:
      out += std::to_string(index);
      break;
    case Key::Kind::kInt:
      out += std::to_string(key.i);
      break;
    case Key::Kind::kStr:
      // (Not nothing: a top-level "" would have the root's path "".)
      if (key.str.empty()) out += "\\e";
      for (char c : key.str) {
        if (c == '/' || c == '\\') out += '\\';
        out += c;
      }
      break;
  }
}

Result<std::vector<std::string>> split_path(std::string_view path) {
  std::vector<std::string> parts;
  if (path.empty()) return parts;
  std::string cur;
  for (size_t i = 0; i < path.size(); ++i) {
    char c = path[i];
    if (c == '\\') {
      if (i + 1 == path.size()) {
        return Status::invalid_argument("key path '" + std::string(path) +
                                     "' ends with an unfinished escape '\\'");
      }
      const char next = path[++i];
      if (next != 'e') cur += next;  // ("\e", the empty string key's spelling: nothing)
    } else if (c == '/') {
      parts.push_back(std::move(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(std::move(cur));
  return parts;
}

}  // namespace jtree
