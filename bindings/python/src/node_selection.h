// What a keys= selection keeps of each node of a file, decided in one native pass: the rules
// of the Python loader's walk (python/jtree/_load.py, Loader.plan and Loader.container with a
// KeyPathPatterns), for the native load of a selection (plain_load.cc) and its assembly
// (tree_assembly.h). Same rules, same patterns object (jtree::KeyPathPatterns), so the two
// paths cannot disagree on what is selected.
//
// - a leaf is loaded when a pattern selects its key path; otherwise it is None, or with prune
//   dropped;
// - a None node stays None, with prune only when a pattern selects it;
// - a container no pattern can reach below (KeyPathPatterns::may_select_below) is not looked
//   into: with prune it is dropped, otherwise its structure stays with None leaves;
// - an empty container stays, with prune only when a pattern selects it; with prune, a
//   container whose children are all dropped is dropped;
// - a dropped child is left out of a dict (OrderedDict too) and is None in any other
//   container; a dropped root is {} when it is a dict (or OrderedDict), else None;
// - the patterns that select a leaf, a None node or an empty container have matched (the
//   others are reported as matching nothing, before anything is read).
// Key path components: a string key as it is, an int key or a position in decimal.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "jtree/key_path_pattern.h"
#include "jtree/reader.h"

namespace jtpy {

// The node after the subtree of node `first` (preorder: its descendants follow it).
inline uint32_t subtree_end(const jtree::Reader& r, uint32_t first) {
  uint64_t left = r.node(first).num_children;
  uint32_t j = first + 1;
  for (; left > 0; ++j, --left) left += r.node(j).num_children;
  return j;
}

struct NodeSelection {
  enum State : uint8_t { kKeep = 0, kNone = 1, kDrop = 2 };
  std::vector<uint8_t> state;   // per node: kKeep, kNone (a leaf loaded as None) or kDrop
  std::vector<uint32_t> end;    // per container: the node after its subtree
  std::vector<char> matched;    // per pattern: whether it selected something

  // The selection of the subtree of node `first` (0: the whole file), whose key path is
  // `first_path` (the patterns name the file's key paths; a pattern matched only outside the
  // subtree has matched nothing here).
  NodeSelection(const jtree::Reader& r, const jtree::KeyPathPatterns& patterns, bool prune,
                uint32_t first = 0, std::vector<std::string> first_path = {}) {
    const uint32_t n = r.num_nodes();
    state.assign(n, kKeep);
    end.assign(n, 0);
    matched.assign(patterns.size(), 0);
    struct Frame {
      uint32_t node, count, position;
      bool all_dropped;
    };
    std::vector<Frame> stack;
    std::vector<std::string> path = std::move(first_path);  // the node being decided's
    for (uint32_t i = first; i < n; ++i) {
      const jtree::NodeView v = r.node(i);
      const uint32_t at = i;
      if (!stack.empty()) path.push_back(component(v.key, stack.back().position));
      uint8_t st = kKeep;
      if (v.kind == jtree::NodeKind::kLeaf) {
        st = patterns.selects(path, &matched) ? kKeep : prune ? kDrop : kNone;
      } else if (v.kind == jtree::NodeKind::kNone) {
        st = patterns.selects(path, &matched) || !prune ? kKeep : kDrop;
      } else if (!patterns.may_select_below(path)) {
        st = prune ? kDrop : kKeep;
        i = skip_subtree(r, i, prune);  // (the last node of the subtree)
      } else if (v.num_children == 0) {
        st = patterns.selects(path, &matched) || !prune ? kKeep : kDrop;
        end[i] = i + 1;
      } else {
        stack.push_back({i, v.num_children, 0, true});
        continue;
      }
      state[at] = st;
      // Hand the decision up, finishing every container it completes.
      while (!stack.empty()) {
        path.pop_back();  // (the finished node's component)
        Frame& top = stack.back();
        if (st != kDrop) top.all_dropped = false;
        if (++top.position < top.count) break;
        st = prune && top.all_dropped ? kDrop : kKeep;
        state[top.node] = st;
        end[top.node] = i + 1;
        stack.pop_back();
      }
      if (stack.empty()) break;  // (node `first` decided, its subtree with it)
    }
  }

  bool all_matched() const {
    for (char m : matched) {
      if (!m) return false;
    }
    return true;
  }

 private:
  static std::string component(const jtree::KeyView& key, uint32_t position) {
    switch (key.kind) {
      case jtree::Key::Kind::kStr: return std::string(key.str);
      case jtree::Key::Kind::kInt: return std::to_string(key.i);
      default: return std::to_string(position);
    }
  }

  // Marks the subtree of container `i`, which nothing selects: every node dropped (prune), or
  // its leaves None (its containers are then assembled as any other). Returns its last node.
  uint32_t skip_subtree(const jtree::Reader& r, uint32_t i, bool prune) {
    uint64_t left = r.node(i).num_children;
    uint32_t j = i + 1;
    for (; left > 0; ++j, --left) {
      const jtree::NodeView c = r.node(j);
      left += c.num_children;
      if (prune) {
        state[j] = kDrop;
      } else if (c.kind == jtree::NodeKind::kLeaf) {
        state[j] = kNone;
      }
    }
    end[i] = j;  // (the assembly skips a dropped container's subtree: only its end is needed)
    return j - 1;
  }
};

}  // namespace jtpy
