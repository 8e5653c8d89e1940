// jtree/tree.h — the in-memory tree: what a .jtree file's header describes.
//
// A Tree is a preorder list of nodes (nodes[0] is the root; a container's children follow it,
// each child's subtree complete before the next child) plus a table of leaves that Leaf nodes
// refer to. Two Leaf nodes may refer to the same leaf: tied weights are stored once.
//
// The same type serves both directions:
//  - Reader::tree() returns the tree read from a file (leaf payload specs, inline data);
//  - the writer takes a Tree whose leaves also say where their data comes from (`source`).
// Build one by hand, through TreeBuilder, or through the bindings.
//
// Thread safety: a Tree is a value. Const methods are safe from many threads once finalize()
// has returned; mutating a Tree requires calling finalize() again before navigating it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jtree/export.h"
#include "jtree/dtype.h"
#include "jtree/status.h"

namespace jtree {

enum class NodeKind : uint8_t {
  kDict = 1,
  kList = 2,
  kTuple = 3,
  kNamedTuple = 4,
  kOrderedDict = 5,
  kNone = 6,
  kCustom = 7,
  kLeaf = 8,
};

enum class LeafKind : uint8_t {
  kArray = 1,
  kInt = 2,
  kFloat = 3,
  kBool = 4,
  kComplex = 5,
  kStr = 6,
  kBytes = 7,
  kByteArray = 8,
  kCustomLeaf = 9,
  kPickle = 10,
};

/// Where a leaf's payload lives in the file.
enum class Storage : uint8_t { kNone = 0, kInline = 1, kChunked = 2 };

/// The per-leaf filter applied to each chunk before compression (see spec/FORMAT.md).
enum class Filter : uint8_t { kNone = 0, kShuffle = 1, kFloatSplit = 2 };

/// The per-leaf compressor.
enum class Codec : uint8_t { kRaw = 0, kZstd = 1 };

JTREE_API std::string_view node_kind_name(NodeKind k);
JTREE_API std::string_view leaf_kind_name(LeafKind k);
JTREE_API std::string_view filter_name(Filter f);
JTREE_API std::string_view codec_name(Codec c);

/// Leaf flag bit 0: the array was a scalar of its dtype (a NumPy scalar), not a 0-d array.
inline constexpr uint32_t kLeafFlagScalar = 1u << 0;

using Shape = std::vector<uint64_t>;

/// A string that is empty in almost every node or leaf (type names, aux data, big integers):
/// one pointer when empty, its bytes out of line otherwise, so that trees of millions of
/// nodes do not pay 32 bytes per such field. Reads like a `const std::string&`; assign a
/// std::string to set it.
class JTREE_API SparseString {
 public:
  SparseString() = default;
  SparseString(std::string s) { assign(std::move(s)); }  // NOLINT: implicit, like std::string
  SparseString(const char* s) : SparseString(std::string(s)) {}  // NOLINT
  SparseString(const SparseString& o) { assign(o.str()); }
  SparseString(SparseString&&) noexcept = default;
  SparseString& operator=(const SparseString& o) {
    if (this != &o) assign(o.str());
    return *this;
  }
  SparseString& operator=(SparseString&&) noexcept = default;

  /// The bytes (a shared empty string when unset).
  const std::string& str() const { return p_ ? *p_ : empty_string(); }
  operator const std::string&() const { return str(); }  // NOLINT
  operator std::string_view() const { return str(); }    // NOLINT
  bool empty() const { return !p_; }
  size_t size() const { return p_ ? p_->size() : 0; }
  const char* data() const { return str().data(); }
  void clear() { p_.reset(); }

  friend bool operator==(const SparseString& a, const SparseString& b) {
    return a.str() == b.str();
  }
  friend bool operator==(const SparseString& a, const std::string& b) { return a.str() == b; }
  friend bool operator==(const SparseString& a, std::string_view b) { return a.str() == b; }
  friend bool operator==(const SparseString& a, const char* b) { return a.str() == b; }
  friend std::string operator+(const std::string& a, const SparseString& b) {
    return a + b.str();
  }
  friend std::string operator+(const char* a, const SparseString& b) { return a + b.str(); }
  friend std::string operator+(const SparseString& a, const std::string& b) {
    return a.str() + b;
  }
  friend std::string operator+(const SparseString& a, const char* b) { return a.str() + b; }

