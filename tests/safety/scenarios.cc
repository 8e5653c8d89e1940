#include "scenarios.h"

#include <filesystem>
#include <memory>

#include <doctest/doctest.h>

#include "test_util.h"

namespace jtree::safety {
namespace {

using jtree::testing::random_array;
using jtree::testing::TempDir;

// The arrays the scenarios write, shared by the closures that write them.
struct Data {
  std::vector<std::byte> a = random_array(DType::kFloat32, 2048, 21);
  std::vector<std::byte> b = random_array(DType::kBFloat16, 1500, 22);
  std::vector<std::byte> c = random_array(DType::kInt32, 700, 23);
  std::vector<std::byte> x = random_array(DType::kFloat32, 8 * 64, 24);
};

Tree finish(TreeBuilder& b) {
  auto t = std::move(b).finish();
  REQUIRE_MESSAGE(t.ok(), t.status().to_string());
  return std::move(*t);
}

// Version 1 of the checkpoint: a, b and a step counter.
Tree tree_v1(const Data& d) {
  TreeBuilder b;
  b.dict();
  b.key("a").array(DType::kFloat32, {2048}, ArrayView{d.a.data()});
  b.key("b").array(DType::kBFloat16, {1500}, ArrayView{d.b.data()});
  b.key("step").int_value(1);
  b.end();
  return finish(b);
}

// Version 2: a with other data (b shifted), c added, a string.
Tree tree_v2(const Data& d) {
  TreeBuilder b;
  b.dict();
  b.key("a").array(DType::kFloat32, {750}, ArrayView{d.b.data()});  // b's 3000 bytes
  b.key("c").array(DType::kInt32, {700}, ArrayView{d.c.data()});
  b.key("step").int_value(2);
  b.key("note").str("version 2");
  b.end();
  return finish(b);
}

// Generation 1 on top of tree_v1: a kept, b replaced by c, step changed.
Tree append_tree(const Data& d, const Reader& base) {
  TreeBuilder b;
  b.dict();
  b.key("a").leaf(Leaf::reused(*base.find_leaf("a")));
  b.key("b").array(DType::kInt32, {700}, ArrayView{d.c.data()});
  b.key("step").int_value(2);
  b.end();
  return finish(b);
}

Status do_append(const Data& d, const std::string& path) {
  OpenOptions oo;
  oo.use_mmap = false;
  auto r = Reader::open(path, oo);
  if (!r.ok()) return r.status();
  auto st = append(path, append_tree(d, **r), scenario_write_options());
  return st.status();
}

// One process's segment of a two-process save of x (rows split in two).
Tree segment_tree(const Data& d, uint32_t k) {
  TreeBuilder b;
  b.dict();
  Leaf l;
  l.kind = LeafKind::kArray;
  l.dtype = DType::kFloat32;
  l.shape = {8, 64};
  l.storage = Storage::kChunked;
  auto in = std::make_shared<LeafInput>();
  in->shard_shape = {4, 64};
  in->shards.emplace();
  in->shards->push_back({Box{{4ull * k, 0}, {4ull * k + 4, 64}}, ArrayView{d.x.data() + k * 4 * 64 * 4}});
  l.input = std::move(in);
  b.key("x").leaf(std::move(l));
  b.key("step").int_value(3);
  b.end();
  return finish(b);
}

Status ok_or(const Result<WriteStats>& r) { return r.status(); }

// Fills in `start` (and `before`) by building the state in a scratch directory, and `after` /
// `after_files` by running the operation there once without faults.
void complete(Scenario& s, const std::function<void(const std::string& dir)>& build) {
  {
    TempDir dir;
    build(dir.path().string());
    s.start = dir_state(dir.path().string());
  }
  TempDir dir;
  restore_dir(dir.path().string(), s.start);
  const std::string target = dir.file(kTarget);
  if (std::filesystem::exists(target)) s.before = snapshot_file(target);
  const Status st = s.run(dir.path().string());
  REQUIRE_MESSAGE(st.ok(), s.name << ": " << st.to_string());
  s.after = snapshot_file(target);
  REQUIRE(s.after.status.ok());
  for (const auto& [name, bytes] : dir_state(dir.path().string())) {
    if (name != kTarget) s.after_files.push_back(name);
  }
}

}  // namespace

WriteOptions scenario_write_options() {
  WriteOptions wo;
  wo.threads = 1;
  wo.target_chunk_bytes = 2048;
  wo.inline_threshold = 256;
  wo.sync = false;
  return wo;
}

Snapshot snapshot_file(const std::string& path) {
  OpenOptions oo;
  oo.use_mmap = false;
  auto r = Reader::open(path, oo);
  if (!r.ok()) {
    Snapshot s;
    s.status = r.status();
    return s;
  }
  return snapshot(**r, single_thread());
}

std::vector<Scenario> scenarios() {
  auto d = std::make_shared<const Data>();
  std::vector<Scenario> out;

  Scenario fresh;
  fresh.name = "save to a new file";
  fresh.run = [d](const std::string& dir) {
    return ok_or(save(tree_v2(*d), dir + "/" + kTarget, scenario_write_options()));
  };
  complete(fresh, [](const std::string&) {});
  out.push_back(std::move(fresh));

  Scenario over;
  over.name = "save over an existing file";
  over.run = [d](const std::string& dir) {
    return ok_or(save(tree_v2(*d), dir + "/" + kTarget, scenario_write_options()));
  };
  complete(over, [d](const std::string& dir) {
    REQUIRE(save(tree_v1(*d), dir + "/" + kTarget, scenario_write_options()).ok());
  });
  out.push_back(std::move(over));

  Scenario app;
  app.name = "append";
  app.patches_slots = true;
  app.run = [d](const std::string& dir) { return do_append(*d, dir + "/" + kTarget); };
  complete(app, [d](const std::string& dir) {
    REQUIRE(save(tree_v1(*d), dir + "/" + kTarget, scenario_write_options()).ok());
  });
  out.push_back(std::move(app));

  Scenario app2;
  app2.name = "second append";  // slots already in use: step 1 has nothing to write
  app2.patches_slots = true;
  app2.run = [d](const std::string& dir) { return do_append(*d, dir + "/" + kTarget); };
  complete(app2, [d](const std::string& dir) {
    REQUIRE(save(tree_v1(*d), dir + "/" + kTarget, scenario_write_options()).ok());
    REQUIRE(do_append(*d, dir + "/" + kTarget).ok());
  });
  out.push_back(std::move(app2));

  Scenario compaction;
  compaction.name = "compact in place";
  compaction.run = [](const std::string& dir) {
    return ok_or(compact(dir + "/" + kTarget, {}, scenario_write_options()));
  };
  complete(compaction, [d](const std::string& dir) {
    REQUIRE(save(tree_v1(*d), dir + "/" + kTarget, scenario_write_options()).ok());
    REQUIRE(do_append(*d, dir + "/" + kTarget).ok());
  });
  out.push_back(std::move(compaction));

  Scenario commit;
  commit.name = "commit segments over an existing file";
  commit.run = [](const std::string& dir) {
    CommitOptions co;
    co.write = scenario_write_options();
    return ok_or(commit_segments(dir + "/" + kTarget, 2, co));
  };
  complete(commit, [d](const std::string& dir) {
    const std::string target = dir + "/" + kTarget;
    REQUIRE(save(tree_v1(*d), target, scenario_write_options()).ok());
    for (uint32_t k = 0; k < 2; ++k) {
      REQUIRE(save_segment(segment_tree(*d, k), target, {k, 2, 5}, scenario_write_options()).ok());
    }
  });
  out.push_back(std::move(commit));
  return out;
}

}  // namespace jtree::safety
