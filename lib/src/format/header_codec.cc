#include "format/header_codec.h"

#include <flatbuffers/flatbuffers.h>

#include <atomic>
#include <cmath>
#include <functional>
#include <string_view>
#include <unordered_set>

#include "codec/plane_codec.h"
#include "format/aligned_bytes.h"
#include "tree/structure.h"
#include "format/validate.h"
#include "jtree_generated.h"
#include "util/checked_math.h"
#include "util/endian.h"
#include "util/huge_pages.h"
#include "util/thread_pool.h"
#include "util/utf8.h"

namespace jtree::format {
namespace {

// The file's enum codes are the public enums' values.
static_assert(static_cast<int>(fb::NodeKind::Leaf) == static_cast<int>(NodeKind::kLeaf));
static_assert(static_cast<int>(fb::NodeKind::Custom) == static_cast<int>(NodeKind::kCustom));
static_assert(static_cast<int>(fb::LeafKind::Pickle) == static_cast<int>(LeafKind::kPickle));
static_assert(static_cast<int>(fb::DType::UInt4) == static_cast<int>(DType::kUInt4));
static_assert(static_cast<int>(fb::DType::Float6E3M2FN) == static_cast<int>(DType::kFloat6E3M2FN));
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
  auto type_name = l.type_name.empty() ? 0 : b.CreateString(l.type_name.str());
  auto big_int = l.big_int.empty() ? 0 : bytes_vector(b, l.big_int.str());
  auto shape = l.is_payload() ? b.CreateVector(l.shape) : 0;
  const bool rectilinear = l.storage == Storage::kChunked && !l.chunk_bounds.empty();
  auto chunk_shape =
      l.storage == Storage::kChunked && !rectilinear ? b.CreateVector(l.chunk_shape) : 0;
  auto chunk_bounds = rectilinear ? b.CreateVector(l.chunk_bounds) : 0;
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
    lb.add_chunk_shape(chunk_shape);  // (a null offset adds nothing)
    lb.add_chunk_bounds(chunk_bounds);
    lb.add_filter(static_cast<fb::Filter>(l.filter));
    lb.add_codec(static_cast<fb::Codec>(l.codec));
    lb.add_level(l.level);
  }
  if (l.storage == Storage::kInline) lb.add_inline_data(inline_data);
  return lb.Finish();
}

Offset<fb::Node> encode_node(FlatBufferBuilder& b, const Node& n) {
  auto key_str = n.key.kind == Key::Kind::kStr ? b.CreateString(n.key.str) : 0;
  auto type_name = n.type_name.empty() ? 0 : b.CreateString(n.type_name.str());
  auto aux = n.kind == NodeKind::kCustom && !n.aux_data.empty() ? bytes_vector(b, n.aux_data.str()) : 0;
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

// Nodes and leaves are verified and decoded in ranges of this many, in parallel. Small enough
// that the threads share even a 20,000-leaf tree evenly (ranges of 16,384 left one thread
// with most of it: Reader::open of bench's small file 0.93x the time with 4,096, 2 vCPUs).
constexpr size_t kLeafRange = 4096;
// Trees with fewer nodes and leaves than this are decoded on the calling thread alone.
constexpr size_t kParallelTables = 16384;

// What the leaf ranges of decode_tree gather as they decode (one per range of leaves).
struct LeafRangeSummary {
  uint64_t chunks = 0;  // of the range's leaves; each leaf's first_chunk is relative to the range
  uint64_t inline_bytes = 0;
  uint64_t raw_bytes = 0;
  uint16_t min_read_version = 1;  // the highest leaf_min_read_version of the range's leaves
  bool invalid = false;  // a leaf failed its spec checks, or the range's chunk count overflowed
  std::vector<uint32_t> chunked;  // check-only decoding: the range's chunked leaves
};

// Check-only decoding (open_header) decodes every leaf into one scratch Leaf per range instead
// of into a Tree: the fields that decode_leaf sets only when present are cleared first (keeping
// their capacity: no allocation per leaf). Nodes are only checked (decode_node<false>).
void reset_scratch(Leaf& l) {
  l.shape.clear();
  l.chunk_shape.clear();
  l.chunk_bounds.clear();
  l.inline_data.clear();
  l.type_name.clear();
  l.big_int.clear();
}


std::string to_string(const flatbuffers::String* s) {
  return s ? std::string(s->data(), s->size()) : std::string();
}
std::string to_string(const flatbuffers::Vector<uint8_t>* v) {
  return v ? std::string(reinterpret_cast<const char*>(v->data()), v->size()) : std::string();
}
// Into an existing string: no temporary, and no allocation for short strings.
void assign(std::string& out, const flatbuffers::String* s) {
  if (s) out.assign(s->data(), s->size());
}
void assign(std::string& out, const flatbuffers::Vector<uint8_t>* v) {
  if (v) out.assign(reinterpret_cast<const char*>(v->data()), v->size());
}
// Rare fields: nothing allocated unless present.
void assign(SparseString& out, const flatbuffers::String* s) {
  if (s && s->size() > 0) out = to_string(s);
}
void assign(SparseString& out, const flatbuffers::Vector<uint8_t>* v) {
  if (v && v->size() > 0) out = to_string(v);
}
// The verifier checks the alignment of a vector's length word, not of its 8-byte elements: a
// hostile header can put them at 4 mod 8, so they are loaded bytewise.
void assign(Shape& out, const flatbuffers::Vector<uint64_t>* v) {
  if (v == nullptr) return;
  out.resize(v->size());
  const auto* p = reinterpret_cast<const std::byte*>(v) + sizeof(flatbuffers::uoffset_t);
  for (size_t i = 0; i < out.size(); ++i) out[i] = load_le<uint64_t>(p + i * sizeof(uint64_t));
}

Status bad(const std::string& what) { return Status::corruption("header: " + what); }

}  // namespace

