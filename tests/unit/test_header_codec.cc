// Header encode/decode: every node and leaf kind survives; damage is Corruption; limits hold.
#include <doctest/doctest.h>

#include <cmath>

#include "format/header_codec.h"
#include "format/validate.h"

using namespace jtree;
using namespace jtree::format;

namespace {

// A resolved tree with every node kind, key kind and leaf kind.
Tree every_kind() {
  Tree t;
  auto node = [&](NodeKind k, uint32_t children, Key key = {}) {
    Node n;
    n.kind = k;
    n.num_children = children;
    n.key = std::move(key);
    t.nodes.push_back(n);
    return &t.nodes.back();
  };
  auto leaf = [&](Leaf l, Key key = {}) {
    Node n;
    n.kind = NodeKind::kLeaf;
    n.leaf = static_cast<uint32_t>(t.leaves.size());
    n.key = std::move(key);
    t.leaves.push_back(std::move(l));
    t.nodes.push_back(n);
  };
  auto scalar = [](LeafKind k) {
    Leaf l;
    l.kind = k;
    l.storage = Storage::kNone;
    return l;
  };
  node(NodeKind::kDict, 9);
  Leaf i = scalar(LeafKind::kInt);
  i.int_value = -42;
  leaf(i, Key::string("int"));
  Leaf big = scalar(LeafKind::kInt);
  big.big_int = std::string("\x01\x02\x03\x04\x05\x06\x07\x08\x09", 9);
  leaf(big, Key::integer(-7));
  Leaf f = scalar(LeafKind::kFloat);
  f.real = 3.5;
  leaf(f, Key::string("a/b\\c"));
  node(NodeKind::kList, 3, Key::string("list"));
  node(NodeKind::kNone, 0);
  Leaf c = scalar(LeafKind::kComplex);
  c.real = 1;
  c.imag = -2;
  leaf(c);
  Leaf b = scalar(LeafKind::kBool);
  b.bool_value = true;
  leaf(b);
  Node* nt = node(NodeKind::kNamedTuple, 2, Key::string("nt"));
  nt->type_name = "Point";
  Leaf s;
  s.kind = LeafKind::kStr;
  s.dtype = DType::kUInt8;
  s.shape = {5};
  s.storage = Storage::kInline;
  s.inline_data = "hello";
  leaf(s, Key::string("x"));
  Leaf a;
  a.kind = LeafKind::kArray;
  a.dtype = DType::kBFloat16;
  a.shape = {1000, 64};
  a.storage = Storage::kChunked;
  a.chunk_shape = {100, 64};
  a.filter = Filter::kFloatSplit;
  a.codec = Codec::kZstd;
  a.level = 3;
  leaf(a, Key::string("y"));
  Node* cu = node(NodeKind::kCustom, 1, Key::string("custom"));
  cu->type_name = "my.Node";
  cu->aux_data = std::string("\0aux", 4);
  Leaf cl;
  cl.kind = LeafKind::kCustomLeaf;
  cl.type_name = "my.Leaf";
  cl.dtype = DType::kUInt8;
  cl.shape = {2};
  cl.storage = Storage::kInline;
  cl.inline_data = "zz";
  leaf(cl);
  node(NodeKind::kOrderedDict, 1, Key::string("od"));
  Node tied;
  tied.kind = NodeKind::kLeaf;
  tied.leaf = 6;  // the bf16 array again: tied weights
  tied.key = Key::integer(0);
  t.nodes.push_back(tied);
  node(NodeKind::kTuple, 0, Key::string("empty"));
  Leaf i4;
  i4.kind = LeafKind::kArray;
  i4.dtype = DType::kInt4;
  i4.shape = {3};
  i4.storage = Storage::kInline;
  i4.inline_data = std::string("\x21\x03", 2);
  i4.flags = 0;
  leaf(i4, Key::string("int4"));
  t.metadata.emplace_back("framework", "jax");
  return t;
}

}  // namespace