 private:
  void assign(std::string s) {
    if (s.empty()) p_.reset();
    else p_ = std::make_unique<std::string>(std::move(s));
  }
  static const std::string& empty_string();
  std::unique_ptr<std::string> p_;  // null when empty
};

struct KeyView;

/// A node's key within its parent.
struct JTREE_API Key {
  enum class Kind : uint8_t { kNone = 0, kStr = 1, kInt = 2 };
  Kind kind = Kind::kNone;
  std::string str;  ///< kStr
  int64_t i = 0;    ///< kInt

  static Key string(std::string s) { return Key{Kind::kStr, std::move(s), 0}; }
  static Key integer(int64_t v) { return Key{Kind::kInt, {}, v}; }
  bool operator==(const Key&) const = default;
  KeyView view() const;
};

/// A key without its own copy of the string (valid while what it points into lives).
struct JTREE_API KeyView {
  Key::Kind kind = Key::Kind::kNone;
  std::string_view str;  ///< kStr
  int64_t i = 0;         ///< kInt

  bool operator==(const KeyView&) const = default;
};
inline KeyView Key::view() const { return KeyView{kind, str, i}; }

/// A hyper-rectangle [begin, end) of an array, one pair per dimension.
struct JTREE_API Box {
  std::vector<uint64_t> begin;
  std::vector<uint64_t> end;

  /// The whole of an array of `shape`.
  static Box all(const Shape& shape);
  Shape shape() const;
  uint64_t num_elements() const;
};

/// Host memory that the writer reads an array leaf's elements from.
struct JTREE_API ArrayView {
  ArrayView() = default;
  /// A view of `data`; `strides` in bytes (empty: C-contiguous).
  explicit ArrayView(const void* data_, std::vector<int64_t> strides_ = {}, bool byteswap_ = false)
      : data(static_cast<const std::byte*>(data_)), strides(std::move(strides_)),
        byteswap(byteswap_) {}

  const std::byte* data = nullptr;  ///< address of element [0, ..., 0]
  /// Byte strides per dimension (may be negative or zero). Empty: C-contiguous.
  std::vector<int64_t> strides;
  /// Elements are stored with the opposite byte order (big-endian input): swapped while read.
  bool byteswap = false;
};

/// Fills `dst` (C-order, memory layout of the leaf's dtype) with the elements of `box`.
/// For data that is not in host memory (device arrays, generated data): the writer calls it
/// once per chunk, from pool threads, so it must be thread-safe.
using FillFn = std::function<Status(const Box& box, std::span<std::byte> dst)>;

/// Per-leaf write options; unset fields take WriteOptions' defaults.
struct JTREE_API LeafOptions {
  std::optional<Codec> codec;
  std::optional<int> level;              ///< zstd level (negative levels are the fast ones)
  std::optional<Filter> filter;          ///< default: FloatSplit for floats, Shuffle for wider ints
  Shape chunk_shape;                     ///< empty: derived from target_chunk_bytes
  std::optional<uint64_t> target_chunk_bytes;
};

/// One shard of a sharded array held by this process: its box in the global array and its data
/// (C-order over the box unless the view has strides).
struct JTREE_API Shard {
  Box box;
  ArrayView view;
};

/// What the writer reads a leaf's data from (write side only; null in trees read from files).
struct JTREE_API LeafInput {
  ArrayView source;               ///< array data in host memory, or
  FillFn fill;                    ///< a producer of array data
  std::optional<uint32_t> reuse;  ///< append: keep leaf #reuse of the file being appended to
  LeafOptions options;
  /// Sharded arrays: the shape of one shard of the sharding (the same in every process). The
  /// chunk grid is cut to divide it, so that every chunk lies inside one shard.
  Shape shard_shape;
  /// Sharded arrays in a multi-process save: the boxes of ALL blocks of the array, of every
  /// process (the same list in every process). When set, the planner cuts the chunk grid at
  /// every block edge (a rectilinear grid where a regular one would need tiny chunks), so that
  /// every chunk lies inside one block; shard_shape is then ignored for the grid.
  std::vector<Box> blocks;
  /// The parts of the array this process holds. nullopt: all of it (from source or fill; in a
  /// multi-process save only process 0 writes such leaves); an empty list: none of it; else
  /// these shards, whose boxes must be unions of whole chunks (true when they follow
  /// `shard_shape`).
  std::optional<std::vector<Shard>> shards;
};

/// A leaf: a scalar value, or a payload (array elements, UTF-8 text, bytes) with its spec.
struct JTREE_API Leaf {
  LeafKind kind = LeafKind::kArray;
  uint32_t flags = 0;