Status structure_error(const Status& st) {
  if (st.code() == StatusCode::kResourceExhausted) return st.with_prefix("header");
  return bad(st.message());
}

namespace {

[[gnu::noinline]] Status string_too_long(const flatbuffers::String* s, const Limits& limits,
                                         const char* what, size_t index) {
  return Status::resource_exhausted("header: " + std::string(what) + " of entry " +
                                   std::to_string(index) + " is " + std::to_string(s->size()) +
                                   " bytes, over the limit of " +
                                   std::to_string(limits.max_string_bytes));
}

// Inline: it runs for every node; the message is built out of line.
inline Status check_string(const flatbuffers::String* s, const Limits& limits, const char* what,
                           size_t index) {
  if (s && s->size() > limits.max_string_bytes) [[unlikely]] {
    return string_too_long(s, limits, what, index);
  }
  return Status::success();
}

[[gnu::noinline]] Status not_utf8(const char* where, size_t index, const char* what,
                                  const flatbuffers::String* s, size_t at) {
  const std::string_view v(s->c_str(), s->size());
  return bad(std::string(where) + " " + std::to_string(index) + ": " + what +
             " is not valid UTF-8 (byte " + std::to_string(at) + " of \"" +
             escape_for_message(v) + "\")");
}

// The names section 6 says are UTF-8 (keys, type names, metadata keys): a reader would
// otherwise hand on bytes no other reader can represent the same way.
inline Status check_utf8(const flatbuffers::String* s, const char* where, size_t index,
                         const char* what) {
  if (s == nullptr) return Status::success();
  if (auto at = utf8_error(std::string_view(s->c_str(), s->size()))) [[unlikely]] {
    return not_utf8(where, index, what, s, *at);
  }
  return Status::success();
}

// Decodes into a default-constructed `l` in place: trees of millions of leaves must not pay for
// temporaries.
Status decode_leaf(const fb::Leaf* f, size_t i, const Limits& limits, Leaf& l) {
  auto kind = static_cast<uint8_t>(f->kind());
  if (kind < 1 || kind > static_cast<uint8_t>(LeafKind::kPickle)) {
    return bad("leaf " + std::to_string(i) + ": unknown leaf kind " + std::to_string(kind));
  }
  l.kind = static_cast<LeafKind>(kind);
  l.flags = f->flags();
  JTREE_RETURN_IF_ERROR(check_string(f->type_name(), limits, "type name", i));
  JTREE_RETURN_IF_ERROR(check_utf8(f->type_name(), "leaf", i, "type name"));
  assign(l.type_name, f->type_name());
  l.int_value = f->int_value();
  if (f->big_int() && f->big_int()->size() == 0) [[unlikely]] {
    // Present means authoritative; an empty one would read as 0 to some readers and as
    // int_value to others (section 6.2).
    return bad("leaf " + std::to_string(i) + ": big_int present but empty");
  }
  assign(l.big_int, f->big_int());
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
    return Status::resource_exhausted("header: leaf " + std::to_string(i) + " has rank " +
                                     std::to_string(f->shape()->size()) + ", over the limit of " +
                                     std::to_string(limits.max_rank));
  }
  assign(l.shape, f->shape());
  auto storage = static_cast<uint8_t>(f->storage());
  if (storage > static_cast<uint8_t>(Storage::kChunked)) {
    return bad("leaf " + std::to_string(i) + ": unknown storage " + std::to_string(storage));
  }
  l.storage = static_cast<Storage>(storage);
  if (f->chunk_shape() && f->chunk_shape()->size() > limits.max_rank) {
    return bad("leaf " + std::to_string(i) + ": chunk shape rank over the limit");
  }
  assign(l.chunk_shape, f->chunk_shape());
  assign(l.chunk_bounds, f->chunk_bounds());
  auto filter = static_cast<uint8_t>(f->filter());
  if (filter > static_cast<uint8_t>(Filter::kFloatSplit)) {
    return bad("leaf " + std::to_string(i) + ": unknown filter " + std::to_string(filter));
  }
  l.filter = static_cast<Filter>(filter);
  auto codec = static_cast<uint8_t>(f->codec());
  // Known codecs are Raw and those a PlaneCodec claims (codec/plane_codec.h).
  if (codec != static_cast<uint8_t>(Codec::kRaw) &&
      codec::find_plane_codec(static_cast<Codec>(codec)) == nullptr) {
    return bad("leaf " + std::to_string(i) + ": unknown codec " + std::to_string(codec));
  }
  l.codec = static_cast<Codec>(codec);
  l.level = f->level();
  // (Present and empty is absent, FORMAT.md section 1.)
  if (f->inline_data() && f->inline_data()->size() > 0 && l.storage != Storage::kInline) {
    return bad("leaf " + std::to_string(i) + ": inline data on a leaf not stored inline");
  }
  assign(l.inline_data, f->inline_data());
  return Status::success();
}

