// The chunk grid: counts, boxes, overlap ranges, default chunk shapes.
#include <doctest/doctest.h>

#include "format/chunk_grid.h"

using namespace jtree;
using namespace jtree::format;

TEST_CASE("grid of a 2-d array with clipped edge chunks") {
  ChunkGrid g({10, 7}, {4, 3});
  CHECK(g.grid() == Shape{3, 3});
  CHECK(g.count() == 9);
  Box last = g.box(8);
  CHECK(last.begin == Shape{8, 6});
  CHECK(last.end == Shape{10, 7});
  CHECK(g.elements(8) == 2);
  CHECK(g.elements(0) == 12);
  CHECK(g.coord(5) == Shape{1, 2});
  CHECK(g.linear({1, 2}) == 5);
  Shape lo, hi;
  g.overlapping({{3, 2}, {9, 4}}, lo, hi);
  CHECK(lo == Shape{0, 0});
  CHECK(hi == Shape{3, 2});
}

TEST_CASE("rank 0 and empty arrays") {
  ChunkGrid scalar({}, {});
  CHECK(scalar.count() == 1);
  CHECK(scalar.elements(0) == 1);
  CHECK(grid_chunk_count({0, 5}, {1, 5}) == 0);
  CHECK(grid_chunk_count({5}, {0}) == std::nullopt);
  CHECK(grid_chunk_count({1ull << 40, 1ull << 40}, {1, 1}) == std::nullopt);  // overflow
  CHECK(grid_chunk_count({100, 100}, {1, 1}, 5000) == std::nullopt);         // over the limit
}

TEST_CASE("default chunk shapes are C-order slabs near the target") {
  // 1000 x 1024 float32 = 4 MB per 1000 rows; target 1 MiB -> 256 rows.
  CHECK(default_chunk_shape({1000, 1024}, 32, 1 << 20) == Shape{256, 1024});
  // Fits whole.
  CHECK(default_chunk_shape({10, 10}, 32, 1 << 20) == Shape{10, 10});
  // A row larger than the target: cut the last dimension, leading dims become 1.
  CHECK(default_chunk_shape({4, 3, 1 << 20}, 32, 1 << 20) == Shape{1, 1, 1 << 18});
  // 4-bit types count half bytes.
  CHECK(default_chunk_shape({1 << 22}, 4, 1 << 20) == Shape{1 << 21});
  // Zero-size dims keep a chunk extent of 1.
  CHECK(default_chunk_shape({0, 8}, 32, 1 << 20) == Shape{1, 8});
  CHECK(default_chunk_shape({}, 32, 1 << 20) == Shape{});
}

TEST_CASE("rectilinear grids: boxes, overlap by binary search, bounds encoding") {
  auto ends = split_chunk_bounds({10, 7}, {3, 4, 10, 2, 7});
  REQUIRE(ends.has_value());
  CHECK((*ends)[0] == Shape{3, 4, 10});
  CHECK((*ends)[1] == Shape{2, 7});
  CHECK(join_chunk_bounds(*ends) == Shape{3, 4, 10, 2, 7});
  ChunkGrid g = ChunkGrid::rectilinear({10, 7}, *ends);
  CHECK_FALSE(g.regular());
  CHECK(g.grid() == Shape{3, 2});
  CHECK(g.count() == 6);
  CHECK(g.box(3).begin == Shape{3, 2});  // chunk (1, 1)
  CHECK(g.box(3).end == Shape{4, 7});
  CHECK(g.elements(4) == 12);            // chunk (2, 0): 6 rows x 2 columns
  CHECK(g.max_chunk() == Shape{6, 5});
  CHECK(g.is_boundary(0, 4));
  CHECK_FALSE(g.is_boundary(0, 5));
  Shape lo, hi;
  g.overlapping({{3, 0}, {4, 2}}, lo, hi);  // exactly chunk (1, 0)
  CHECK(lo == Shape{1, 0});
  CHECK(hi == Shape{2, 1});
  g.overlapping({{2, 1}, {10, 3}}, lo, hi);
  CHECK(lo == Shape{0, 0});
  CHECK(hi == Shape{3, 2});
  g.overlapping({{9, 6}, {10, 7}}, lo, hi);
  CHECK(lo == Shape{2, 1});
  CHECK(hi == Shape{3, 2});
  // Every element is in the chunk overlapping() names for its one-element box.
  for (uint64_t i = 0; i < 10; ++i) {
    for (uint64_t j = 0; j < 7; ++j) {
      g.overlapping({{i, j}, {i + 1, j + 1}}, lo, hi);
      const Box b = g.box(g.linear(lo));
      CHECK((hi[0] == lo[0] + 1 && hi[1] == lo[1] + 1));
      CHECK((b.begin[0] <= i && i < b.end[0] && b.begin[1] <= j && j < b.end[1]));
    }
  }
  CHECK_FALSE(split_chunk_bounds({10}, {}).has_value());
  CHECK_FALSE(split_chunk_bounds({10}, {5, 5, 10}).has_value());
  CHECK_FALSE(split_chunk_bounds({10}, {10, 3}).has_value());
  // C-order concatenation: rows cut irregularly, the rest whole.
  CHECK(chunks_concatenate_in_c_order(ChunkGrid::rectilinear({10, 7}, {{3, 4, 10}, {7}})));
  CHECK_FALSE(chunks_concatenate_in_c_order(g));
}
