#include "jtree/tree.h"

#include <algorithm>
#include <charconv>
#include <string>

#include "format/chunk_grid.h"
#include "tree/key_path.h"
#include "tree/unique_keys.h"
#include "util/checked_math.h"

namespace jtree {

std::string_view node_kind_name(NodeKind k) {
  switch (k) {
    case NodeKind::kDict: return "dict";
    case NodeKind::kList: return "list";
    case NodeKind::kTuple: return "tuple";
    case NodeKind::kNamedTuple: return "namedtuple";
    case NodeKind::kOrderedDict: return "OrderedDict";
    case NodeKind::kNone: return "None";
    case NodeKind::kCustom: return "custom";
    case NodeKind::kLeaf: return "leaf";
  }
  return "unknown";
}

std::string_view leaf_kind_name(LeafKind k) {
  switch (k) {
    case LeafKind::kArray: return "array";
    case LeafKind::kInt: return "int";
    case LeafKind::kFloat: return "float";
    case LeafKind::kBool: return "bool";
    case LeafKind::kComplex: return "complex";
    case LeafKind::kStr: return "str";
    case LeafKind::kBytes: return "bytes";
    case LeafKind::kByteArray: return "bytearray";
    case LeafKind::kCustomLeaf: return "custom leaf";
    case LeafKind::kPickle: return "pickle";
  }
  return "unknown";
}

std::string_view filter_name(Filter f) {
  switch (f) {
    case Filter::kNone: return "none";
    case Filter::kShuffle: return "shuffle";
    case Filter::kFloatSplit: return "floatsplit";
  }
  return "unknown";
}

std::string_view codec_name(Codec c) {
  switch (c) {
    case Codec::kRaw: return "raw";
    case Codec::kZstd: return "zstd";
  }
  return "unknown";
}

const std::string& SparseString::empty_string() {
  static const std::string empty;
  return empty;
}

Box Box::All(const Shape& shape) { return Box{Shape(shape.size(), 0), shape}; }

Shape Box::shape() const {
  Shape s(begin.size());
  for (size_t d = 0; d < s.size(); ++d) s[d] = end[d] > begin[d] ? end[d] - begin[d] : 0;
  return s;
}

uint64_t Box::num_elements() const {
  uint64_t n = 1;
  for (size_t d = 0; d < begin.size(); ++d) n *= end[d] > begin[d] ? end[d] - begin[d] : 0;
  return n;
}

uint64_t Leaf::num_elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

Leaf Leaf::Reuse(uint32_t old_leaf) {
  Leaf l;
  auto in = std::make_shared<LeafInput>();
  in->reuse = old_leaf;
  l.input = std::move(in);
  return l;
}

uint64_t Leaf::memory_bytes() const { return jtree::memory_bytes(dtype, num_elements()); }

uint64_t Tree::chunk_count(const Leaf& leaf) {
  if (leaf.storage != Storage::kChunked) return 0;
  return format::grid_chunk_count(leaf.shape, leaf.chunk_shape).value_or(0);
}

namespace {

bool is_container(NodeKind k) {
  return k == NodeKind::kDict || k == NodeKind::kOrderedDict || k == NodeKind::kList ||
         k == NodeKind::kTuple || k == NodeKind::kNamedTuple || k == NodeKind::kCustom;
}

bool is_mapping(NodeKind k) {
  return k == NodeKind::kDict || k == NodeKind::kOrderedDict || k == NodeKind::kNamedTuple;
}

}  // namespace

Status Tree::Finalize(uint32_t max_depth) {
  const size_t n = nodes.size();
  if (n == 0) return Status::InvalidArgument("tree has no root node");
  if (n > UINT32_MAX - 1) return Status::InvalidArgument("tree has too many nodes");
  subtree_end_.assign(n, 0);
  parent_.assign(n, 0);
  position_.assign(n, 0);
  leaf_node_.assign(leaves.size(), UINT32_MAX);

  struct Open {
    uint32_t node;
    uint32_t remaining;
  };
  std::vector<Open> stack;
  std::vector<uint32_t> kids_scratch;
  std::vector<uint32_t> keyed_containers;  // in node order
  auto fail = [&](uint32_t i, const std::string& what) {
    // Paths of not-yet-finalized trees: build from the parent links computed so far.
    std::string p;
    std::vector<uint32_t> chain;
    for (uint32_t x = i; x != 0; x = parent_[x]) chain.push_back(x);
    for (size_t k = chain.size(); k-- > 0;) {
      append_path_component(p, nodes[chain[k]].key, position_[chain[k]], k + 1 == chain.size());
    }
    return Status::InvalidArgument("node " + std::to_string(i) + " (path '" + p + "'): " + what);
  };

  for (uint32_t i = 0; i < n; ++i) {
    if (i > 0 && stack.empty()) {
      return Status::InvalidArgument("tree has " + std::to_string(n - i) +
                                     " nodes after the root's subtree ends");
    }
    const Node& node = nodes[i];
    if (i > 0) {
      Open& top = stack.back();
      parent_[i] = top.node;
      position_[i] = nodes[top.node].num_children - top.remaining;
      --top.remaining;
      const NodeKind pk = nodes[top.node].kind;
      if (is_mapping(pk) && node.key.kind == Key::Kind::kNone) {
        return fail(i, "child of a " + std::string(node_kind_name(pk)) + " without a key");
      }
      if ((pk == NodeKind::kList || pk == NodeKind::kTuple) && node.key.kind != Key::Kind::kNone) {
        return fail(i, "child of a " + std::string(node_kind_name(pk)) + " with a key");
      }
      if (pk == NodeKind::kNamedTuple && node.key.kind != Key::Kind::kStr) {
        return fail(i, "namedtuple field without a string name");
      }
    } else if (node.key.kind != Key::Kind::kNone) {
      return fail(i, "the root has a key");
    }
    switch (node.kind) {
      case NodeKind::kLeaf:
        if (node.leaf >= leaves.size()) {
          return fail(i, "refers to leaf " + std::to_string(node.leaf) + " of " +
                             std::to_string(leaves.size()));
        }
        if (leaf_node_[node.leaf] == UINT32_MAX) leaf_node_[node.leaf] = i;
        [[fallthrough]];
      case NodeKind::kNone:
        if (node.num_children != 0) return fail(i, "a leaf or None node with children");
        break;
      default:
        if (!is_container(node.kind)) {
          return fail(i, "unknown node kind " + std::to_string(static_cast<int>(node.kind)));
        }
        if ((node.kind == NodeKind::kNamedTuple || node.kind == NodeKind::kCustom) &&
            node.type_name.empty()) {
          return fail(i, std::string(node_kind_name(node.kind)) + " without a type name");
        }
        break;
    }
    if (node.kind != NodeKind::kCustom && !node.aux_data.empty()) {
      return fail(i, "aux data on a node that is not custom");
    }
    if (node.kind != NodeKind::kNamedTuple && node.kind != NodeKind::kCustom &&
        !node.type_name.empty()) {
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
        return fail(i, "nesting deeper than " + std::to_string(max_depth));
      }
      stack.push_back({i, node.num_children});
    } else {
      subtree_end_[i] = i + 1;
    }
    while (!stack.empty() && stack.back().remaining == 0) {
      subtree_end_[stack.back().node] = i + 1;
      stack.pop_back();
    }
  }
  if (!stack.empty()) {
    return Status::InvalidArgument("tree ends inside node " + std::to_string(stack.back().node) +
                                   " (" + std::to_string(stack.back().remaining) +
                                   " children missing)");
  }
  for (size_t l = 0; l < leaves.size(); ++l) {
    if (leaf_node_[l] == UINT32_MAX) {
      return Status::InvalidArgument("leaf " + std::to_string(l) + " is not referenced by any node");
    }
  }
  // Keys unique within each keyed container; Custom children all keyed or all keyless.
  UniqueKeyChecker checker;
  for (uint32_t i : keyed_containers) {
    const NodeKind k = nodes[i].kind;
    kids_scratch.clear();
    for (uint32_t c = i + 1; c < subtree_end_[i]; c = subtree_end_[c]) kids_scratch.push_back(c);
    if (k == NodeKind::kCustom) {
      bool keyed = nodes[kids_scratch[0]].key.kind != Key::Kind::kNone;
      for (uint32_t c : kids_scratch) {
        if ((nodes[c].key.kind != Key::Kind::kNone) != keyed) {
          return fail(c, "custom node mixes keyed and keyless children");
        }
      }
      if (!keyed) continue;
    }
    if (!checker.unique(nodes, kids_scratch)) return fail(i, "duplicate keys");
  }
  return Status::OK();
}