// With kStore false, only the checks: the strings are not copied (check-only decoding).
template <bool kStore = true>
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
  JTREE_RETURN_IF_ERROR(check_utf8(f->key_str(), "node", i, "key"));
  JTREE_RETURN_IF_ERROR(check_utf8(f->type_name(), "node", i, "type name"));
  // Fields that do not belong to the key kind must be absent: no hidden bytes.
  if ((n.key.kind == Key::Kind::kStr) != (f->key_str() != nullptr)) {
    return bad("node " + std::to_string(i) + ": key string does not match its key kind");
  }
  if (n.key.kind != Key::Kind::kInt && f->key_int() != 0) {
    return bad("node " + std::to_string(i) + ": integer key on a node without an int key");
  }
  if constexpr (kStore) {
    assign(n.key.str, f->key_str());
    n.key.i = f->key_int();
    assign(n.type_name, f->type_name());
    assign(n.aux_data, f->aux_data());
  }
  n.leaf = f->leaf();
  if (n.kind != NodeKind::kLeaf && n.leaf != 0) {
    return bad("node " + std::to_string(i) + ": leaf reference on a node that is not a leaf");
  }
  return Status::success();
}

// The spec checks of one decoded leaf (validate_leaves' without messages), and its totals.
void check_leaf(Leaf& l, const Limits& limits, LeafRangeSummary& r) {
  uint64_t n = 0;
  if (!leaf_spec_valid(l, limits, &n)) {
    r.invalid = true;
    return;
  }
  l.first_chunk = r.chunks;
  auto total = checked_add(r.chunks, n);
  if (!total) {
    r.invalid = true;
    return;
  }
  r.chunks = *total;
  r.min_read_version = std::max(r.min_read_version, leaf_min_read_version(l));
  if (l.storage == Storage::kInline) r.inline_bytes += l.inline_data.size();
  if (l.storage == Storage::kChunked) r.raw_bytes += stored_bytes(l.dtype, l.num_elements());
}

