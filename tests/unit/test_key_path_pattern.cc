// Tests of key-path patterns (jtree/key_path_pattern.h). The comparison with Python's
// fnmatch.fnmatchcase over many random patterns is tests/python/test_keypath_native.py.
#include <doctest/doctest.h>

#include <string>
#include <vector>

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

}  // namespace
}  // namespace jtree
