// One Reader, many threads: reads stay correct (and clean under ThreadSanitizer).
#include <random>
#include <thread>

#include <doctest/doctest.h>

#include "read/read_scratch.h"
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

TEST_CASE("after a read on many workers the process keeps at most the scratch bound") {
  // Each worker decodes into a scratch set (util/scratch_cache.h). Kept per thread, as they
  // were, 64 workers kept 64 sets for the life of the process; now the sets outlive the call
  // only up to ReadScratchCache::kKeptBytes, and the next call reuses them.
  TempDir dir;
  constexpr uint64_t kRows = 2048, kCols = 8192;  // 32 MiB of bf16 in 16 chunks of 2 MiB
  auto w = bf16_weights(kRows * kCols, 0.02f, 11);
  TreeBuilder b;
  LeafOptions lo;
  lo.chunk_shape = {128, kCols};
  b.dict();
  b.key("w").array(DType::kBFloat16, {kRows, kCols}, ArrayView{w.data()}, lo);
  b.end();
  REQUIRE(save(std::move(*std::move(b).finish()), dir.file("s.jtree")).ok());
  auto r = *Reader::open(dir.file("s.jtree"));
  REQUIRE(r->chunk(0).encoding == ChunkEncoding::kPlanes);  // decoded through the scratch sets
  ReadScratchCache& cache = ReadScratchCache::shared();
  ReadOptions many;
  many.threads = 64;
  // Half the columns: every chunk is decoded into a set's buffer, then copied out (a set:
  // the fetched chunk, its decoded planes, the decoded chunk, ~5.5 MiB).
  const uint64_t half = kCols / 2;
  std::vector<std::byte> out(kRows * half * 2);
  size_t kept_during = 0;
  {
    ReadScratchCache::Use caller(cache);  // (keeps every set until this ends, to look at them)
    REQUIRE(r->read_box(0, {{0, 0}, {kRows, half}}, out, many).ok());
    kept_during = cache.kept_bytes();
  }
  for (uint64_t row = 0; row < kRows; row += 97) {
    REQUIRE(std::memcmp(out.data() + row * half * 2, w.data() + row * kCols * 2, half * 2) == 0);
  }
  MESSAGE("sets made " << cache.sets_made() << ", " << kept_during << " bytes kept before the "
          "trim, " << cache.kept_sets() << " sets and " << cache.kept_bytes() << " bytes after");
  CHECK(cache.kept_sets() >= 1);
  CHECK(cache.kept_bytes() <= ReadScratchCache::kKeptBytes);
  if (kept_during > ReadScratchCache::kKeptBytes) CHECK(cache.kept_bytes() < kept_during);
  // One worker: the kept sets serve it, none is made.
  const size_t made = cache.sets_made();
  ReadOptions one;
  one.threads = 1;
  std::vector<std::byte> all(kRows * kCols * 2);
  REQUIRE(r->read(0, all, one).ok());
  CHECK(all == w);
  CHECK(cache.sets_made() == made);
}