// The checks of VerifyBuffer<fb::Header> except the node and leaf tables themselves:
// decode_header verifies those as it decodes them. Returns the root, or null.
const fb::Header* verify_root(flatbuffers::Verifier& v, const uint8_t* data, size_t size) {
  using flatbuffers::soffset_t;  // named by FLATBUFFERS_MIN_BUFFER_SIZE
  using flatbuffers::uoffset_t;
  if (!v.Check(size >= FLATBUFFERS_MIN_BUFFER_SIZE)) return nullptr;
  const flatbuffers::uoffset_t o = v.VerifyOffset(0);
  if (!v.Check(o != 0)) return nullptr;
  const auto* h = reinterpret_cast<const fb::Header*>(data + o);
  // fb::Header derives privately from flatbuffers::Table; a C-style cast may name the base.
  const auto* table = (const flatbuffers::Table*)h;
  using H = fb::Header;
  const bool ok = table->VerifyTableStart(v) && table->VerifyOffsetRequired(v, H::VT_NODES) &&
                  v.VerifyVector(h->nodes()) && table->VerifyOffset(v, H::VT_LEAVES) &&
                  v.VerifyVector(h->leaves()) && table->VerifyOffset(v, H::VT_METADATA) &&
                  v.VerifyVector(h->metadata()) && v.VerifyVectorOfTables(h->metadata()) &&
                  table->VerifyOffset(v, H::VT_WRITER) && v.VerifyString(h->writer()) &&
                  v.EndTable();
  return ok ? h : nullptr;
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
  const std::unordered_set<std::string_view> text(tree.metadata_text_keys.begin(),
                                                  tree.metadata_text_keys.end());
  for (const auto& [k, v] : tree.metadata) {
    meta.push_back(fb::CreateKeyValue(b, b.CreateString(k), bytes_vector(b, v),
                                      text.count(k) != 0));
  }
  auto header = fb::CreateHeader(b, b.CreateVector(nodes),
                                 leaves.empty() ? 0 : b.CreateVector(leaves),
                                 meta.empty() ? 0 : b.CreateVector(meta),
                                 writer.empty() ? 0 : b.CreateString(writer));
  b.Finish(header);
  auto* p = reinterpret_cast<const std::byte*>(b.GetBufferPointer());
  return std::vector<std::byte>(p, p + b.GetSize());
}

