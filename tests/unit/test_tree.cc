// TreeBuilder, paths and lookups.
#include <doctest/doctest.h>

#include "jtree/tree.h"

using namespace jtree;

TEST_CASE("builder makes the expected preorder tree") {
  float w[4] = {1, 2, 3, 4};
  TreeBuilder b;
  b.dict();
  b.key("params").dict();
  b.key("w").array(DType::kFloat32, {2, 2}, ArrayView{reinterpret_cast<std::byte*>(w)});
  b.key("layers").list();
  b.none();
  b.int_value(7);
  b.end();
  b.end();
  b.key(3).str("three");
  b.key("tied").tied(0);
  b.end();
  auto t = std::move(b).finish();
  REQUIRE(t.ok());
  CHECK(t->nodes.size() == 8);
  CHECK(t->leaves.size() == 3);
  CHECK(t->children(0).size() == 3);
  CHECK(t->path(t->leaf_node(0)) == "params/w");
  CHECK(t->path(5) == "params/layers/1");
  CHECK(*t->find("params/layers/1") == 5);
  CHECK(*t->find("3") == 6);
  CHECK(*t->find("tied") == 7);
  CHECK(t->nodes[7].leaf == 0);
  CHECK(t->leaf_node(0) == 2);  // the first reference wins
  auto nf = t->find("params/nope");
  CHECK(nf.status().is_not_found());
  CHECK(nf.status().message().find("no 'nope' in 'params'") != std::string::npos);
  CHECK(t->find("params/w/x").status().message().find("is a leaf") != std::string::npos);
  CHECK(t->find("").value() == 0);
}

TEST_CASE("builder misuse is reported") {
  {
    TreeBuilder b;
    b.dict().key("a").end();
    CHECK_FALSE(std::move(b).finish().ok());
  }
  {
    TreeBuilder b;
    b.list().end().end();
    CHECK_FALSE(std::move(b).finish().ok());
  }
  {
    TreeBuilder b;
    b.dict();
    CHECK_FALSE(std::move(b).finish().ok());
  }
  {
    TreeBuilder b;
    b.list().key("x").none().end();
    CHECK_FALSE(std::move(b).finish().ok());
  }
  {
    TreeBuilder b;
    b.list().none().end().none();
    CHECK_FALSE(std::move(b).finish().ok());
  }
}

TEST_CASE("an empty string key is \\e in paths: apart from the root, at the top and below") {
  TreeBuilder b;
  b.dict();
  b.key("").dict();
  b.key("a").int_value(1);
  b.key("").int_value(2);
  b.end();
  b.key("b").int_value(3);
  b.end();
  auto t = std::move(b).finish();
  REQUIRE(t.ok());
  const uint32_t top = t->children(0)[0];
  CHECK(t->path(top) == "\\e");
  CHECK(t->find("\\e").value() == top);
  CHECK(t->find("").value() == 0);  // the root, not the key ""
  const uint32_t a = t->leaf_node(0), inner = t->leaf_node(1);
  CHECK(t->path(a) == "\\e/a");
  CHECK(t->path(inner) == "\\e/\\e");
  for (uint32_t n : {top, a, inner, t->leaf_node(2)}) {
    auto found = t->find(t->path(n));
    REQUIRE(found.ok());
    CHECK(*found == n);
  }
  CHECK(t->find("/a").value() == a);  // (as paths were written before \e)
}

TEST_CASE("duplicate keys are found in small and large dicts, int and str keys apart") {
  for (int n : {2, 8, 9, 1000}) {
    CAPTURE(n);
    for (bool dup : {false, true}) {
      TreeBuilder b;
      b.dict();
      for (int i = 0; i < n; ++i) b.key("k" + std::to_string(i)).none();
      b.key(int64_t{0}).none();  // an int key 0 is not the string "0"
      if (dup) b.key("k" + std::to_string(n / 2)).none();
      b.end();
      auto t = std::move(b).finish();
      CHECK(t.ok() == !dup);
      if (dup) CHECK(t.status().message().find("duplicate keys") != std::string::npos);
    }
  }
}

TEST_CASE("Tree::chunk_ends splits a rectilinear grid's bounds per dimension, once") {
  Leaf l;
  l.kind = LeafKind::kArray;
  l.dtype = DType::kFloat32;
  l.shape = {10, 7};
  l.storage = Storage::kChunked;
  l.chunk_bounds = {3, 4, 10, 2, 7};
  CHECK(Tree::chunk_ends(l) == std::vector<Shape>{{3, 4, 10}, {2, 7}});
  CHECK(Tree::chunk_count(l) == 6);

  // A regular grid, a leaf not chunked, and bounds that do not split: no ends.
  Leaf regular = l;
  regular.chunk_bounds.clear();
  regular.chunk_shape = {5, 7};
  CHECK(Tree::chunk_ends(regular).empty());
  Leaf inline_leaf = l;
  inline_leaf.storage = Storage::kInline;
  CHECK(Tree::chunk_ends(inline_leaf).empty());
  Leaf bad = l;
  bad.chunk_bounds = {3, 3, 10, 2, 7};  // not strictly increasing
  CHECK(Tree::chunk_ends(bad).empty());
  bad.chunk_bounds = {3, 4, 10, 2};  // the last dimension does not end at its extent
  CHECK(Tree::chunk_ends(bad).empty());
}
