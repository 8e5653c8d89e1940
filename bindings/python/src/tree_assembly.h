// The one native walk that turns a file's nodes into Python containers: load_pytreedef's
// structure (spec_tree.cc: a LeafSpec per leaf) and a whole plain load (plain_load.cc: the
// loaded value per leaf). Dicts, lists, tuples and None are made here; every other container
// (named tuples, OrderedDict, custom nodes) is made by Python's `container` callback, which
// owns those rules (the registry, namedtuple classes, strict=).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "common.h"
#include "node_selection.h"

namespace jtpy {

namespace assembly_detail {

struct Frame {
  jtree::NodeView node;
  nb::object key;         // this node's key in its parent (None for a position)
  uint32_t position = 0;  // its position among its parent's children
  uint32_t done = 0;      // children handed up so far
  nb::object values;      // kDict: the dict; else the list of values
  nb::object keys;        // the children's keys, for containers built by Python
};

inline bool native(jtree::NodeKind k) {
  return k == jtree::NodeKind::kDict || k == jtree::NodeKind::kList ||
         k == jtree::NodeKind::kTuple;
}

// The finished container of frame `f`, whose ancestors are `stack`; `prefix` is the key path
// parts of stack[0] (the walk's first node: empty for the file's root).
inline nb::object finish(const Frame& f, const std::vector<Frame>& stack, nb::handle container,
                         nb::handle prefix) {
  switch (f.node.kind) {
    case jtree::NodeKind::kDict:
    case jtree::NodeKind::kList:
      return f.values;
    case jtree::NodeKind::kTuple: {
      PyObject* t = PyList_AsTuple(f.values.ptr());
      if (t == nullptr) throw nb::python_error();
      return nb::steal(t);
    }
    default:
      break;
  }
  // Its key path (for an error about it): the walk's first node's path, then each node's key,
  // or its position in its parent, from that node's child down.
  nb::list parts;
  for (nb::handle p : prefix) parts.append(p);
  auto add = [&](const Frame& g) {
    parts.append(g.key.is_none() ? nb::object(nb::int_(g.position)) : g.key);
  };
  for (size_t d = 1; d < stack.size(); ++d) add(stack[d]);
  if (!stack.empty()) add(f);
  const bool named = f.node.kind == jtree::NodeKind::kNamedTuple ||
                     f.node.kind == jtree::NodeKind::kCustom;
  nb::object type_name = named ? nb::object(decode_utf8(f.node.type_name)) : nb::none();
  nb::object aux = f.node.kind == jtree::NodeKind::kCustom
                       ? nb::object(nb::bytes(f.node.aux_data.data(), f.node.aux_data.size()))
                       : nb::none();
  return container(static_cast<int>(f.node.kind), type_name, aux, f.keys, f.values,
                   nb::tuple(parts));
}

}  // namespace assembly_detail

/// The tree of `reader` below node `first` (0: the whole file) in one preorder pass:
/// `leaf_value(leaf index)` gives each leaf's Python value (the caller keeps one object per
/// leaf for tied leaves), None nodes are None, and every container that is not a dict, list or
/// tuple is `container(kind, type_name, aux, keys, values, key_path_parts)`, whose parts begin
/// with `prefix`, the key path parts of node `first` (empty for the root). With `selection`
/// (made for the same `first`), what a keys= selection keeps (node_selection.h): leaves it
/// does not load are None, dropped nodes are left out of dicts and None elsewhere, and a
/// dropped top node is {} (a dict or OrderedDict) or None.
template <class LeafValue>
nb::object assemble_tree(const jtree::Reader& r, nb::handle container, LeafValue&& leaf_value,
                         uint32_t first = 0, nb::handle prefix = nb::tuple(),
                         const NodeSelection* selection = nullptr) {
  using assembly_detail::Frame;
  if (first >= r.num_nodes()) throw_value_error("assemble_tree: no such node");
  std::vector<Frame> stack;
  nb::object result = nb::none();
  // (A node's subtree is the nodes after it in preorder until its frame is finished.)
  for (uint32_t i = first; i < r.num_nodes(); ++i) {
    const jtree::NodeView n = r.node(i);
    nb::object key = key_to_py(n.key);
    const uint32_t position = stack.empty() ? 0 : stack.back().done;
    const uint8_t state =
        selection != nullptr ? selection->state[i] : static_cast<uint8_t>(NodeSelection::kKeep);
    bool dropped = false;
    nb::object value;
    if (state == NodeSelection::kDrop) {
      dropped = true;
      value = nb::none();
      if (n.kind != jtree::NodeKind::kLeaf && n.kind != jtree::NodeKind::kNone) {
        i = selection->end[i] - 1;  // (its subtree is dropped with it)
      }
      if (stack.empty()) {  // the root
        const bool dict = n.kind == jtree::NodeKind::kDict ||
                          n.kind == jtree::NodeKind::kOrderedDict;
        return dict ? nb::object(nb::dict()) : nb::none();
      }
    } else if (state == NodeSelection::kNone) {
      value = nb::none();
    } else if (n.kind == jtree::NodeKind::kLeaf) {
      value = leaf_value(n.leaf);
    } else if (n.kind == jtree::NodeKind::kNone) {
      value = nb::none();
    } else {
      Frame f{n, key, position, 0, nb::object(), nb::object()};
      f.values = n.kind == jtree::NodeKind::kDict ? nb::object(nb::dict()) : nb::object(nb::list());
      if (!assembly_detail::native(n.kind)) f.keys = nb::list();
      if (n.num_children > 0) {
        stack.push_back(std::move(f));
        continue;
      }
      value = assembly_detail::finish(f, stack, container, prefix);
    }
    // Hand the value up, finishing every container it completes.
    while (!stack.empty()) {
      Frame& top = stack.back();
      // (A dropped child is left out of a dict, and is None in any other container.)
      const bool skip = dropped && (top.node.kind == jtree::NodeKind::kDict ||
                                    top.node.kind == jtree::NodeKind::kOrderedDict);
      dropped = false;
      if (!skip) {
        const int err = top.node.kind == jtree::NodeKind::kDict
                            ? PyDict_SetItem(top.values.ptr(), key.ptr(), value.ptr())
                            : PyList_Append(top.values.ptr(), value.ptr());
        if (err != 0 || (top.keys.is_valid() && PyList_Append(top.keys.ptr(), key.ptr()) != 0)) {
          throw nb::python_error();
        }
      }
      if (++top.done < top.node.num_children) break;
      Frame f = std::move(top);
      stack.pop_back();
      value = assembly_detail::finish(f, stack, container, prefix);
      key = f.key;
    }
    if (stack.empty()) {
      result = value;
      break;
    }
  }
  return result;
}

}  // namespace jtpy
