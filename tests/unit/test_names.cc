// The writer refuses what readers refuse (issue 20): names that are not UTF-8 (keys, type
// names, metadata keys), duplicate metadata keys, non-canonical big_int. The reader's side is
// covered by the golden files (tests/golden/broken/key_not_utf8.jtree and the others).
#include <doctest/doctest.h>

#include "test_util.h"
#include "util/utf8.h"

using namespace jtree;
using namespace jtree::testing;

namespace {

// Saves `b`'s tree; the status, and whether a file was left behind.
Status try_save(TreeBuilder&& b, const TempDir& dir, bool* left_file) {
  auto tree = std::move(b).finish();
  REQUIRE_MESSAGE(tree.ok(), tree.status().to_string());
  const std::string path = dir.file("t.jtree");
  auto st = save(std::move(*tree), path);
  *left_file = std::filesystem::exists(path);
  return st.status();
}

}  // namespace

TEST_CASE("utf8_error: RFC 3629's well-formed sequences only") {
  CHECK_FALSE(utf8_error(""));
  CHECK_FALSE(utf8_error("plain ascii key of some length"));
  CHECK_FALSE(utf8_error("gr\xc3\xb6\xc3\x9f" "e \xe2\x82\xac \xf0\x9f\x98\x80"));  // ö ß € 😀
  CHECK_FALSE(utf8_error("\xf4\x8f\xbf\xbf"));                                       // U+10FFFF
  CHECK(utf8_error("abcdefghij\xff") == 10u);
  CHECK(utf8_error("\x80") == 0u);                  // a lone continuation byte
  CHECK(utf8_error("a\xc0\xaf") == 1u);             // overlong '/'
  CHECK(utf8_error("\xe0\x80\xaf") == 0u);          // overlong, 3 bytes
  CHECK(utf8_error("\xed\xa0\x80") == 0u);          // surrogate U+D800
  CHECK(utf8_error("\xf4\x90\x80\x80") == 0u);      // above U+10FFFF
  CHECK(utf8_error("ok\xe2\x82") == 2u);            // truncated
  CHECK(escape_for_message("a\xff\\b\xc3\xb6") == "a\\xff\\x5cb\xc3\xb6");
}

TEST_CASE("save refuses names that are not UTF-8, naming where, and writes nothing") {
  TempDir dir;
  bool left = true;
  {
    TreeBuilder b;
    b.dict().key("params").dict().key("w\xff").int_value(1).end().end();
    Status st = try_save(std::move(b), dir, &left);
    CHECK(st.code() == StatusCode::kInvalidArgument);
    CHECK_MESSAGE(st.message().find("child 0 of 'params'") != std::string::npos, st.message());
    CHECK(st.message().find("key is not valid UTF-8") != std::string::npos);
    CHECK(st.message().find("\\xff") != std::string::npos);
    CHECK_FALSE(left);
  }
  {
    TreeBuilder b;
    b.named_tuple("__main__.P\xed\xa0\x80").key("x").int_value(1).end();
    Status st = try_save(std::move(b), dir, &left);
    CHECK(st.code() == StatusCode::kInvalidArgument);
    CHECK_MESSAGE(st.message().find("type name is not valid UTF-8") != std::string::npos,
                  st.message());
    CHECK_FALSE(left);
  }
  {
    TreeBuilder b;
    b.dict().key("x").int_value(1).end().metadata("ok", "1").metadata("k\xc0\x80", "2");
    Status st = try_save(std::move(b), dir, &left);
    CHECK(st.code() == StatusCode::kInvalidArgument);
    CHECK_MESSAGE(st.message().find("metadata entry 1: key is not valid UTF-8") !=
                      std::string::npos, st.message());
    CHECK_FALSE(left);
  }
}

TEST_CASE("save refuses duplicate metadata keys") {
  TempDir dir;
  bool left = true;
  TreeBuilder b;
  b.int_value(1).metadata("step", "1").metadata("step", "2");
  Status st = try_save(std::move(b), dir, &left);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK_MESSAGE(st.message().find("duplicate key \"step\"") != std::string::npos, st.message());
  CHECK_FALSE(left);
}

TEST_CASE("save refuses a big_int that is not canonical; a canonical one round-trips") {
  TempDir dir;
  auto big = [](std::string bytes, int64_t v) {
    Leaf l;
    l.kind = LeafKind::kInt;
    l.big_int = std::move(bytes);
    l.int_value = v;
    return l;
  };
  const std::string two64 = std::string(8, '\0') + "\x01";  // 2^64, 9 bytes: minimal
  for (const auto& [bytes, v] : std::vector<std::pair<std::string, int64_t>>{
           {std::string("\x05") + std::string(8, '\0'), 0},  // fits int64
           {two64 + std::string(1, '\0'), 0},                // an extra byte
           {std::string(9, '\xff'), 0},                      // -1 sign-extended
           {two64, 5}}) {                                    // int_value set too
    bool left = true;
    TreeBuilder b;
    b.leaf(big(bytes, v));
    Status st = try_save(std::move(b), dir, &left);
    CHECK(st.code() == StatusCode::kInvalidArgument);
    CHECK(st.message().find("big_int must be the minimal") != std::string::npos);
    CHECK_FALSE(left);
  }
  TreeBuilder b;
  b.dict().key("big").leaf(big(two64, 0)).end();
  REQUIRE(save(std::move(*std::move(b).finish()), dir.file("ok.jtree")).ok());
  auto r = *Reader::open(dir.file("ok.jtree"));
  CHECK(r->tree().leaves[0].big_int == two64);
}

TEST_CASE("UTF-8 names beyond ASCII round-trip; str key '1' and int key 1 are different keys") {
  TempDir dir;
  TreeBuilder b;
  b.dict()
      .key("gr\xc3\xb6\xc3\x9f" "e").int_value(1)
      .key("\xf0\x9f\x98\x80").int_value(2)
      .key("1").int_value(3)
      .key(int64_t{1}).int_value(4)
      .end()
      .metadata("\xe2\x82\xac", "euro");
  REQUIRE(save(std::move(*std::move(b).finish()), dir.file("u.jtree")).ok());
  auto r = Reader::open(dir.file("u.jtree"));
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  const Tree& t = (*r)->tree();
  CHECK(t.leaves[t.nodes[*t.find("gr\xc3\xb6\xc3\x9f" "e")].leaf].int_value == 1);
  CHECK(t.leaves[t.nodes[*t.find("\xf0\x9f\x98\x80")].leaf].int_value == 2);
  CHECK(t.nodes[3].key == Key::string("1"));
  CHECK(t.nodes[4].key == Key::integer(1));
  CHECK(t.metadata[0].first == "\xe2\x82\xac");
}