TEST_CASE("every node and leaf kind survives encode/decode") {
  Tree t = every_kind();
  REQUIRE(t.finalize().ok());
  auto bytes = encode_header(t, "unit test");
  REQUIRE(bytes.ok());
  std::string writer;
  auto d = decode_header(*bytes, Limits{}, &writer);
  REQUIRE(d.ok());
  CHECK(writer == "unit test");
  Tree& u = *d;
  REQUIRE(u.finalize().ok());
  REQUIRE(u.nodes.size() == t.nodes.size());
  REQUIRE(u.leaves.size() == t.leaves.size());
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    CAPTURE(i);
    CHECK(u.nodes[i].kind == t.nodes[i].kind);
    CHECK(u.nodes[i].key == t.nodes[i].key);
    CHECK(u.nodes[i].num_children == t.nodes[i].num_children);
    CHECK(u.nodes[i].type_name == t.nodes[i].type_name);
    CHECK(u.nodes[i].aux_data == t.nodes[i].aux_data);
    CHECK(u.nodes[i].leaf == t.nodes[i].leaf);
  }
  for (size_t i = 0; i < t.leaves.size(); ++i) {
    CAPTURE(i);
    const Leaf &a = t.leaves[i], &b = u.leaves[i];
    CHECK(a.kind == b.kind);
    CHECK(a.int_value == b.int_value);
    CHECK(a.big_int == b.big_int);
    CHECK(a.real == b.real);
    CHECK(a.imag == b.imag);
    CHECK(a.bool_value == b.bool_value);
    CHECK(a.type_name == b.type_name);
    CHECK(a.dtype == b.dtype);
    CHECK(a.shape == b.shape);
    CHECK(a.storage == b.storage);
    CHECK(a.chunk_shape == b.chunk_shape);
    CHECK(a.filter == b.filter);
    CHECK(a.codec == b.codec);
    CHECK(a.level == b.level);
    CHECK(a.inline_data == b.inline_data);
  }
  CHECK(u.metadata == t.metadata);
  auto chunks = validate_leaves(u, Limits{});
  REQUIRE(chunks.ok());
  CHECK(*chunks == 10);  // the bf16 leaf: 1000/100 chunks
  CHECK(u.path(u.leaf_node(2)) == "a\\/b\\\\c");
  CHECK(*u.find("a\\/b\\\\c") == u.leaf_node(2));
  CHECK(*u.find("-7") == u.leaf_node(1));
  CHECK(u.path(u.leaf_node(3)) == "list/1");
}

TEST_CASE("negative zeros keep their sign (flatbuffers omits fields equal to the default)") {
  Tree t;
  Node root;
  root.kind = NodeKind::kList;
  root.num_children = 2;
  t.nodes.push_back(root);
  for (uint32_t i = 0; i < 2; ++i) {
    Node n;
    n.kind = NodeKind::kLeaf;
    n.leaf = i;
    t.nodes.push_back(n);
  }
  Leaf f;
  f.kind = LeafKind::kFloat;
  f.real = -0.0;
  Leaf c;
  c.kind = LeafKind::kComplex;
  c.real = 0.0;
  c.imag = -0.0;
  t.leaves = {f, c};
  REQUIRE(t.finalize().ok());
  auto bytes = encode_header(t, "unit test");
  REQUIRE(bytes.ok());
  auto d = decode_header(*bytes, Limits{}, nullptr);
  REQUIRE(d.ok());
  CHECK(std::signbit(d->leaves[0].real));
  CHECK_FALSE(std::signbit(d->leaves[1].real));
  CHECK(std::signbit(d->leaves[1].imag));
}

TEST_CASE("damaged headers are Corruption, never a crash") {
  Tree t = every_kind();
  REQUIRE(t.finalize().ok());
  auto bytes = *encode_header(t, "w");
  size_t rejected = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (uint8_t flip : {0x01, 0x80, 0xff}) {
      auto b = bytes;
      b[i] ^= std::byte{flip};
      auto d = decode_header(b, Limits{}, nullptr);
      if (!d.ok()) {
        CHECK((d.status().is_corruption() || d.status().code() == StatusCode::kResourceExhausted));
        ++rejected;
        continue;
      }
      // What decodes must still pass or fail validation cleanly.
      Status st = d->finalize();
      if (st.ok()) (void)validate_leaves(*d, Limits{});
    }
  }
  CHECK(rejected > 0);
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto d = decode_header(std::span(bytes).first(n), Limits{}, nullptr);
    CHECK_FALSE(d.ok());
  }
}

TEST_CASE("limits are enforced before allocation") {
  Tree t = every_kind();
  REQUIRE(t.finalize().ok());
  auto bytes = *encode_header(t, "w");
  Limits small;
  small.max_nodes = 5;
  CHECK(decode_header(bytes, small, nullptr).status().code() == StatusCode::kResourceExhausted);
  small = Limits{};
  small.max_header_bytes = 10;
  CHECK(decode_header(bytes, small, nullptr).status().code() == StatusCode::kResourceExhausted);
  small = Limits{};
  small.max_string_bytes = 3;
  CHECK(decode_header(bytes, small, nullptr).status().code() == StatusCode::kResourceExhausted);
  small = Limits{};
  small.max_rank = 1;
  CHECK(decode_header(bytes, small, nullptr).status().code() == StatusCode::kResourceExhausted);
}