namespace {

// Where decode_impl puts what it decodes: a Tree, or (check-only: `tree` null) nothing but
// each leaf's first_chunk, relative to its range.
struct DecodeTarget {
  Tree* tree = nullptr;
  // The tables were verified already (HeaderView::decode_all): not again.
  bool verified = false;
  std::vector<uint64_t>* first_chunk = nullptr;  // check-only
  std::vector<NodeShape>* shapes = nullptr;      // check-only: each node's shape
  // Check-only: run once every node is decoded, concurrently with the leaves (the structure
  // checks). False fails the decode.
  std::function<bool()> after_nodes;
  const fb::Header** root = nullptr;              // check-only: the verified root table
  std::vector<std::pair<std::string, std::string>>* metadata = nullptr;  // check-only
  std::vector<std::string>* metadata_text_keys = nullptr;                 // check-only
};

DecodeTarget tree_target(Tree& t) {
  DecodeTarget target;
  target.tree = &t;
  return target;
}

// decode_header; with `summaries`, also checks each leaf's spec (decode_tree, open_header).
// The tree is decoded into `*target.tree`, or only checked.
Status decode_impl(std::span<const std::byte> unaligned, const Limits& limits,
                   std::string* writer, std::vector<LeafRangeSummary>* summaries,
                   const DecodeTarget& target) {
  const AlignedBytes aligned(unaligned);
  const std::span<const std::byte> bytes = aligned.span();
  if (bytes.size() > limits.max_header_bytes) {
    return Status::resource_exhausted("header is " + std::to_string(bytes.size()) +
                                     " bytes, over the limit of " +
                                     std::to_string(limits.max_header_bytes));
  }
  if (bytes.size() >= FLATBUFFERS_MAX_BUFFER_SIZE) return bad("too large for a flatbuffer");
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  // Tables: one per node, leaf and metadata entry, plus the root. The verifiers' own bounds
  // stop a header from making them walk more than that.
  const uint64_t max_tables = std::min<uint64_t>(
      limits.max_nodes + uint64_t{limits.max_leaves} + 1024, UINT32_MAX);
  flatbuffers::Verifier verifier(data, bytes.size(), 16,
                                 static_cast<flatbuffers::uoffset_t>(max_tables));
  const fb::Header* h = verify_root(verifier, data, bytes.size());
  if (h == nullptr) return bad("flatbuffer verification failed (damaged or not a jtree header)");
  if (target.root) *target.root = h;  // (after_nodes reads the nodes through it)
  const auto* fnodes = h->nodes();
  const auto* fleaves = h->leaves();
  if (fnodes->size() == 0) return bad("no nodes");
  // (Check-only decoding keeps pointers into the bytes: they must be the caller's own.)
  if (!target.tree && bytes.data() != unaligned.data()) return bad("misaligned header buffer");
  if (fnodes->size() > limits.max_nodes) {
    return Status::resource_exhausted("header: " + std::to_string(fnodes->size()) +
                                     " nodes, over the limit of " +
                                     std::to_string(limits.max_nodes));
  }
  const size_t nleaves = fleaves ? fleaves->size() : 0;
  if (nleaves > limits.max_leaves) {
    return Status::resource_exhausted("header: " + std::to_string(nleaves) +
                                     " leaves, over the limit of " +
                                     std::to_string(limits.max_leaves));
  }
  Tree* t = target.tree;
  const size_t nnodes = fnodes->size();
  // Small trees are decoded on the calling thread: handing work to the pool costs more than
  // it saves there (a thread must wake up; on a busy machine it may wait to be scheduled).
  const int parallelism = nnodes + nleaves >= kParallelTables ? 0 : 1;
  if (t) {
    // The two arrays are constructed on two threads: constructing them is what first touches
    // their memory, and the kernel's zeroing of fresh pages is a good part of an open's time.
    JTREE_RETURN_IF_ERROR(parallel_for(ThreadPool::shared(), 2, parallelism, [&](size_t which) {
      if (which == 0) {
        t->nodes.reserve(nnodes);
        advise_huge_pages(t->nodes.data(), t->nodes.capacity() * sizeof(Node));
        t->nodes.resize(nnodes);
      } else {
        t->leaves.reserve(nleaves);
        advise_huge_pages(t->leaves.data(), t->leaves.capacity() * sizeof(Leaf));
        t->leaves.resize(nleaves);
      }
      return Status::success();
    }));
  } else {
    target.first_chunk->resize(nleaves);
    target.shapes->resize(nnodes);
  }
  // Each node and leaf table is verified (by the generated Verify, as VerifyBuffer would) right
  // before it is decoded, while its bytes are in the cache, and big trees are done in parallel
  // ranges. A verification failure anywhere wins over decoding errors, and among those the
  // lowest range's wins, so messages match a verify-everything-first order and do not depend
  // on timing.
  constexpr size_t kRange = kLeafRange;
  const size_t node_ranges = (nnodes + kRange - 1) / kRange;
  const size_t ranges = node_ranges + (nleaves + kRange - 1) / kRange;
  std::vector<Status> errors(ranges);
  std::vector<char> unverified(ranges, 0);  // a table of the range failed verification
  if (summaries) summaries->assign(ranges - node_ranges, {});
  std::atomic<size_t> nodes_done{0};  // node ranges finished
  auto decode_range = [&](size_t r) {
    const bool nodes = r < node_ranges;
    const size_t begin = (nodes ? r : r - node_ranges) * kRange;
    const size_t end = std::min(begin + kRange, nodes ? nnodes : nleaves);
    flatbuffers::Verifier v(data, bytes.size(), 16,
                            static_cast<flatbuffers::uoffset_t>(end - begin));
    Node scratch_node;
    Leaf scratch_leaf;
    // The range's flags live in locals until it ends: the shared vectors' neighbouring entries
    // belong to other threads, and a store per table into them would bounce the cache line.
    bool failed_verify = false;
    bool failed_decode = false;
    Status error;
    LeafRangeSummary sum;
    for (size_t i = begin; i < end && !failed_verify; ++i) {
      const auto k = static_cast<flatbuffers::uoffset_t>(i);
      if (nodes) {
        const fb::Node* f = fnodes->Get(k);
        failed_verify = !target.verified && !f->Verify(v);
        if (!failed_verify && !failed_decode) {
          // (Assigned only when it fails: a Status per table is not free.)
          Status e = t ? decode_node(f, i, limits, t->nodes[i])
                       : decode_node<false>(f, i, limits, scratch_node);
          if (!e.ok()) {
            error = std::move(e);
            failed_decode = true;
          } else if (!t) {
            const auto* type_name = f->type_name();
            const auto* aux = f->aux_data();
            (*target.shapes)[i] = NodeShape{scratch_node.kind, scratch_node.key.kind,
                                            type_name && type_name->size() > 0,
                                            aux && aux->size() > 0, scratch_node.num_children,
                                            scratch_node.leaf};
          }
        }
      } else {
        const fb::Leaf* f = fleaves->Get(k);
        failed_verify = !target.verified && !f->Verify(v);
        if (!failed_verify && !failed_decode) {
          if (!t) reset_scratch(scratch_leaf);
          Leaf& l = t ? t->leaves[i] : scratch_leaf;
          if (Status e = decode_leaf(f, i, limits, l); !e.ok()) {
            error = std::move(e);
            failed_decode = true;
          } else if (summaries) {
            check_leaf(l, limits, sum);
            if (!t) {
              (*target.first_chunk)[i] = l.first_chunk;
              if (l.storage == Storage::kChunked) sum.chunked.push_back(static_cast<uint32_t>(i));
            }
          }
        }
      }
    }
    unverified[r] = failed_verify;
    if (failed_decode) errors[r] = std::move(error);
    if (!nodes && summaries) (*summaries)[r - node_ranges] = std::move(sum);
    if (nodes && nodes_done.fetch_add(1) + 1 == node_ranges) nodes_done.notify_all();
  };
  // after_nodes runs as one more item, right after the node ranges (items are claimed in
  // order): one thread runs it while the others decode leaves.
  const size_t items = ranges + (target.after_nodes ? 1 : 0);
  bool after_nodes_ok = false;
  Status st = parallel_for(ThreadPool::shared(), items, parallelism, [&](size_t r) -> Status {
    if (!target.after_nodes || r < node_ranges) {
      decode_range(r);
    } else if (r > node_ranges) {
      decode_range(r - 1);
    } else {
      for (size_t done = nodes_done.load(); done < node_ranges; done = nodes_done.load()) {
        nodes_done.wait(done);
      }
      bool nodes_ok = true;
      for (size_t k = 0; k < node_ranges; ++k) nodes_ok = nodes_ok && !unverified[k] && errors[k].ok();
      after_nodes_ok = nodes_ok && target.after_nodes();
    }
    return Status::success();
  });
  JTREE_RETURN_IF_ERROR(st);
  if (target.after_nodes && !after_nodes_ok) return bad("structure");  // open_header: see there
  for (char u : unverified) {
    if (u) return bad("flatbuffer verification failed (damaged or not a jtree header)");
  }
  for (const Status& e : errors) JTREE_RETURN_IF_ERROR(e);
  if (h->metadata()) {
    std::unordered_set<std::string_view> seen;  // keys are unique (the schema says so)
    seen.reserve(h->metadata()->size());
    for (size_t i = 0; i < h->metadata()->size(); ++i) {
      const auto* kv = h->metadata()->Get(i);
      JTREE_RETURN_IF_ERROR(check_string(kv->key(), limits, "metadata key", i));
      JTREE_RETURN_IF_ERROR(check_utf8(kv->key(), "metadata entry", i, "key"));
      const std::string_view key(kv->key()->c_str(), kv->key()->size());
      if (!seen.insert(key).second) {
        return bad("metadata entry " + std::to_string(i) + ": duplicate key \"" +
                   escape_for_message(key) + "\"");
      }
      auto& metadata = t ? t->metadata : *target.metadata;
      metadata.emplace_back(to_string(kv->key()), to_string(kv->value()));
      if (kv->text()) {  // (format version 3: the value is UTF-8 text)
        if (auto at = utf8_error(metadata.back().second)) {
          return bad("metadata entry " + std::to_string(i) + ": text value is not valid UTF-8 "
                     "(byte " + std::to_string(*at) + ")");
        }
        (t ? t->metadata_text_keys : *target.metadata_text_keys).push_back(metadata.back().first);
      }
    }
  }
  if (writer) *writer = to_string(h->writer());
  return Status::success();
}

}  // namespace

