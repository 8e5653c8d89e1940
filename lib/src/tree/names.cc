#include "tree/names.h"

#include <string>
#include <string_view>
#include <unordered_set>

#include "format/validate.h"
#include "util/utf8.h"

namespace jtree {
namespace {

// A node whose key is wrong is named by its parent's path and its position: the key itself
// cannot be shown as it is. (Preorder: a parent's key was checked before its children's.)
std::string where_is(const Tree& t, uint32_t node) {
  if (node == 0) return "the root";
  const uint32_t parent = t.parent(node);
  uint32_t pos = 0;
  for (uint32_t c = parent + 1; c < node; c = t.subtree_end(c)) ++pos;
  const std::string p = t.path(parent);
  return "node " + std::to_string(node) + " (child " + std::to_string(pos) + " of " +
         (p.empty() ? std::string("the root") : "'" + escape_for_message(p, 256) + "'") + ")";
}

Status bad_name(const std::string& where, const char* what, std::string_view s, size_t at) {
  return Status::invalid_argument(where + ": " + what + " is not valid UTF-8 (byte " +
                                 std::to_string(at) + " of \"" + escape_for_message(s) +
                                 "\"); the format stores names as UTF-8 text");
}

// Every text key names one metadata entry, whose value is UTF-8.
Status check_text_metadata(const Tree& tree) {
  if (tree.metadata_text_keys.empty()) return Status::success();
  std::unordered_set<std::string_view> text(tree.metadata_text_keys.begin(),
                                            tree.metadata_text_keys.end());
  size_t found = 0;
  for (size_t i = 0; i < tree.metadata.size(); ++i) {
    const auto& [key, value] = tree.metadata[i];
    if (text.count(key) == 0) continue;
    ++found;
    if (auto at = utf8_error(value)) {
      return Status::invalid_argument("metadata entry " + std::to_string(i) + " (\"" +
                                      escape_for_message(key) + "\"): a text value that is not "
                                      "valid UTF-8 (byte " + std::to_string(*at) + ")");
    }
  }
  if (found != tree.metadata_text_keys.size()) {
    return Status::invalid_argument("metadata_text_keys: " +
                                    std::to_string(tree.metadata_text_keys.size()) +
                                    " keys, of which " + std::to_string(found) +
                                    " name a metadata entry (each must name one, once)");
  }
  return Status::success();
}

}  // namespace

Status check_names(const Tree& tree) {
  for (uint32_t i = 0; i < tree.nodes.size(); ++i) {
    const Node& n = tree.nodes[i];
    if (n.key.kind == Key::Kind::kStr) {
      if (auto at = utf8_error(n.key.str)) [[unlikely]] {
        return bad_name(where_is(tree, i), "key", n.key.str, *at);
      }
    }
    if (auto at = utf8_error(n.type_name)) [[unlikely]] {
      return bad_name(where_is(tree, i), "type name", n.type_name, *at);
    }
  }
  for (uint32_t i = 0; i < tree.leaves.size(); ++i) {
    const Leaf& l = tree.leaves[i];
    if (l.kind == LeafKind::kInt && !l.big_int.empty() &&
        !format::big_int_canonical(l.big_int, l.int_value)) {
      return Status::invalid_argument("leaf " + escape_for_message(tree.leaf_path(i), 256) +
                                     ": big_int must be the minimal two's complement encoding "
                                     "of an integer outside int64 (with int_value 0)");
    }
    const std::string& name = l.type_name;
    if (auto at = utf8_error(name)) [[unlikely]] {
      return bad_name("leaf " + escape_for_message(tree.leaf_path(i), 256), "type name", name,
                      *at);
    }
  }
  std::unordered_set<std::string_view> seen;
  seen.reserve(tree.metadata.size());
  for (size_t i = 0; i < tree.metadata.size(); ++i) {
    const std::string& key = tree.metadata[i].first;
    if (auto at = utf8_error(key)) {
      return bad_name("metadata entry " + std::to_string(i), "key", key, *at);
    }
    if (!seen.insert(key).second) {
      return Status::invalid_argument("metadata entry " + std::to_string(i) + ": duplicate key \"" +
                                     escape_for_message(key) + "\" (metadata keys are unique)");
    }
  }
  return check_text_metadata(tree);
}

}  // namespace jtree
