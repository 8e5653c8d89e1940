// Many processes, one file — here simulated with threads. Each "process" holds a quarter of
// the rows of a matrix (its shard), saves its segment, and after a barrier process 0 commits
// the single file. With MPI or JAX, use the job's own rank, size and barrier instead.
//
//   build/examples/multihost_save /tmp/sharded.jtree
//   build/examples/multihost_save /tmp/sharded.jtree --no-commit   # segments only; then
//   jtree commit /tmp/sharded.jtree                                   # (as after a dead job)
#include <barrier>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include <jtree/jtree.h>

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "sharded.jtree";
  const bool commit = !(argc > 2 && std::strcmp(argv[2], "--no-commit") == 0);
  constexpr uint32_t kProcs = 4;
  constexpr uint64_t kRows = 1024, kCols = 256, kShardRows = kRows / kProcs;
  const uint64_t save_id = 0x5eed;  // in a real job: a random number broadcast by rank 0
  std::barrier barrier(kProcs);
  std::vector<jtree::Status> results(kProcs);

  auto process = [&](uint32_t rank) {
    // This process's shard: rows [rank * 256, (rank + 1) * 256) of a 1024 x 256 matrix.
    std::vector<float> shard(kShardRows * kCols, static_cast<float>(rank));
    auto input = std::make_shared<jtree::LeafInput>();
    input->shard_shape = {kShardRows, kCols};
    input->shards = std::vector<jtree::Shard>{
        {jtree::Box{{rank * kShardRows, 0}, {(rank + 1) * kShardRows, kCols}},
         jtree::ArrayView{shard.data()}}};
    jtree::Leaf w;
    w.kind = jtree::LeafKind::kArray;
    w.dtype = jtree::DType::kFloat32;
    w.shape = {kRows, kCols};
    w.storage = jtree::Storage::kChunked;
    w.input = input;

    jtree::TreeBuilder b;
    b.dict().key("w").leaf(w).key("step").int_value(7).end();  // "step": written by rank 0
    auto tree = std::move(b).finish();
    jtree::Status st = tree.status();
    if (st.ok()) {
      st = jtree::save_segment(std::move(*tree), path, {rank, kProcs, save_id}).status();
    }
    barrier.arrive_and_wait();  // every segment is written
    if (commit && rank == 0 && st.ok()) st = jtree::commit_segments(path, kProcs).status();
    results[rank] = st;
  };
  std::vector<std::thread> threads;
  for (uint32_t rank = 0; rank < kProcs; ++rank) threads.emplace_back(process, rank);
  for (auto& t : threads) t.join();
  for (const auto& st : results) {
    if (!st.ok()) return std::fprintf(stderr, "%s\n", st.to_string().c_str()), 1;
  }
  if (!commit) return std::printf("wrote %u segments of %s\n", kProcs, path.c_str()), 0;

  auto r = jtree::Reader::open(path);
  if (!r.ok()) return std::fprintf(stderr, "%s\n", r.status().to_string().c_str()), 1;
  float v = -1;
  (void)(*r)->read_box(*(*r)->find_leaf("w"), {{700, 0}, {701, 1}},
                       std::as_writable_bytes(std::span(&v, 1)));
  std::printf("committed %s from %u segments; w[700, 0] = %g (written by rank %d)\n", path.c_str(),
              kProcs, v, static_cast<int>(700 / kShardRows));
  return 0;
}
