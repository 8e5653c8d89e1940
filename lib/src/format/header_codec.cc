#include "format/header_codec.h"

#include <flatbuffers/flatbuffers.h>

#include <cmath>

#include "format/aligned_bytes.h"
#include "jtree_generated.h"
#include "util/endian.h"
#include "util/thread_pool.h"

namespace jtree::format {
namespace {

// The file's enum codes are the public enums' values.
static_assert(static_cast<int>(fb::NodeKind::Leaf) == static_cast<int>(NodeKind::kLeaf));
static_assert(static_cast<int>(fb::NodeKind::Custom) == static_cast<int>(NodeKind::kCustom));
static_assert(static_cast<int>(fb::LeafKind::Pickle) == static_cast<int>(LeafKind::kPickle));
static_assert(static_cast<int>(fb::DType::UInt4) == static_cast<int>(DType::kUInt4));
static_assert(static_cast<int>(fb::DType::MAX) + 1 == kDTypeCodeEnd);
static_assert(static_cast<int>(fb::Storage::Chunked) == static_cast<int>(Storage::kChunked));
static_assert(static_cast<int>(fb::Filter::FloatSplit) == static_cast<int>(Filter::kFloatSplit));
static_assert(static_cast<int>(fb::Codec::Zstd) == static_cast<int>(Codec::kZstd));
static_assert(static_cast<int>(fb::KeyKind::Int) == static_cast<int>(Key::Kind::kInt));

using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

Offset<flatbuffers::Vector<uint8_t>> bytes_vector(FlatBufferBuilder& b, const std::string& s) {
  return b.CreateVector(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

// flatbuffers leaves out a field equal to its default, and -0.0 == 0.0: a negative zero is
// written explicitly, or its sign would be lost.
template <typename Add>
void add_double(FlatBufferBuilder& b, double v, Add add) {
  const bool negative_zero = v == 0.0 && std::signbit(v);
  if (negative_zero) b.ForceDefaults(true);
  add(v);
  if (negative_zero) b.ForceDefaults(false);
}

Offset<fb::Leaf> encode_leaf(FlatBufferBuilder& b, const Leaf& l) {
  auto type_name = l.type_name.empty() ? 0 : b.CreateString(l.type_name);
  auto big_int = l.big_int.empty() ? 0 : bytes_vector(b, l.big_int);
  auto shape = l.is_payload() ? b.CreateVector(l.shape) : 0;
  auto chunk_shape = l.storage == Storage::kChunked ? b.CreateVector(l.chunk_shape) : 0;
  auto inline_data = l.storage == Storage::kInline ? bytes_vector(b, l.inline_data) : 0;
  fb::LeafBuilder lb(b);
  lb.add_kind(static_cast<fb::LeafKind>(l.kind));
  if (l.flags) lb.add_flags(l.flags);
  if (!type_name.IsNull()) lb.add_type_name(type_name);
  switch (l.kind) {
    case LeafKind::kInt:
      if (!big_int.IsNull()) lb.add_big_int(big_int);
      else lb.add_int_value(l.int_value);
      break;
    case LeafKind::kFloat: add_double(b, l.real, [&](double v) { lb.add_real(v); }); break;
    case LeafKind::kComplex:
      add_double(b, l.real, [&](double v) { lb.add_real(v); });
      add_double(b, l.imag, [&](double v) { lb.add_imag(v); });
      break;
    case LeafKind::kBool: lb.add_bool_value(l.bool_value); break;
    default: break;
  }
  if (l.is_payload()) {
    lb.add_dtype(static_cast<fb::DType>(l.dtype));
    lb.add_shape(shape);
    lb.add_storage(static_cast<fb::Storage>(l.storage));
  }
  if (l.storage == Storage::kChunked) {
    lb.add_chunk_shape(chunk_shape);
    lb.add_filter(static_cast<fb::Filter>(l.filter));
    lb.add_codec(static_cast<fb::Codec>(l.codec));
    lb.add_level(l.level);
  }
  if (l.storage == Storage::kInline) lb.add_inline_data(inline_data);
  return lb.Finish();
}

Offset<fb::Node> encode_node(FlatBufferBuilder& b, const Node& n) {
  auto key_str = n.key.kind == Key::Kind::kStr ? b.CreateString(n.key.str) : 0;
  auto type_name = n.type_name.empty() ? 0 : b.CreateString(n.type_name);
  auto aux = n.kind == NodeKind::kCustom && !n.aux_data.empty() ? bytes_vector(b, n.aux_data) : 0;
  fb::NodeBuilder nb(b);
  nb.add_kind(static_cast<fb::NodeKind>(n.kind));
  if (n.num_children) nb.add_num_children(n.num_children);
  if (n.key.kind != Key::Kind::kNone) nb.add_key_kind(static_cast<fb::KeyKind>(n.key.kind));
  if (n.key.kind == Key::Kind::kStr) nb.add_key_str(key_str);
  if (n.key.kind == Key::Kind::kInt) nb.add_key_int(n.key.i);
  if (!type_name.IsNull()) nb.add_type_name(type_name);
  if (!aux.IsNull()) nb.add_aux_data(aux);
  if (n.kind == NodeKind::kLeaf) nb.add_leaf(n.leaf);
  return nb.Finish();
}

// Reading side ------------------------------------------------------------------------------

std::string to_string(const flatbuffers::String* s) {
  return s ? std::string(s->data(), s->size()) : std::string();
}
std::string to_string(const flatbuffers::Vector<uint8_t>* v) {
  return v ? std::string(reinterpret_cast<const char*>(v->data()), v->size()) : std::string();
}
// The verifier checks the alignment of a vector's length word, not of its 8-byte elements: a
// hostile header can put them at 4 mod 8, so they are loaded bytewise.
Shape to_shape(const flatbuffers::Vector<uint64_t>* v) {
  if (v == nullptr) return {};
  Shape s(v->size());
  const auto* p = reinterpret_cast<const std::byte*>(v) + sizeof(flatbuffers::uoffset_t);
  for (size_t i = 0; i < s.size(); ++i) s[i] = load_le<uint64_t>(p + i * sizeof(uint64_t));
  return s;
}

Status bad(const std::string& what) { return Status::Corruption("header: " + what); }

Status check_string(const flatbuffers::String* s, const Limits& limits, const char* what,
                    size_t index) {
  if (s && s->size() > limits.max_string_bytes) {
    return Status::ResourceExhausted("header: " + std::string(what) + " of entry " +
                                     std::to_string(index) + " is " + std::to_string(s->size()) +
                                     " bytes, over the limit of " +
                                     std::to_string(limits.max_string_bytes));
  }
  return Status::OK();
}

// Decodes into `l` in place: trees of millions of leaves must not pay for temporaries.
Status decode_leaf(const fb::Leaf* f, size_t i, const Limits& limits, Leaf& l) {
  auto kind = static_cast<uint8_t>(f->kind());
  if (kind < 1 || kind > static_cast<uint8_t>(LeafKind::kPickle)) {
    return bad("leaf " + std::to_string(i) + ": unknown leaf kind " + std::to_string(kind));
  }
  l.kind = static_cast<LeafKind>(kind);
  l.flags = f->flags();
  JTREE_RETURN_IF_ERROR(check_string(f->type_name(), limits, "type name", i));
  l.type_name = to_string(f->type_name());
  l.int_value = f->int_value();
  l.big_int = to_string(f->big_int());
  l.real = f->real();
  l.imag = f->imag();
  l.bool_value = f->bool_value();
  auto dtype = static_cast<uint8_t>(f->dtype());
  if (dtype != 0 && !dtype_known(dtype)) {
    return bad("leaf " + std::to_string(i) + ": unknown dtype code " + std::to_string(dtype) +
               " (written by a newer jtree?)");
  }
  l.dtype = static_cast<DType>(dtype);
  if (f->shape() && f->shape()->size() > limits.max_rank) {
    return Status::ResourceExhausted("header: leaf " + std::to_string(i) + " has rank " +
                                     std::to_string(f->shape()->size()) + ", over the limit of " +
                                     std::to_string(limits.max_rank));
  }
  l.shape = to_shape(f->shape());
  auto storage = static_cast<uint8_t>(f->storage());
  if (storage > static_cast<uint8_t>(Storage::kChunked)) {
    return bad("leaf " + std::to_string(i) + ": unknown storage " + std::to_string(storage));
  }
  l.storage = static_cast<Storage>(storage);
  if (f->chunk_shape() && f->chunk_shape()->size() > limits.max_rank) {
    return bad("leaf " + std::to_string(i) + ": chunk shape rank over the limit");
  }
  l.chunk_shape = to_shape(f->chunk_shape());
  auto filter = static_cast<uint8_t>(f->filter());
  if (filter > static_cast<uint8_t>(Filter::kFloatSplit)) {
    return bad("leaf " + std::to_string(i) + ": unknown filter " + std::to_string(filter));
  }
  l.filter = static_cast<Filter>(filter);
  auto codec = static_cast<uint8_t>(f->codec());
  if (codec > static_cast<uint8_t>(Codec::kZstd)) {
    return bad("leaf " + std::to_string(i) + ": unknown codec " + std::to_string(codec));
  }
  l.codec = static_cast<Codec>(codec);
  l.level = f->level();
  if (f->inline_data() && l.storage != Storage::kInline) {
    return bad("leaf " + std::to_string(i) + ": inline data on a leaf not stored inline");
  }
  l.inline_data = to_string(f->inline_data());
  return Status::OK();
}

Status decode_node(const fb::Node* f, size_t i, const Limits& limits, Node& n) {
  auto kind = static_cast<uint8_t>(f->kind());
  if (kind < 1 || kind > static_cast<uint8_t>(NodeKind::kLeaf)) {
    return bad("node " + std::to_string(i) + ": unknown node kind " + std::to_string(kind));
  }
  n.kind = static_cast<NodeKind>(kind);
  n.num_children = f->num_children();
  auto key_kind = static_cast<uint8_t>(f->key_kind());
  if (key_kind > static_cast<uint8_t>(Key::Kind::kInt)) {
    return bad("node " + std::to_string(i) + ": unknown key kind " + std::to_string(key_kind));
  }
  n.key.kind = static_cast<Key::Kind>(key_kind);
  JTREE_RETURN_IF_ERROR(check_string(f->key_str(), limits, "key", i));
  JTREE_RETURN_IF_ERROR(check_string(f->type_name(), limits, "type name", i));
  // Fields that do not belong to the key kind must be absent: no hidden bytes.
  if ((n.key.kind == Key::Kind::kStr) != (f->key_str() != nullptr)) {
    return bad("node " + std::to_string(i) + ": key string does not match its key kind");
  }
  if (n.key.kind != Key::Kind::kInt && f->key_int() != 0) {
    return bad("node " + std::to_string(i) + ": integer key on a node without an int key");
  }
  n.key.str = to_string(f->key_str());
  n.key.i = f->key_int();
  n.type_name = to_string(f->type_name());
  n.aux_data = to_string(f->aux_data());
  n.leaf = f->leaf();
  if (n.kind != NodeKind::kLeaf && n.leaf != 0) {
    return bad("node " + std::to_string(i) + ": leaf reference on a node that is not a leaf");
  }
  return Status::OK();
}

}  // namespace

Result<std::vector<std::byte>> encode_header(const Tree& tree, std::string_view writer) {
  FlatBufferBuilder b(1024 + tree.nodes.size() * 48 + tree.leaves.size() * 64);
  std::vector<Offset<fb::Leaf>> leaves;
  leaves.reserve(tree.leaves.size());
  for (const Leaf& l : tree.leaves) leaves.push_back(encode_leaf(b, l));
  std::vector<Offset<fb::Node>> nodes;
  nodes.reserve(tree.nodes.size());
  for (const Node& n : tree.nodes) nodes.push_back(encode_node(b, n));
  std::vector<Offset<fb::KeyValue>> meta;
  for (const auto& [k, v] : tree.metadata) {
    meta.push_back(fb::CreateKeyValue(b, b.CreateString(k), bytes_vector(b, v)));
  }
  auto header = fb::CreateHeader(b, b.CreateVector(nodes),
                                 leaves.empty() ? 0 : b.CreateVector(leaves),
                                 meta.empty() ? 0 : b.CreateVector(meta),
                                 writer.empty() ? 0 : b.CreateString(writer));
  b.Finish(header);
  auto* p = reinterpret_cast<const std::byte*>(b.GetBufferPointer());
  return std::vector<std::byte>(p, p + b.GetSize());
}

Result<Tree> decode_header(std::span<const std::byte> unaligned, const Limits& limits,
                           std::string* writer) {
  const AlignedBytes aligned(unaligned);
  const std::span<const std::byte> bytes = aligned.span();
  if (bytes.size() > limits.max_header_bytes) {
    return Status::ResourceExhausted("header is " + std::to_string(bytes.size()) +
                                     " bytes, over the limit of " +
                                     std::to_string(limits.max_header_bytes));
  }
  if (bytes.size() >= FLATBUFFERS_MAX_BUFFER_SIZE) return bad("too large for a flatbuffer");
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  // Tables: one per node, leaf and metadata entry, plus the root. The verifier's own bound
  // stops a header from making it walk more than that.
  uint64_t max_tables = limits.max_nodes + limits.max_leaves + 1024;
  flatbuffers::Verifier verifier(data, bytes.size(), 16,
                                 static_cast<flatbuffers::uoffset_t>(
                                     std::min<uint64_t>(max_tables, UINT32_MAX)));
  if (!verifier.VerifyBuffer<fb::Header>(nullptr)) {
    return bad("flatbuffer verification failed (damaged or not a jtree header)");
  }
  const fb::Header* h = flatbuffers::GetRoot<fb::Header>(data);
  const auto* fnodes = h->nodes();
  if (fnodes->size() == 0) return bad("no nodes");
  if (fnodes->size() > limits.max_nodes) {
    return Status::ResourceExhausted("header: " + std::to_string(fnodes->size()) +
                                     " nodes, over the limit of " +
                                     std::to_string(limits.max_nodes));
  }
  size_t nleaves = h->leaves() ? h->leaves()->size() : 0;
  if (nleaves > limits.max_leaves) {
    return Status::ResourceExhausted("header: " + std::to_string(nleaves) +
                                     " leaves, over the limit of " +
                                     std::to_string(limits.max_leaves));
  }
  Tree t;
  t.nodes.resize(fnodes->size());
  t.leaves.resize(nleaves);
  // Nodes and leaves decode independently (the verifier has checked every offset): big trees
  // are decoded in parallel ranges. The error of the lowest range wins, so messages do not
  // depend on timing.
  constexpr size_t kRange = 16384;
  const size_t node_ranges = (t.nodes.size() + kRange - 1) / kRange;
  const size_t ranges = node_ranges + (nleaves + kRange - 1) / kRange;
  std::vector<Status> errors(ranges);
  Status st = parallel_for(ThreadPool::shared(), ranges, 0, [&](size_t r) -> Status {
    const bool nodes = r < node_ranges;
    const size_t begin = (nodes ? r : r - node_ranges) * kRange;
    const size_t end = std::min(begin + kRange, nodes ? t.nodes.size() : nleaves);
    for (size_t i = begin; i < end && errors[r].ok(); ++i) {
      errors[r] = nodes ? decode_node(fnodes->Get(i), i, limits, t.nodes[i])
                        : decode_leaf(h->leaves()->Get(i), i, limits, t.leaves[i]);
    }
    return Status::OK();
  });
  JTREE_RETURN_IF_ERROR(st);
  for (const Status& e : errors) JTREE_RETURN_IF_ERROR(e);
  if (h->metadata()) {
    for (size_t i = 0; i < h->metadata()->size(); ++i) {
      const auto* kv = h->metadata()->Get(i);
      JTREE_RETURN_IF_ERROR(check_string(kv->key(), limits, "metadata key", i));
      t.metadata.emplace_back(to_string(kv->key()), to_string(kv->value()));
    }
  }
  if (writer) *writer = to_string(h->writer());
  return t;
}

}  // namespace jtree::format
