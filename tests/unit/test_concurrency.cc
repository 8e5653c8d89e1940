// One Reader, many threads: reads stay correct (and clean under ThreadSanitizer).
#include <random>
#include <thread>

#include <doctest/doctest.h>

#include "test_util.h"

using namespace jtree;
using namespace jtree::testing;

TEST_CASE("many threads reading one Reader") {
  TempDir dir;
  const Shape shape{512, 300};
  auto w = bf16_weights(512 * 300, 0.02f, 5);
  auto v = random_array(DType::kInt32, 50000, 6);
  TreeBuilder b;
  LeafOptions small;
  small.chunk_shape = {32, 100};
  b.dict();
  b.key("w").array(DType::kBFloat16, shape, ArrayView{w.data()}, small);
  b.key("v").array(DType::kInt32, {50000}, ArrayView{v.data()});
  b.end();
  WriteOptions wo;
  wo.target_chunk_bytes = 16 * 1024;
  REQUIRE(save(std::move(*std::move(b).finish()), dir.file("c.jtree"), wo).ok());
  auto r = *Reader::open(dir.file("c.jtree"));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 g(t);
      for (int k = 0; k < 50; ++k) {
        uint64_t r0 = g() % 512, r1 = r0 + 1 + g() % (512 - r0);
        std::vector<std::byte> out((r1 - r0) * 300 * 2);
        ReadOptions ro;
        ro.threads = 1 + (k % 3);
        if (!r->read_box(0, {{r0, 0}, {r1, 300}}, out, ro).ok() ||
            std::memcmp(out.data(), w.data() + r0 * 600, out.size()) != 0) {
          failures++;
        }
        std::vector<std::byte> all(50000 * 4);
        if (!r->read(1, all, ro).ok() || all != v) failures++;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(failures.load() == 0);
}