Result<Tree> decode_header(std::span<const std::byte> bytes, const Limits& limits,
                           std::string* writer) {
  Tree t;
  JTREE_RETURN_IF_ERROR(decode_impl(bytes, limits, writer, nullptr, tree_target(t)));
  return t;
}

Result<Tree> decode_tree(std::span<const std::byte> bytes, const Limits& limits,
                         std::string* writer, HeaderSummary* summary) {
  std::vector<LeafRangeSummary> ranges;
  Tree t;
  JTREE_RETURN_IF_ERROR(decode_impl(bytes, limits, writer, &ranges, tree_target(t)));
  Status st = t.finalize(limits.max_depth);
  if (!st.ok()) return structure_error(st);
  HeaderSummary sum;
  bool invalid = false;
  for (const LeafRangeSummary& r : ranges) {
    auto chunks = checked_add(sum.chunks, r.chunks);
    invalid = invalid || r.invalid || !chunks;
    if (invalid) break;
    sum.chunks = *chunks;
    sum.inline_bytes += r.inline_bytes;
    sum.raw_bytes += r.raw_bytes;
    sum.min_read_version = std::max(sum.min_read_version, r.min_read_version);
  }
  if (invalid) {
    // Some leaf failed (or the count overflowed): the checks again, in order, with messages.
    JTREE_ASSIGN_OR_RETURN(uint64_t chunks, validate_leaves(t, limits));
    sum = HeaderSummary{};
    sum.chunks = chunks;
    for (const Leaf& l : t.leaves) {
      sum.min_read_version = std::max(sum.min_read_version, leaf_min_read_version(l));
      if (l.storage == Storage::kInline) sum.inline_bytes += l.inline_data.size();
      if (l.storage == Storage::kChunked) sum.raw_bytes += stored_bytes(l.dtype, l.num_elements());
    }
  } else {
    // first_chunk is relative to the leaf's range: add the chunks of the ranges before it
    // (nothing to do while they have none, as in a tree of inline leaves).
    uint64_t base = 0;
    for (size_t r = 0; r < ranges.size(); ++r) {
      if (base != 0) {
        const size_t end = std::min(t.leaves.size(), (r + 1) * kLeafRange);
        for (size_t i = r * kLeafRange; i < end; ++i) t.leaves[i].first_chunk += base;
      }
      base += ranges[r].chunks;
    }
  }
  if (summary) *summary = sum;
  return t;
}

