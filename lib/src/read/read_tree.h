// The tree of an opened file, read in place from its verified header: nodes are views into the
// header bytes, a leaf is decoded the first time it is used, and the whole `Tree` (a struct per
// node and per leaf: tens of MB for a big tree) is built only when something asks for it.
// Everything was checked when the file was opened (format::open_header).
//
// Thread safety: all methods are const and safe from many threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "format/header_codec.h"
#include "jtree/status.h"
#include "jtree/tree.h"

namespace jtree {

class ReadTree {
 public:
  ReadTree();
  explicit ReadTree(format::HeaderView header);
  ReadTree(ReadTree&&) noexcept;
  ReadTree& operator=(ReadTree&&) noexcept;
  ~ReadTree();

  uint32_t num_nodes() const { return static_cast<uint32_t>(header_.num_nodes()); }
  uint32_t num_leaves() const { return static_cast<uint32_t>(header_.num_leaves()); }
  /// Node `i` (< num_nodes()); its strings live as long as this object.
  NodeView node(uint32_t i) const { return header_.node(i); }
  /// Leaf `i` (< num_leaves()), decoded on first use and kept.
  const Leaf& leaf(uint32_t i) const;
  /// Leaf `i` decoded into `out`, not kept (for passes over many leaves).
  void decode_leaf(uint32_t i, Leaf& out) const { header_.decode_leaf(i, out); }
  /// Only what a walk of leaf `i`'s chunk grid reads (format::HeaderView::decode_grid).
  void decode_grid(uint32_t i, Leaf& out) const { header_.decode_grid(i, out); }
  uint64_t first_chunk(uint32_t leaf) const { return header_.first_chunk(leaf); }
  /// The chunked leaves, in order.
  std::span<const uint32_t> chunked_leaves() const { return header_.chunked_leaves(); }
  const TreeNavigation& navigation() const { return header_.navigation(); }
  const std::vector<std::string>& metadata_text_keys() const {
    return header_.metadata_text_keys();
  }
  const std::vector<std::pair<std::string, std::string>>& metadata() const {
    return header_.metadata();
  }

  /// Tree::children, Tree::path, Tree::leaf_path and Tree::find over the header.
  std::vector<uint32_t> children(uint32_t node) const;
  std::string path(uint32_t node) const;
  std::string leaf_path(uint32_t leaf) const { return path(navigation().leaf_node[leaf]); }
  Result<uint32_t> find(std::string_view path) const;

  /// The whole tree, built on the first call.
  const Tree& tree() const;

 private:
  struct Lazy;
  format::HeaderView header_;
  std::unique_ptr<Lazy> lazy_;
};

}  // namespace jtree
