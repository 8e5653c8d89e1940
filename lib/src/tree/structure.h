// The structure rules of a tree (spec/FORMAT.md, "Validation") and navigation over it, written
// once for any preorder list of nodes: a Tree's own nodes (Tree::finalize) and the nodes of a
// file's header read in place (the Reader, which does not build a Tree to open a file).
//
// `Nodes` is any type with `size_t size() const`, `NodeShape shape(uint32_t) const` and
// `KeyView key(uint32_t) const`.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "jtree/status.h"
#include "jtree/tree.h"
#include "jtree/key_path.h"
#include "tree/unique_keys.h"

namespace jtree {

/// What the structure rules look at in a node, besides its key.
struct NodeShape {
  NodeKind kind = NodeKind::kNone;
  Key::Kind key_kind = Key::Kind::kNone;
  bool has_type_name = false;
  bool has_aux_data = false;
  uint32_t num_children = 0;
  uint32_t leaf = 0;

  static NodeShape of(const NodeView& n) {
    return NodeShape{n.kind, n.key.kind, !n.type_name.empty(), !n.aux_data.empty(),
                     n.num_children, n.leaf};
  }
};

namespace structure_detail {

inline bool is_container(NodeKind k) {
  return k == NodeKind::kDict || k == NodeKind::kOrderedDict || k == NodeKind::kList ||
         k == NodeKind::kTuple || k == NodeKind::kNamedTuple || k == NodeKind::kCustom;
}

inline bool is_mapping(NodeKind k) {
  return k == NodeKind::kDict || k == NodeKind::kOrderedDict || k == NodeKind::kNamedTuple;
}

}  // namespace structure_detail

/// The key path of `node` (Tree::path's syntax) from parent links and positions.
template <typename Nodes>
std::string node_path(const Nodes& nodes, const TreeNavigation& nav, uint32_t node) {
  std::vector<uint32_t> chain;
  for (uint32_t x = node; x != 0; x = nav.parent[x]) chain.push_back(x);
  std::string p;
  for (size_t k = chain.size(); k-- > 0;) {
    // The position, not a count of the siblings before: paths of every leaf of a list of a
    // million stay linear in total.
    append_path_component(p, nodes.key(chain[k]), nav.position[chain[k]], k + 1 == chain.size());
  }
  return p;
}

/// The children of a container, in order.
inline std::vector<uint32_t> child_nodes(const TreeNavigation& nav, uint32_t node,
                                         uint32_t num_children) {
  std::vector<uint32_t> out;
  out.reserve(num_children);
  for (uint32_t c = node + 1; c < nav.subtree_end[node]; c = nav.subtree_end[c]) out.push_back(c);
  return out;
}

/// Checks the structure (child counts, keys, leaf references, depth, unique keys) of `nodes`
/// whose leaves are numbered below `num_leaves`, and fills `nav`. Errors: InvalidArgument
/// naming the node's path; ResourceExhausted for nesting deeper than `max_depth` (a limit).
template <typename Nodes>
Status check_structure(const Nodes& nodes, size_t num_leaves, uint32_t max_depth,
                       TreeNavigation& nav) {
  using structure_detail::is_container;
  using structure_detail::is_mapping;
  const size_t n = nodes.size();
  if (n == 0) return Status::invalid_argument("tree has no root node");
  if (n > UINT32_MAX - 1) return Status::invalid_argument("tree has too many nodes");
  nav.subtree_end.assign(n, 0);
  nav.parent.assign(n, 0);
  nav.position.assign(n, 0);
  nav.leaf_node.assign(num_leaves, UINT32_MAX);

  struct Open {
    uint32_t node;
    uint32_t remaining;
    uint32_t num_children;
    NodeKind kind;
  };
  std::vector<Open> stack;
  std::vector<uint32_t> keyed_containers;  // in node order
  auto fail = [&](uint32_t i, const std::string& what) {
    // The parent links and positions computed so far cover the chain up from node i.
    return Status::invalid_argument("node " + std::to_string(i) + " (path '" +
                                   node_path(nodes, nav, i) + "'): " + what);
  };

  for (uint32_t i = 0; i < n; ++i) {
    if (i > 0 && stack.empty()) {
      return Status::invalid_argument("tree has " + std::to_string(n - i) +
                                     " nodes after the root's subtree ends");
    }
    const NodeShape node = nodes.shape(i);
    if (i > 0) {
      Open& top = stack.back();
      nav.parent[i] = top.node;
      nav.position[i] = top.num_children - top.remaining;
      --top.remaining;
      const NodeKind pk = top.kind;
      if (is_mapping(pk) && node.key_kind == Key::Kind::kNone) {
        return fail(i, "child of a " + std::string(node_kind_name(pk)) + " without a key");
      }
      if ((pk == NodeKind::kList || pk == NodeKind::kTuple) && node.key_kind != Key::Kind::kNone) {
        return fail(i, "child of a " + std::string(node_kind_name(pk)) + " with a key");
      }
      if (pk == NodeKind::kNamedTuple && node.key_kind != Key::Kind::kStr) {
        return fail(i, "namedtuple field without a string name");
      }
    } else if (node.key_kind != Key::Kind::kNone) {
      return fail(i, "the root has a key");
    }
    switch (node.kind) {
      case NodeKind::kLeaf:
        if (node.leaf >= num_leaves) {
          return fail(i, "refers to leaf " + std::to_string(node.leaf) + " of " +
                             std::to_string(num_leaves));
        }
        if (nav.leaf_node[node.leaf] == UINT32_MAX) nav.leaf_node[node.leaf] = i;
        [[fallthrough]];
      case NodeKind::kNone:
        if (node.num_children != 0) return fail(i, "a leaf or None node with children");
        break;
      default:
        if (!is_container(node.kind)) {
          return fail(i, "unknown node kind " + std::to_string(static_cast<int>(node.kind)));
        }
        if ((node.kind == NodeKind::kNamedTuple || node.kind == NodeKind::kCustom) &&
            !node.has_type_name) {
          return fail(i, std::string(node_kind_name(node.kind)) + " without a type name");
        }
        break;
    }
    if (node.kind != NodeKind::kCustom && node.has_aux_data) {
      return fail(i, "aux data on a node that is not custom");
    }
    if (node.kind != NodeKind::kNamedTuple && node.kind != NodeKind::kCustom &&
        node.has_type_name) {
      return fail(i, "type name on a node that is neither namedtuple nor custom");
    }
    if (node.num_children > n - 1 - i) {
      return fail(i, "claims " + std::to_string(node.num_children) + " children; only " +
                         std::to_string(n - 1 - i) + " nodes follow");
    }
    if (node.num_children > 0) {
      // Containers whose keys the second pass checks: it then visits only these, not every node
      // again.
      if (node.num_children >= 2 && node.kind != NodeKind::kList &&
          node.kind != NodeKind::kTuple) {
        keyed_containers.push_back(i);
      }
      if (stack.size() >= max_depth) {
        // A limit, not a rule: the file may be valid, this reader will not go deeper
        // (FORMAT.md 12.1, 13): ResourceExhausted, which decoders pass on as it is.
        return Status::resource_exhausted(
            fail(i, "nesting deeper than " + std::to_string(max_depth)).message());
      }
      stack.push_back({i, node.num_children, node.num_children, node.kind});
    } else {
      nav.subtree_end[i] = i + 1;
    }
    while (!stack.empty() && stack.back().remaining == 0) {
      nav.subtree_end[stack.back().node] = i + 1;
      stack.pop_back();
    }
  }
  if (!stack.empty()) {
    return Status::invalid_argument("tree ends inside node " + std::to_string(stack.back().node) +
                                   " (" + std::to_string(stack.back().remaining) +
                                   " children missing)");
  }
  for (size_t l = 0; l < num_leaves; ++l) {
    if (nav.leaf_node[l] == UINT32_MAX) {
      return Status::invalid_argument("leaf " + std::to_string(l) + " is not referenced by any node");
    }
  }
  // Keys unique within each keyed container; Custom children all keyed or all keyless.
  UniqueKeyChecker checker;
  std::vector<uint32_t> kids;
  std::vector<KeyView> keys;
  for (uint32_t i : keyed_containers) {
    const NodeKind k = nodes.shape(i).kind;
    kids.clear();
    keys.clear();
    // (Exact sizes: grown by doubling, a container of many children touches twice the memory,
    // fresh pages a fresh process pays for.)
    kids.reserve(nodes.shape(i).num_children);
    keys.reserve(nodes.shape(i).num_children);
    for (uint32_t c = i + 1; c < nav.subtree_end[i]; c = nav.subtree_end[c]) {
      kids.push_back(c);
      keys.push_back(nodes.key(c));
    }
    if (k == NodeKind::kCustom) {
      const bool keyed = keys[0].kind != Key::Kind::kNone;
      for (size_t c = 0; c < kids.size(); ++c) {
        if ((keys[c].kind != Key::Kind::kNone) != keyed) {
          return fail(kids[c], "custom node mixes keyed and keyless children");
        }
      }
      if (!keyed) continue;
    }
    if (!checker.unique(keys)) return fail(i, "duplicate keys");
  }
  return Status::success();
}

/// The node at `path` (Tree::path's syntax), or NotFound naming the first missing component.
template <typename Nodes>
Result<uint32_t> find_node(const Nodes& nodes, const TreeNavigation& nav,
                           std::string_view path_str) {
  JTREE_ASSIGN_OR_RETURN(std::vector<std::string> parts, split_path(path_str));
  uint32_t cur = 0;
  std::string walked;
  for (const std::string& part : parts) {
    std::optional<uint32_t> found;
    int64_t as_int = 0;
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), as_int);
    bool is_int = ec == std::errc() && ptr == part.data() + part.size();
    uint32_t pos = 0;
    for (uint32_t c = cur + 1; c < nav.subtree_end[cur]; c = nav.subtree_end[c], ++pos) {
      const KeyView k = nodes.key(c);
      if ((k.kind == Key::Kind::kStr && k.str == part) ||
          (k.kind == Key::Kind::kInt && is_int && k.i == as_int) ||
          (k.kind == Key::Kind::kNone && is_int && as_int >= 0 &&
           static_cast<uint64_t>(as_int) == pos)) {
        if (k.kind == Key::Kind::kStr || !found) found = c;  // a str key beats an int key
        if (k.kind == Key::Kind::kStr) break;
      }
    }
    if (!found) {
      const NodeShape n = nodes.shape(cur);
      std::string where = walked.empty() ? "the root" : "'" + walked + "'";
      if (n.num_children == 0) {
        return Status::not_found("key path '" + std::string(path_str) + "': " + where + " is a " +
                                std::string(node_kind_name(n.kind)) + ", it has no '" + part +
                                "'");
      }
      return Status::not_found("key path '" + std::string(path_str) + "': no '" + part + "' in " +
                              where);
    }
    cur = *found;
    walked = node_path(nodes, nav, cur);
  }
  return cur;
}

}  // namespace jtree
