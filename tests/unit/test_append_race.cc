// Appends without a race (issue 19): an append pinned to the generation it was planned
// against (WriteOptions::append_base) is refused, with nothing written, when another writer
// appended in between; appends to one file are serialized by a lock.
#include <thread>

#include <doctest/doctest.h>

#include "test_util.h"

using namespace jtree;
using namespace jtree::testing;

namespace {

Tree tree_with(const std::string& key, const std::vector<std::byte>& data) {
  TreeBuilder b;
  b.dict();
  b.key(key).array(DType::kUInt8, {data.size()}, ArrayView{data.data()});
  b.end();
  return std::move(*std::move(b).finish());
}

AppendBase base_of(const std::string& path) {
  auto r = Reader::open(path);
  REQUIRE(r.ok());
  return {(*r)->info().generation, (*r)->info().footer_offset, ""};
}

}  // namespace

TEST_CASE("an append planned against an older generation is refused, nothing written") {
  TempDir dir;
  const std::string path = dir.file("race.jtree");
  const auto a = random_bytes(100000, 1), b = random_bytes(70000, 2), c = random_bytes(50000, 3);
  REQUIRE(save(tree_with("a", a), path).ok());
  // Writer 1 plans against generation 0...
  WriteOptions mine;
  mine.append_base = base_of(path);
  CHECK(mine.append_base->generation == 0);
  // ...writer 2 appends first...
  auto other = append(path, tree_with("b", b));
  REQUIRE_MESSAGE(other.ok(), other.status().to_string());
  const auto after_other = read_file(path);
  // ...so writer 1's append, planned against generation 0, is refused.
  auto st = append(path, tree_with("c", c), mine);
  REQUIRE_FALSE(st.ok());
  CHECK(st.status().code() == StatusCode::kAborted);
  CHECK(st.status().message().find("changed since this append was planned") != std::string::npos);
  CHECK(st.status().message().find("now generation 1") != std::string::npos);
  // The file is byte for byte writer 2's.
  CHECK(read_file(path) == after_other);
  auto r = Reader::open(path);
  REQUIRE(r.ok());
  CHECK((*r)->info().generation == 1);
  std::vector<std::byte> got(b.size());
  REQUIRE((*r)->read(*(*r)->find_leaf("b"), got).ok());
  CHECK(got == b);
  // Planned again against the new generation, it goes through.
  mine.append_base = base_of(path);
  auto again = append(path, tree_with("c", c), mine);
  REQUIRE_MESSAGE(again.ok(), again.status().to_string());
  CHECK(again->generation == 2);
  // A base whose footer differs (a file replaced by another with the same generation) too.
  mine.append_base = AppendBase{2, 12345, ""};
  CHECK(append(path, tree_with("a", a), mine).status().code() == StatusCode::kAborted);
}

TEST_CASE("appends to one file from several threads are serialized, none lost") {
  TempDir dir;
  const std::string path = dir.file("many.jtree");
  const auto a = random_bytes(1000, 4);
  REQUIRE(save(tree_with("a", a), path).ok());
  constexpr int kWriters = 6;
  std::vector<std::thread> threads;
  std::vector<Status> results(kWriters);
  for (int i = 0; i < kWriters; ++i) {
    threads.emplace_back([&, i] {
      const auto data = random_bytes(200000, 10 + i);
      results[i] = append(path, tree_with("w" + std::to_string(i), data)).status();
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& s : results) CHECK_MESSAGE(s.ok(), s.to_string());
  // Every append landed on top of the one before: the newest generation is the sixth, and
  // every older generation is still intact behind it (verify accounts for every byte).
  auto r = Reader::open(path);
  REQUIRE(r.ok());
  CHECK((*r)->info().generation == kWriters);
  auto rep = (*r)->verify();
  REQUIRE(rep.ok());
  CHECK(rep->ok());
}