namespace {

std::string_view view_of(const flatbuffers::String* s) {
  return s ? std::string_view(s->data(), s->size()) : std::string_view();
}
std::string_view view_of(const flatbuffers::Vector<uint8_t>* v) {
  return v ? std::string_view(reinterpret_cast<const char*>(v->data()), v->size())
           : std::string_view();
}

}  // namespace

KeyView HeaderView::key(uint32_t i) const {
  if (shapes_[i].key_kind == Key::Kind::kNone) return KeyView{};
  const fb::Node* f = root_->nodes()->Get(i);
  return KeyView{static_cast<Key::Kind>(f->key_kind()), view_of(f->key_str()), f->key_int()};
}

NodeView HeaderView::node(uint32_t i) const {
  const NodeShape& shape = shapes_[i];
  NodeView n;
  n.kind = shape.kind;
  n.num_children = shape.num_children;
  n.leaf = shape.leaf;
  n.key.kind = shape.key_kind;
  if (shape.key_kind != Key::Kind::kNone || shape.has_type_name || shape.has_aux_data) {
    const fb::Node* f = root_->nodes()->Get(i);
    n.key.str = view_of(f->key_str());
    n.key.i = f->key_int();
    n.type_name = view_of(f->type_name());
    n.aux_data = view_of(f->aux_data());
  }
  return n;
}

void HeaderView::decode_leaf(uint32_t i, Leaf& out) const {
  // Reset, keeping the capacity of the shapes and the inline bytes: a caller decoding leaf
  // after leaf into one Leaf (validate_index, at every open) then allocates nothing.
  Shape shape = std::move(out.shape), chunk_shape = std::move(out.chunk_shape),
        chunk_bounds = std::move(out.chunk_bounds);
  std::string inline_data = std::move(out.inline_data);
  out = Leaf{};
  out.shape = std::move(shape);
  out.chunk_shape = std::move(chunk_shape);
  out.chunk_bounds = std::move(chunk_bounds);
  out.inline_data = std::move(inline_data);
  reset_scratch(out);
  // Checked by open_header: decoding it again cannot fail.
  (void)format::decode_leaf(root_->leaves()->Get(i), i, limits_, out);
  out.first_chunk = first_chunk_[i];
}

