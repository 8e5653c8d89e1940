#include <string>

#include "jtree/tree.h"

namespace jtree {

TreeBuilder& TreeBuilder::key(std::string k) {
  if (pending_key_ && error_.empty()) error_ = "two keys in a row";
  pending_key_ = Key::string(std::move(k));
  return *this;
}

TreeBuilder& TreeBuilder::key(int64_t k) {
  if (pending_key_ && error_.empty()) error_ = "two keys in a row";
  pending_key_ = Key::integer(k);
  return *this;
}

void TreeBuilder::add_node(Node n) {
  if (!open_.empty()) {
    tree_.nodes[open_.back()].num_children++;
  } else if (!tree_.nodes.empty() && error_.empty()) {
    error_ = "more than one root";
  }
  if (pending_key_) {
    n.key = std::move(*pending_key_);
    pending_key_.reset();
  }
  tree_.nodes.push_back(std::move(n));
}

namespace {
Node container(NodeKind kind, std::string type_name = {}, std::string aux = {}) {
  Node n;
  n.kind = kind;
  n.type_name = std::move(type_name);
  n.aux_data = std::move(aux);
  return n;
}
}  // namespace

TreeBuilder& TreeBuilder::dict() {
  add_node(container(NodeKind::kDict));
  open_.push_back(static_cast<uint32_t>(tree_.nodes.size() - 1));
  return *this;
}
TreeBuilder& TreeBuilder::ordered_dict() {
  add_node(container(NodeKind::kOrderedDict));
  open_.push_back(static_cast<uint32_t>(tree_.nodes.size() - 1));
  return *this;
}
TreeBuilder& TreeBuilder::list() {
  add_node(container(NodeKind::kList));
  open_.push_back(static_cast<uint32_t>(tree_.nodes.size() - 1));
  return *this;
}
TreeBuilder& TreeBuilder::tuple() {
  add_node(container(NodeKind::kTuple));
  open_.push_back(static_cast<uint32_t>(tree_.nodes.size() - 1));
  return *this;
}
TreeBuilder& TreeBuilder::named_tuple(std::string type_name) {
  add_node(container(NodeKind::kNamedTuple, std::move(type_name)));
  open_.push_back(static_cast<uint32_t>(tree_.nodes.size() - 1));
  return *this;
}
TreeBuilder& TreeBuilder::custom(std::string registered_name, std::string aux_data) {
  add_node(container(NodeKind::kCustom, std::move(registered_name), std::move(aux_data)));
  open_.push_back(static_cast<uint32_t>(tree_.nodes.size() - 1));
  return *this;
}

TreeBuilder& TreeBuilder::end() {
  if (open_.empty()) {
    if (error_.empty()) error_ = "end() without an open container";
  } else {
    open_.pop_back();
  }
  if (pending_key_ && error_.empty()) error_ = "a key with no value before end()";
  return *this;
}

TreeBuilder& TreeBuilder::none() {
  add_node(Node{});
  return *this;
}

TreeBuilder& TreeBuilder::leaf(Leaf l, uint32_t* leaf_id) {
  Node n;
  n.kind = NodeKind::kLeaf;
  n.leaf = static_cast<uint32_t>(tree_.leaves.size());
  if (leaf_id) *leaf_id = n.leaf;
  tree_.leaves.push_back(std::move(l));
  add_node(std::move(n));
  return *this;
}

TreeBuilder& TreeBuilder::tied(uint32_t leaf_id) {
  if (leaf_id >= tree_.leaves.size() && error_.empty()) {
    error_ = "tied() to leaf " + std::to_string(leaf_id) + " which does not exist yet";
  }
  Node n;
  n.kind = NodeKind::kLeaf;
  n.leaf = leaf_id;
  add_node(std::move(n));
  return *this;
}

TreeBuilder& TreeBuilder::array(DType dtype, Shape shape, ArrayView source, LeafOptions options) {
  Leaf l;
  l.kind = LeafKind::kArray;
  l.dtype = dtype;
  l.shape = std::move(shape);
  l.storage = Storage::kChunked;  // the writer decides between inline and chunked
  auto in = std::make_shared<LeafInput>();
  in->source = std::move(source);
  in->options = std::move(options);
  l.input = std::move(in);
  return leaf(std::move(l));
}

TreeBuilder& TreeBuilder::array(DType dtype, Shape shape, FillFn fill, LeafOptions options) {
  Leaf l;
  l.kind = LeafKind::kArray;
  l.dtype = dtype;
  l.shape = std::move(shape);
  l.storage = Storage::kChunked;
  auto in = std::make_shared<LeafInput>();
  in->fill = std::move(fill);
  in->options = std::move(options);
  l.input = std::move(in);
  return leaf(std::move(l));
}

namespace {
Leaf scalar(LeafKind kind) {
  Leaf l;
  l.kind = kind;
  l.storage = Storage::kNone;
  return l;
}
Leaf payload(LeafKind kind, std::string data) {
  Leaf l;
  l.kind = kind;
  l.dtype = DType::kUInt8;
  l.shape = {data.size()};
  l.storage = Storage::kInline;  // the writer moves large payloads into chunks
  l.inline_data = std::move(data);
  return l;
}
}  // namespace

TreeBuilder& TreeBuilder::int_value(int64_t v) {
  Leaf l = scalar(LeafKind::kInt);
  l.int_value = v;
  return leaf(std::move(l));
}
TreeBuilder& TreeBuilder::float_value(double v) {
  Leaf l = scalar(LeafKind::kFloat);
  l.real = v;
  return leaf(std::move(l));
}
TreeBuilder& TreeBuilder::bool_value(bool v) {
  Leaf l = scalar(LeafKind::kBool);
  l.bool_value = v;
  return leaf(std::move(l));
}
TreeBuilder& TreeBuilder::complex_value(double re, double im) {
  Leaf l = scalar(LeafKind::kComplex);
  l.real = re;
  l.imag = im;
  return leaf(std::move(l));
}
TreeBuilder& TreeBuilder::str(std::string utf8) {
  return leaf(payload(LeafKind::kStr, std::move(utf8)));
}
TreeBuilder& TreeBuilder::bytes(std::string data) {
  return leaf(payload(LeafKind::kBytes, std::move(data)));
}

TreeBuilder& TreeBuilder::metadata(std::string key, std::string value) {
  tree_.metadata.emplace_back(std::move(key), std::move(value));
  return *this;
}

TreeBuilder& TreeBuilder::text_metadata(std::string key, std::string utf8) {
  tree_.metadata_text_keys.push_back(key);
  return metadata(std::move(key), std::move(utf8));
}

Result<Tree> TreeBuilder::finish() && {
  if (!error_.empty()) return Status::invalid_argument("TreeBuilder: " + error_);
  if (!open_.empty()) {
    return Status::invalid_argument("TreeBuilder: " + std::to_string(open_.size()) +
                                   " containers not closed with end()");
  }
  if (pending_key_) return Status::invalid_argument("TreeBuilder: a key with no value");
  if (tree_.nodes.empty()) return Status::invalid_argument("TreeBuilder: empty tree");
  JTREE_RETURN_IF_ERROR(tree_.finalize());
  return std::move(tree_);
}

}  // namespace jtree
