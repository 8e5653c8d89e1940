// Tests of key-path patterns (jtree/key_path_pattern.h). The comparison with Python's
// fnmatch.fnmatchcase over many random patterns is tests/python/test_keypath_native.py.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "jtree/key_path.h"
#include "jtree/key_path_pattern.h"

namespace jtree {
namespace {

using Path = std::vector<std::string>;

TEST_CASE("glob_match: wildcards, sets and ranges by code point") {
  CHECK(glob_match("*", ""));
  CHECK(glob_match("w*", "weight"));
  CHECK_FALSE(glob_match("w*", "bias"));
  CHECK(glob_match("?", "\xC3\xA9"));  // one code point (é), two bytes
  CHECK_FALSE(glob_match("??", "\xC3\xA9"));
  CHECK(glob_match("[ab]x", "bx"));
  CHECK_FALSE(glob_match("[!ab]x", "bx"));
  CHECK(glob_match("layer[0-3]", "layer2"));
  CHECK_FALSE(glob_match("layer[0-3]", "layer7"));
  CHECK_FALSE(glob_match("[z-a]", "m"));  // an empty range matches nothing
  CHECK(glob_match("[!z-a]", "m"));
  CHECK(glob_match("[ab", "[ab"));        // '[' without ']' is itself
  CHECK(glob_match("[]]", "]"));
  CHECK(glob_match("a*b*c", "a__b__b__c"));
  CHECK_FALSE(glob_match("a*b*c", "a__b__b__"));
}

TEST_CASE("KeyPathPatterns: prefixes, '**', what may be below, unmatched patterns") {
  auto made = KeyPathPatterns::make({"params/*/kernel", "**/bias", "step"});
  REQUIRE(made.ok());
  const KeyPathPatterns& k = *made;
  CHECK(k.size() == 3);
  CHECK(k.selects(Path{"params", "dense", "kernel"}));
  CHECK(k.selects(Path{"params", "dense", "kernel", "0"}));  // below a selected container
  CHECK_FALSE(k.selects(Path{"params", "dense", "w"}));
  CHECK(k.selects(Path{"opt", "0", "bias"}));
  CHECK(k.selects(Path{"bias"}));  // ("**" is also no component)
  std::vector<char> matched(3, 0);
  CHECK(k.selects(Path{"step"}, &matched));
  CHECK(k.selects(Path{"a", "bias"}, &matched));
  CHECK(matched == std::vector<char>{0, 1, 1});
  CHECK(k.may_select_below(Path{"params"}));
  CHECK(k.may_select_below(Path{"anything"}));  // ("**/bias")
  CHECK(k.may_walk_everything());
  auto plain = KeyPathPatterns::make({"params/*/kernel", "step"});
  REQUIRE(plain.ok());
  CHECK_FALSE(plain->may_select_below(Path{"opt"}));
  CHECK(plain->may_select_below(Path{"params", "x"}));
  CHECK_FALSE(plain->may_select_below(Path{"params", "x", "w"}));
  CHECK_FALSE(plain->may_walk_everything());
  auto root = KeyPathPatterns::make({""});
  REQUIRE(root.ok());
  CHECK(root->selects(Path{}));
  CHECK(root->may_walk_everything());
  CHECK(KeyPathPatterns::make({"a\\"}).status().code() == StatusCode::kInvalidArgument);
  auto none = KeyPathPatterns::make({});
  REQUIRE(none.ok());
  CHECK_FALSE(none->selects(Path{"a"}));
  CHECK_FALSE(none->may_select_below(Path{}));
}

// The rule written plainly (every split of every "**" tried), for small cases: a pattern's
// components `p` from `pi` against path[ti...] or a prefix of it.
bool reference(const Path& p, size_t pi, const Path& path, size_t ti) {
  if (pi == p.size()) return true;
  if (p[pi] == "**") {
    for (size_t k = ti; k <= path.size(); ++k) {
      if (reference(p, pi + 1, path, k)) return true;
    }
    return false;
  }
  return ti < path.size() && glob_match(p[pi], path[ti]) && reference(p, pi + 1, path, ti + 1);
}

std::string joined(const Path& p) {
  std::string s;
  for (size_t i = 0; i < p.size(); ++i) s += (i ? "/" : "") + p[i];
  return s;
}

TEST_CASE("KeyPathPatterns: many '**' match as the plain rule does, in polynomial time") {
  // Random patterns of up to 6 components over a small alphabet (several "**" among them)
  // against random paths of up to 7 keys.
  const std::vector<std::string> parts = {"**", "a", "b", "*", "?", "[ab]"};
  const std::vector<std::string> keys = {"a", "b", "c"};
  uint64_t state = 12345;
  auto next = [&](size_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<size_t>((state >> 33) % n);
  };
  int checked = 0, matched = 0;
  for (int round = 0; round < 20000; ++round) {
    Path p(next(7)), path(next(8));
    for (auto& c : p) c = parts[next(parts.size())];
    for (auto& c : path) c = keys[next(keys.size())];
    auto k = KeyPathPatterns::make({joined(p)});
    REQUIRE(k.ok());
    const bool want = reference(p, 0, path, 0);
    CHECK_MESSAGE(k->selects(path) == want, joined(p), " against ", joined(path));
    ++checked;
    matched += want;
  }
  CHECK(matched > 1000);
  CHECK(checked - matched > 1000);
  // 30 "**" against 60 keys that never end in "x": trying every split would not end.
  Path p, deep(60, "a");
  for (int i = 0; i < 30; ++i) {
    p.push_back("**");
    p.push_back("a");
  }
  p.push_back("x");
  auto k = KeyPathPatterns::make({joined(p)});
  REQUIRE(k.ok());
  CHECK_FALSE(k->selects(deep));
  deep.push_back("x");
  CHECK(k->selects(deep));
  CHECK(k->selects(Path{"x"}) == false);  // (each "a" needs a key)
  auto stars = KeyPathPatterns::make({"**/**/**/w"});  // ("**/**" is "**")
  REQUIRE(stars.ok());
  CHECK(stars->selects(Path{"w"}));
  CHECK(stars->selects(Path{"a", "b", "w", "0"}));
  CHECK_FALSE(stars->selects(Path{"a", "b"}));
}

}  // namespace
}  // namespace jtree

TEST_CASE("nearest_paths suggests what a typo meant, as difflib's get_close_matches would") {
  const std::vector<std::string> paths = {"params",          "params/embed",
                                          "params/layer0",   "params/layer0/kernel",
                                          "params/layer0/bias", "opt_state/mu/bias",
                                          "step"};
  // As deep as the typo first.
  CHECK(jtree::nearest_paths("params/embd", paths) ==
        std::vector<std::string>{"params/embed", "params/layer0", "params"});
  CHECK(jtree::nearest_paths("stpe", paths) == std::vector<std::string>{"step"});
  // A typo in the last key finds the paths that end like it (the first path of each key).
  CHECK(jtree::nearest_paths("x/y/z/bais", paths) == std::vector<std::string>{"params/layer0/bias"});
  // ...unless the last key is a pattern, and nothing near: none.
  CHECK(jtree::nearest_paths("x/y/z/ba*", paths).empty());
  CHECK(jtree::nearest_paths("zzzzzz", paths).empty());
  CHECK(jtree::nearest_paths("params/layer0/kernal", paths, 1) ==
        std::vector<std::string>{"params/layer0/kernel"});
  CHECK(jtree::nearest_paths("", {}).empty());
}