  // Payload spec (kArray; kStr/kBytes/kByteArray/kCustomLeaf/kPickle as UInt8 of shape [n]).
  DType dtype = DType::kInvalid;
  Storage storage = Storage::kNone;
  Filter filter = Filter::kNone;
  Codec codec = Codec::kRaw;
  int8_t level = 0;

  // Scalar leaves.
  bool bool_value = false;
  int64_t int_value = 0;  ///< kInt (when big_int is empty)
  double real = 0;        ///< kFloat, kComplex
  double imag = 0;        ///< kComplex

  Shape shape;
  Shape chunk_shape;      ///< kChunked, regular grid (empty when chunk_bounds is used)
  /// kChunked, rectilinear grid (format version 2; chunk_shape then empty): for each dimension
  /// in turn its chunks' end positions, strictly increasing and ending at that dimension's
  /// extent, concatenated (spec/FORMAT.md section 7).
  Shape chunk_bounds;
  /// kInline: the stored payload bytes (4-bit types packed). On the write side, also the
  /// payload of text/bytes leaves whatever their size (the writer decides where it goes).
  std::string inline_data;
  SparseString type_name;  ///< kCustomLeaf: the registered name
  SparseString big_int;    ///< kInt beyond int64: two's complement little-endian bytes

  /// Read side: index of this leaf's first chunk in the index (set by the reader).
  uint64_t first_chunk = 0;
  /// Write side: where the data comes from (TreeBuilder sets it).
  std::shared_ptr<const LeafInput> input;

  /// A leaf that keeps leaf #old_leaf of the file being appended to.
  static Leaf reused(uint32_t old_leaf);
  /// The reused leaf number, if this leaf is one (append).
  std::optional<uint32_t> reuse() const { return input ? input->reuse : std::nullopt; }

  bool is_payload() const { return storage != Storage::kNone; }
  /// Elements of the payload (product of shape; 1 for rank 0).
  uint64_t num_elements() const;
  /// Bytes of the payload in memory buffers (the size a full read writes).
  uint64_t memory_bytes() const;
};

/// A node without copies of its strings: what Reader::node() returns, read in place from the
/// file's header (valid while the Reader lives), or Node::view() of a Tree's node.
struct JTREE_API NodeView {
  KeyView key;
  NodeKind kind = NodeKind::kNone;
  uint32_t num_children = 0;
  uint32_t leaf = 0;
  std::string_view type_name;
  std::string_view aux_data;
};

/// A node of the tree.
struct JTREE_API Node {
  Key key;                    ///< this node's key in its parent (none for list/tuple items)
  NodeKind kind = NodeKind::kNone;
  uint32_t num_children = 0;  ///< containers only
  uint32_t leaf = 0;          ///< kLeaf: index into Tree::leaves
  SparseString type_name;     ///< kNamedTuple: type name; kCustom: registered name
  SparseString aux_data;      ///< kCustom: serialized aux data

  NodeView view() const {
    return NodeView{key.view(), kind, num_children, leaf, type_name.str(), aux_data.str()};
  }
};

/// Where each node sits in its tree: computed once by Tree::finalize (or by the Reader from a
/// file's header) after the structure has been checked.
struct JTREE_API TreeNavigation {
  std::vector<uint32_t> subtree_end;  ///< one past the last node of each node's subtree
  std::vector<uint32_t> parent;       ///< the root's parent is itself
  std::vector<uint32_t> position;     ///< index of each node among its parent's children
  std::vector<uint32_t> leaf_node;    ///< the first Leaf node that refers to each leaf
};

/// A tree: nodes in preorder, leaves, user metadata.
class JTREE_API Tree {
 public:
  std::vector<Node> nodes;
  std::vector<Leaf> leaves;
  std::vector<std::pair<std::string, std::string>> metadata;
  /// The keys of the metadata entries whose values are UTF-8 text (given as text, returned
  /// as text by readers that have a text type; format version 3); the others are bytes.
  std::vector<std::string> metadata_text_keys;

