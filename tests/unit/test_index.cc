// resolve_index (jtree/slice.h) and the key-path rule (jtree/key_path.h): the C++ owners of
// the decisions the jtree command and the Python package share (tests/python/test_rules.py
// checks that Python gets the same answers through the native module).
#include <doctest/doctest.h>

#include <climits>

#include "jtree/key_path.h"
#include "jtree/slice.h"

using namespace jtree;
using K = IndexItem::Kind;

namespace {

IndexItem at(int64_t i) { return {K::kInt, i, std::nullopt, std::nullopt}; }
IndexItem sl(std::optional<int64_t> a, std::optional<int64_t> b,
            std::optional<int64_t> c = std::nullopt) {
  return {K::kSlice, a, b, c};
}
const IndexItem kEll{K::kEllipsis, std::nullopt, std::nullopt, std::nullopt};
const IndexItem kNew{K::kNewAxis, std::nullopt, std::nullopt, std::nullopt};

// The positions an axis picks, in the array's coordinates.
std::vector<uint64_t> picked(const ResolvedIndex& r, size_t axis, size_t dim) {
  std::vector<uint64_t> out;
  const IndexAxis& a = r.axes[axis];
  for (uint64_t k = 0; k < a.count; ++k) {
    out.push_back(r.box.begin[dim] + a.offset + static_cast<uint64_t>(a.step * int64_t(k)));
  }
  return out;
}

}  // namespace

TEST_CASE("resolve_index: ints, slices, steps, '...' and new axes") {
  const Shape shape{10, 20, 30};
  auto r = resolve_index(std::vector<IndexItem>{at(-1), sl(2, -3), kEll, kNew}, shape);
  REQUIRE(r.ok());
  CHECK(r->box.begin == Shape{9, 2, 0});
  CHECK(r->box.end == Shape{10, 17, 30});
  CHECK(r->shape == Shape{15, 30, 1});
  CHECK(r->is_box() == false);  // (a new axis)
  REQUIRE(r->axes.size() == 4);
  CHECK(r->axes[0].kind == K::kInt);
  CHECK(r->axes[3].kind == K::kNewAxis);

  // Backwards: 8, 5, 2 of 10 -> the box [2, 9), picked from offset 6 with step -3.
  r = resolve_index(std::vector<IndexItem>{sl(std::nullopt, std::nullopt, -3)}, Shape{10});
  REQUIRE(r.ok());
  CHECK(r->box.begin == Shape{0});  // 9, 6, 3, 0
  CHECK(picked(*r, 0, 0) == std::vector<uint64_t>{9, 6, 3, 0});
  r = resolve_index(std::vector<IndexItem>{sl(8, 0, -3)}, Shape{10});
  REQUIRE(r.ok());
  CHECK(r->box.begin == Shape{2});
  CHECK(r->box.end == Shape{9});
  CHECK(picked(*r, 0, 0) == std::vector<uint64_t>{8, 5, 2});

  // Clamping, empty results, the whole array.
  r = resolve_index(std::vector<IndexItem>{sl(-100, 100), sl(5, 2)}, Shape{4, 8});
  REQUIRE(r.ok());
  CHECK(r->box.begin == Shape{0, 0});
  CHECK(r->box.end == Shape{4, 0});
  CHECK(r->shape == Shape{4, 0});
  CHECK(r->is_box());
  r = resolve_index({}, Shape{3, 4});
  REQUIRE(r.ok());
  CHECK(r->box.end == Shape{3, 4});
  CHECK(r->shape == Shape{3, 4});

  // Saturated bounds and extents past 2^63 (an empty array's other dimension).
  r = resolve_index(std::vector<IndexItem>{sl(INT64_MIN, INT64_MAX), at(-1)},
                    Shape{0, UINT64_MAX});
  REQUIRE(r.ok());
  CHECK(r->box.begin == Shape{0, UINT64_MAX - 1});
  CHECK(r->box.end == Shape{0, UINT64_MAX});
}

TEST_CASE("resolve_index: refusals say what and where") {
  auto msg = [](std::vector<IndexItem> index, Shape shape) {
    auto r = resolve_index(index, shape);
    REQUIRE(!r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    return r.status().message();
  };
  CHECK(msg({at(10)}, {10}) == "index 10 is out of bounds for axis 0 with size 10");
  CHECK(msg({sl(0, 1), at(-4)}, {1, 3}) == "index -4 is out of bounds for axis 1 with size 3");
  CHECK(msg({at(0), at(0)}, {3}) == "too many indices: 2 for an array of rank 1");
  CHECK(msg({kEll, kEll}, {3}) == "an index can only have a single ellipsis ('...')");
  CHECK(msg({sl(0, 1, 0)}, {3}) == "slice step cannot be zero");
  CHECK(msg({at(0)}, {}) == "too many indices: 1 for an array of rank 0");
}

TEST_CASE("key paths: every escape written and split back") {
  const std::vector<std::string> keys = {"a/b", "c\\d", "\\", "/", "", "e\\/f", "plain", "é/ü"};
  std::string path;
  bool first = true;
  for (const std::string& k : keys) {
    append_path_component(path, KeyView{Key::Kind::kStr, k, 0}, 0, first);
    first = false;
  }
  append_path_component(path, KeyView{Key::Kind::kInt, {}, -7}, 0, false);
  append_path_component(path, KeyView{}, 3, false);
  CHECK(path == "a\\/b/c\\\\d/\\\\/\\//\\e/e\\\\\\/f/plain/é\\/ü/-7/3");
  auto parts = split_path(path);
  REQUIRE(parts.ok());
  std::vector<std::string> want = keys;
  want.push_back("-7");
  want.push_back("3");
  CHECK(*parts == want);
  auto bad = split_path("a/b\\");
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK(bad.status().message().find("unfinished escape") != std::string::npos);
  CHECK(split_path("")->empty());
}

TEST_CASE("key paths: the empty string key is \\e, at the top and below, not the root's \"\"") {
  const KeyView empty{Key::Kind::kStr, "", 0};
  std::string top;
  append_path_component(top, empty, 0, true);
  CHECK(top == "\\e");
  CHECK(*split_path(top) == std::vector<std::string>{""});
  CHECK(split_path("")->empty());  // the root
  std::string nested;
  append_path_component(nested, KeyView{Key::Kind::kStr, "a", 0}, 0, true);
  append_path_component(nested, empty, 0, false);
  append_path_component(nested, empty, 0, false);
  CHECK(nested == "a/\\e/\\e");
  CHECK(*split_path(nested) == std::vector<std::string>{"a", "", ""});
  // Other keys' paths are unchanged; a key "e" is "e", and "\\" + "e" only from the empty key.
  std::string e;
  append_path_component(e, KeyView{Key::Kind::kStr, "e", 0}, 0, true);
  append_path_component(e, KeyView{Key::Kind::kStr, "\\e", 0}, 0, false);
  CHECK(e == "e/\\\\e");
  CHECK(*split_path(e) == std::vector<std::string>{"e", "\\e"});
  // The spellings of before still split as they did.
  CHECK(*split_path("/a") == std::vector<std::string>{"", "a"});
  CHECK(*split_path("a/") == std::vector<std::string>{"a", ""});
}
