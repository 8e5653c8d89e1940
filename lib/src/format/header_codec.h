// The header flatbuffer <-> Tree (spec/FORMAT.md, "Header"). Pure functions over bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jtree/options.h"
#include "jtree/status.h"
#include "jtree/tree.h"
#include "tree/structure.h"

namespace jtree::fb {
struct Header;
}  // namespace jtree::fb

namespace jtree::format {

/// Encodes a tree whose leaves are resolved (storage, chunk grid, filter, codec chosen and
/// inline payloads in stored form). Errors: InvalidArgument when the header would exceed the
/// flatbuffer size limit.
Result<std::vector<std::byte>> encode_header(const Tree& tree, std::string_view writer);

/// Decodes a header: flatbuffer verification bounded by `limits`, then conversion of every
/// field with range checks (enum values, string lengths). The tree is not finalized and its
/// leaf specs are not validated: see validate.h. Errors: Corruption, ResourceExhausted.
Result<Tree> decode_header(std::span<const std::byte> bytes, const Limits& limits,
                           std::string* writer);

/// Totals over the leaves of a header decoded by decode_tree.
struct HeaderSummary {
  uint64_t chunks = 0;        ///< chunks the index must list (validate_leaves' result)
  uint64_t inline_bytes = 0;  ///< bytes of inline payloads
  uint64_t raw_bytes = 0;     ///< stored-form bytes of chunked leaves
  /// The lowest format version whose features the leaves use (leaf_min_read_version): the
  /// file's min_read_version must be at least this (spec section 10.1).
  uint16_t min_read_version = 1;
};

/// A header's Tree::finalize error as a reader reports it, prefixed with "header: ": Corruption
/// (a rule of the format broken), except the depth limit's ResourceExhausted, which stays so
/// (a limit: FORMAT.md 12.1).
Status structure_error(const Status& finalize_error);

/// decode_header, then Tree::finalize(limits.max_depth), then validate_leaves, in fewer passes:
/// each leaf's spec is checked right after it is decoded, while it is in the cache, and
/// Leaf::first_chunk is set there. The errors are those of the three in that order (finalize's
/// as structure_error() makes them), whatever the ranges' timing: a leaf that fails is
/// reported by running validate_leaves itself once the tree is finalized.
Result<Tree> decode_tree(std::span<const std::byte> bytes, const Limits& limits,
                         std::string* writer, HeaderSummary* summary);

/// A header that open_header() has verified and validated, read in place: the tree of a file
/// without a Tree's node and leaf structs (a Tree of 100,000 leaves is 24 MB of fresh memory,
/// most of the time an open of such a file would take). Immutable; safe from many threads.
class HeaderView {
 public:
  HeaderView() = default;
  HeaderView(HeaderView&&) noexcept = default;
  HeaderView& operator=(HeaderView&&) noexcept = default;

  size_t num_nodes() const { return shapes_.size(); }
  size_t num_leaves() const { return first_chunk_.size(); }
  /// Node `i` (< num_nodes()), its strings pointing into the header bytes.
  NodeView node(uint32_t i) const;
  /// The key of node `i` alone.
  KeyView key(uint32_t i) const;
  /// Decodes leaf `i` (< num_leaves()) into `out`, first_chunk included.
  void decode_leaf(uint32_t i, Leaf& out) const;
  /// Only what a walk of leaf `i`'s chunk grid reads (kind, flags, dtype, shape, storage,
  /// chunk shape or bounds, filter, codec, level, first_chunk) into `out`; its other fields
  /// are left as they are. For passes over every chunked leaf (validate_index, at every open),
  /// where decode_leaf's strings and inline bytes are work for nothing.
  void decode_grid(uint32_t i, Leaf& out) const;
  /// Leaf::first_chunk of leaf `i`.
  uint64_t first_chunk(uint32_t i) const { return first_chunk_[i]; }
  /// The chunked leaves, in order.
  std::span<const uint32_t> chunked_leaves() const { return chunked_; }
  const TreeNavigation& navigation() const { return nav_; }
  const std::vector<std::pair<std::string, std::string>>& metadata() const { return metadata_; }
  const std::vector<std::string>& metadata_text_keys() const { return metadata_text_keys_; }
  /// The header bytes.
  std::span<const std::byte> bytes() const { return {bytes_.get(), size_}; }
  /// The whole tree as decode_tree() decodes it (finalized, first_chunk set).
  Result<Tree> decode_all() const;

  /// The nodes as check_structure() and the navigation helpers of tree/structure.h see them.
  struct Nodes {
    const HeaderView* view;
    size_t size() const { return view->shapes_.size(); }
    const NodeShape& shape(uint32_t i) const { return view->shapes_[i]; }
    KeyView key(uint32_t i) const { return view->key(i); }
  };
  Nodes nodes() const { return Nodes{this}; }

 private:
  friend Result<HeaderView> open_header(std::unique_ptr<std::byte[]>, size_t, const Limits&,
                                        std::string*, HeaderSummary*);
  std::unique_ptr<std::byte[]> bytes_;
  size_t size_ = 0;
  Limits limits_;
  const fb::Header* root_ = nullptr;
  std::vector<NodeShape> shapes_;  // per node: what the structure rules and walks read
  std::vector<uint64_t> first_chunk_;
  std::vector<uint32_t> chunked_;
  TreeNavigation nav_;
  std::vector<std::pair<std::string, std::string>> metadata_;
  std::vector<std::string> metadata_text_keys_;
};

/// decode_tree's checks without building the Tree: the same verification, the same checks of
/// every node, leaf and of the structure, the same summary, and on failure exactly
/// decode_tree's error (it is run to produce it). `bytes` (`size` bytes, from new[]) is kept.
Result<HeaderView> open_header(std::unique_ptr<std::byte[]> bytes, size_t size,
                               const Limits& limits, std::string* writer,
                               HeaderSummary* summary);

}  // namespace jtree::format
