#include "jtree/tree.h"

#include <algorithm>
#include <string>

#include "codec/plane_codec.h"
#include "format/chunk_grid.h"
#include "tree/structure.h"
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
  if (c == Codec::kRaw) return "raw";
  const codec::PlaneCodec* pc = codec::find_plane_codec(c);
  return pc ? pc->name() : "unknown";
}

const std::string& SparseString::empty_string() {
  static const std::string empty;
  return empty;
}

Box Box::all(const Shape& shape) { return Box{Shape(shape.size(), 0), shape}; }

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

Leaf Leaf::reused(uint32_t old_leaf) {
  Leaf l;
  auto in = std::make_shared<LeafInput>();
  in->reuse = old_leaf;
  l.input = std::move(in);
  return l;
}

uint64_t Leaf::memory_bytes() const { return jtree::memory_bytes(dtype, num_elements()); }

uint64_t Tree::chunk_count(const Leaf& leaf) {
  if (leaf.storage != Storage::kChunked) return 0;
  if (!leaf.chunk_bounds.empty()) {
    auto ends = format::split_chunk_bounds(leaf.shape, leaf.chunk_bounds);
    return ends ? format::rectilinear_chunk_count(*ends).value_or(0) : 0;
  }
  return format::grid_chunk_count(leaf.shape, leaf.chunk_shape).value_or(0);
}

std::vector<Shape> Tree::chunk_ends(const Leaf& leaf) {
  if (leaf.storage != Storage::kChunked || leaf.chunk_bounds.empty()) return {};
  auto ends = format::split_chunk_bounds(leaf.shape, leaf.chunk_bounds);
  return ends ? std::move(*ends) : std::vector<Shape>{};
}

namespace {

// A Tree's nodes as check_structure() and the navigation helpers see them.
struct TreeNodes {
  const std::vector<Node>& nodes;
  size_t size() const { return nodes.size(); }
  NodeShape shape(uint32_t i) const { return NodeShape::of(nodes[i].view()); }
  KeyView key(uint32_t i) const { return nodes[i].key.view(); }
};

}  // namespace

Status Tree::finalize(uint32_t max_depth) {
  return check_structure(TreeNodes{nodes}, leaves.size(), max_depth, nav_);
}

std::vector<uint32_t> Tree::children(uint32_t node) const {
  return child_nodes(nav_, node, nodes[node].num_children);
}

std::string Tree::path(uint32_t node) const { return node_path(TreeNodes{nodes}, nav_, node); }

Result<uint32_t> Tree::find(std::string_view path_str) const {
  return find_node(TreeNodes{nodes}, nav_, path_str);
}

}  // namespace jtree