  /// Checks the structure (child counts, keys, leaf references, depth) and computes the
  /// navigation tables. Must be called after building or mutating and before navigating.
  /// Errors: InvalidArgument naming the node's path; ResourceExhausted for nesting deeper
  /// than `max_depth` (a limit, as readers' Limits::max_depth: FORMAT.md 12.1).
  Status finalize(uint32_t max_depth = 1024);

  /// One past the last node of `node`'s subtree (its next sibling, if any).
  uint32_t subtree_end(uint32_t node) const { return nav_.subtree_end[node]; }
  /// The parent of `node`; the root's parent is itself.
  uint32_t parent(uint32_t node) const { return nav_.parent[node]; }
  /// Children of a container, in order.
  std::vector<uint32_t> children(uint32_t node) const;
  /// The first Leaf node that refers to `leaf` (for paths and messages).
  uint32_t leaf_node(uint32_t leaf) const { return nav_.leaf_node[leaf]; }

  /// The path of a node: keys from the root joined by '/', list items by position,
  /// e.g. "params/layers/0/w"; "" for the root. '/' and '\' inside keys are escaped by '\'.
  std::string path(uint32_t node) const;
  /// The path of a leaf's first node.
  std::string leaf_path(uint32_t leaf) const { return path(leaf_node(leaf)); }
  /// The node at `path` (syntax of path()), or NotFound naming the first missing component.
  Result<uint32_t> find(std::string_view path) const;

  /// Number of chunks of each chunked leaf derived from shape and chunk_shape (0 otherwise).
  static uint64_t chunk_count(const Leaf& leaf);

  /// A rectilinear grid's chunk ends, one list per dimension (dimension d's chunks end at
  /// chunk_ends(leaf)[d][0], [1], ..., the last being shape[d]): Leaf::chunk_bounds split by
  /// the file format's rule (spec/FORMAT.md section 7). Empty for a regular grid
  /// (chunk_shape), a leaf that is not chunked, and bounds that do not split (a Reader
  /// validated them when it opened the file).
  static std::vector<Shape> chunk_ends(const Leaf& leaf);

 private:
  TreeNavigation nav_;
};

/// Builds a Tree in preorder with a stack of open containers.
///
///   TreeBuilder b;
///   b.dict();
///     b.key("params").dict();
///       b.key("w").array(DType::kFloat32, {1024, 1024}, ArrayView{ptr});
///     b.end();
///     b.key("step").int_value(1000);
///   b.end();
///   Result<Tree> tree = std::move(b).finish();
///
/// Misuse (a key outside a dict, end() without an open container, a missing key) is recorded
/// and reported by finish() as InvalidArgument.
class JTREE_API TreeBuilder {
 public:
  TreeBuilder& key(std::string k);
  TreeBuilder& key(int64_t k);

  TreeBuilder& dict();
  TreeBuilder& ordered_dict();
  TreeBuilder& list();
  TreeBuilder& tuple();
  TreeBuilder& named_tuple(std::string type_name);
  TreeBuilder& custom(std::string registered_name, std::string aux_data);
  TreeBuilder& end();

  TreeBuilder& none();
  TreeBuilder& array(DType dtype, Shape shape, ArrayView source, LeafOptions options = {});
  TreeBuilder& array(DType dtype, Shape shape, FillFn fill, LeafOptions options = {});
  TreeBuilder& int_value(int64_t v);
  TreeBuilder& float_value(double v);
  TreeBuilder& bool_value(bool v);
  TreeBuilder& complex_value(double re, double im);
  TreeBuilder& str(std::string utf8);
  TreeBuilder& bytes(std::string data);
  /// Adds any leaf; returns its leaf index through `leaf_id` when non-null.
  TreeBuilder& leaf(Leaf leaf, uint32_t* leaf_id = nullptr);
  /// Adds another node referring to an existing leaf (tied weights).
  TreeBuilder& tied(uint32_t leaf_id);
  TreeBuilder& metadata(std::string key, std::string value);
  /// A metadata entry whose value is UTF-8 text (checked when the tree is written).
  TreeBuilder& text_metadata(std::string key, std::string utf8);

  /// The finished, finalized tree.
  Result<Tree> finish() &&;

 private:
  void add_node(Node n);
  Tree tree_;
  std::vector<uint32_t> open_;  // indices of open containers
  std::optional<Key> pending_key_;
  std::string error_;
};

}  // namespace jtree