void HeaderView::decode_grid(uint32_t i, Leaf& out) const {
  // Checked by open_header: the fields are copied without the checks of format::decode_leaf.
  const fb::Leaf* f = root_->leaves()->Get(i);
  out.kind = static_cast<LeafKind>(f->kind());
  out.flags = f->flags();
  out.dtype = static_cast<DType>(f->dtype());
  out.storage = static_cast<Storage>(f->storage());
  out.shape.clear();
  out.chunk_shape.clear();
  out.chunk_bounds.clear();
  assign(out.shape, f->shape());
  assign(out.chunk_shape, f->chunk_shape());
  assign(out.chunk_bounds, f->chunk_bounds());
  out.filter = static_cast<Filter>(f->filter());
  out.codec = static_cast<Codec>(f->codec());
  out.level = f->level();
  out.first_chunk = first_chunk_[i];
}

Result<Tree> HeaderView::decode_all() const {
  // open_header verified and checked every table: decoded again without the flatbuffer
  // verification and the leaf checks, first_chunk copied from what the checks computed.
  Tree t;
  DecodeTarget target = tree_target(t);
  target.verified = true;
  JTREE_RETURN_IF_ERROR(decode_impl(bytes(), limits_, nullptr, nullptr, target));
  for (size_t i = 0; i < t.leaves.size(); ++i) t.leaves[i].first_chunk = first_chunk_[i];
  Status st = t.finalize(limits_.max_depth);
  if (!st.ok()) return structure_error(st);
  return t;
}

Result<HeaderView> open_header(std::unique_ptr<std::byte[]> bytes, size_t size,
                               const Limits& limits, std::string* writer,
                               HeaderSummary* summary) {
  HeaderView v;
  v.bytes_ = std::move(bytes);
  v.size_ = size;
  v.limits_ = limits;
  std::vector<LeafRangeSummary> ranges;
  DecodeTarget target;
  target.first_chunk = &v.first_chunk_;
  target.shapes = &v.shapes_;
  target.root = &v.root_;
  target.metadata = &v.metadata_;
  target.metadata_text_keys = &v.metadata_text_keys_;
  // The structure rules need the node count and the leaf count: both known once decode_impl
  // has sized the arrays, before it runs after_nodes.
  target.after_nodes = [&] {
    return check_structure(v.nodes(), v.first_chunk_.size(), limits.max_depth, v.nav_).ok();
  };
  Status st = decode_impl(v.bytes(), limits, writer, &ranges, target);
  HeaderSummary sum;
  bool valid = st.ok();
  if (valid) {
    uint64_t base = 0;  // chunks of the ranges before
    for (size_t r = 0; r < ranges.size() && valid; ++r) {
      auto chunks = checked_add(sum.chunks, ranges[r].chunks);
      valid = !ranges[r].invalid && chunks.has_value();
      if (!valid) break;
      sum.chunks = *chunks;
      sum.inline_bytes += ranges[r].inline_bytes;
      sum.raw_bytes += ranges[r].raw_bytes;
      sum.min_read_version = std::max(sum.min_read_version, ranges[r].min_read_version);
      if (base != 0) {
        const size_t end = std::min(v.first_chunk_.size(), (r + 1) * kLeafRange);
        for (size_t i = r * kLeafRange; i < end; ++i) v.first_chunk_[i] += base;
      }
      base += ranges[r].chunks;
      v.chunked_.insert(v.chunked_.end(), ranges[r].chunked.begin(), ranges[r].chunked.end());
    }
  }
  if (!valid) {
    // The message, exactly as decode_tree gives it (the order of its checks decides which of
    // several problems is reported).
    auto t = decode_tree(v.bytes(), limits, nullptr, nullptr);
    if (!t.ok()) return t.status();
    return Status::corruption("header: the checks of an open and of a full decode disagree");
  }
  if (summary) *summary = sum;
  return v;
}

}  // namespace jtree::format
