// The basics: save a small tree, open it, read a leaf and a slice. Copy from here.
//
//   build/examples/save_and_load /tmp/example.jtree
#include <cstdio>
#include <numeric>
#include <span>
#include <vector>

#include <jtree/jtree.h>

int main(int argc, char** argv) {
  const char* path = argc > 1 ? argv[1] : "example.jtree";

  // Your arrays: jtree reads them where they are (no copy) while saving.
  std::vector<float> w(256 * 128);
  std::iota(w.begin(), w.end(), 0.0f);
  std::vector<int32_t> tokens = {3, 1, 4, 1, 5, 9, 2, 6};

  jtree::TreeBuilder b;
  b.dict();
  b.key("params").dict();
  b.key("w").array(jtree::DType::kFloat32, {256, 128}, jtree::ArrayView{w.data()});
  b.key("tokens").array(jtree::DType::kInt32, {tokens.size()}, jtree::ArrayView{tokens.data()});
  b.end();
  b.key("step").int_value(1000);
  b.key("note").str("hello");
  b.end();
  auto tree = std::move(b).finish();
  if (!tree.ok()) return std::fprintf(stderr, "%s\n", tree.status().to_string().c_str()), 1;

  auto saved = jtree::save(std::move(*tree), path);
  if (!saved.ok()) return std::fprintf(stderr, "%s\n", saved.status().to_string().c_str()), 1;
  std::printf("saved %s: %llu bytes\n", path, (unsigned long long)saved->file_size);

  // Open: reads the structure only.
  auto reader = jtree::Reader::open(path);
  if (!reader.ok()) return std::fprintf(stderr, "%s\n", reader.status().to_string().c_str()), 1;
  const jtree::Reader& r = **reader;
  for (uint32_t i = 0; i < r.tree().leaves.size(); ++i) {
    const jtree::Leaf& l = r.tree().leaves[i];
    std::printf("  %-16s %s\n", r.tree().leaf_path(i).c_str(),
                l.kind == jtree::LeafKind::kArray ? std::string(jtree::dtype_name(l.dtype)).c_str()
                                                  : std::string(jtree::leaf_kind_name(l.kind)).c_str());
  }

  // A whole leaf, into your buffer.
  uint32_t w_leaf = *r.find_leaf("params/w");
  std::vector<float> all(256 * 128);
  jtree::Status st = r.read(w_leaf, std::as_writable_bytes(std::span(all)));
  if (!st.ok()) return std::fprintf(stderr, "%s\n", st.to_string().c_str()), 1;

  // A slice: rows 10..12, columns 0..4 (only the chunks it overlaps are read).
  std::vector<float> part(2 * 4);
  st = r.read_box(w_leaf, {{10, 0}, {12, 4}}, std::as_writable_bytes(std::span(part)));
  if (!st.ok()) return std::fprintf(stderr, "%s\n", st.to_string().c_str()), 1;
  std::printf("w[10:12, 0:4] = %g %g %g %g / %g %g %g %g\n", part[0], part[1], part[2], part[3],
              part[4], part[5], part[6], part[7]);
  std::printf("step = %lld\n", (long long)r.tree().leaves[*r.find_leaf("step")].int_value);
  return 0;
}