std::vector<uint32_t> Tree::children(uint32_t node) const {
  std::vector<uint32_t> out;
  out.reserve(nodes[node].num_children);
  for (uint32_t c = node + 1; c < subtree_end_[node]; c = subtree_end_[c]) out.push_back(c);
  return out;
}

std::string Tree::path(uint32_t node) const {
  std::vector<uint32_t> chain;
  for (uint32_t x = node; x != 0; x = parent_[x]) chain.push_back(x);
  std::string p;
  for (size_t k = chain.size(); k-- > 0;) {
    // The position, not a count of the siblings before: paths of every leaf of a list of a
    // million stay linear in total.
    append_path_component(p, nodes[chain[k]].key, position_[chain[k]], k + 1 == chain.size());
  }
  return p;
}

Result<uint32_t> Tree::find(std::string_view path_str) const {
  JTREE_ASSIGN_OR_RETURN(std::vector<std::string> parts, split_path(path_str));
  uint32_t cur = 0;
  std::string walked;
  for (const std::string& part : parts) {
    const Node& n = nodes[cur];
    std::optional<uint32_t> found;
    int64_t as_int = 0;
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), as_int);
    bool is_int = ec == std::errc() && ptr == part.data() + part.size();
    uint32_t pos = 0;
    for (uint32_t c = cur + 1; c < subtree_end_[cur]; c = subtree_end_[c], ++pos) {
      const Key& k = nodes[c].key;
      if ((k.kind == Key::Kind::kStr && k.str == part) ||
          (k.kind == Key::Kind::kInt && is_int && k.i == as_int) ||
          (k.kind == Key::Kind::kNone && is_int && as_int >= 0 &&
           static_cast<uint64_t>(as_int) == pos)) {
        if (k.kind == Key::Kind::kStr || !found) found = c;  // a str key beats an int key
        if (k.kind == Key::Kind::kStr) break;
      }
    }
    if (!found) {
      std::string where = walked.empty() ? "the root" : "'" + walked + "'";
      if (n.num_children == 0) {
        return Status::NotFound("key path '" + std::string(path_str) + "': " + where + " is a " +
                                std::string(node_kind_name(n.kind)) + ", it has no '" + part +
                                "'");
      }
      return Status::NotFound("key path '" + std::string(path_str) + "': no '" + part + "' in " +
                              where);
    }
    cur = *found;
    walked = path(cur);
  }
  return cur;
}

}  // namespace jtree
