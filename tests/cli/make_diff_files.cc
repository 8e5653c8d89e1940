// Writes the files test_cli_commands.sh compares with `jtree diff`: one base tree and variants
// of it, each differing in one known way. Usage: make_diff_files DIR
//   a.jtree        the base: params/{w float32 [64, 256], emb float32 [1024, 256] in 16
//                  chunks of random values, b float32 [16] (inline), q int8 [4096]}, step 5, name 'run-1',
//                  opt None, blob bytes
//   a_again.jtree  the same tree saved again (other checksum seeds: equal only by reading)
//   value.jtree    emb[3, 7] += 0.5 and q[100] += 3, step 6, name 'run-2'
//   keys.jtree     params/b removed, params/extra added
//   spec.jtree     params/w as float64, params/q of shape [4095], name 'run-10'
//                  (a string of another length: a change of value)
//   meta.jtree     the base tree with other user metadata: run '1' -> '2', note removed,
//                  extra added (the others have the base's: run '1', note 'base')
#include <cstdio>
#include <string>
#include <vector>

#include <jtree/jtree.h>

namespace {

struct Variant {
  bool value = false, keys = false, spec = false, meta = false;
};

jtree::Status write(const std::string& path, const Variant& v) {
  std::vector<float> w(64 * 256), emb(1024 * 256), b(16);
  std::vector<double> w64(64 * 256);
  std::vector<int8_t> q(4096);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 97) * 0.25f, w64[i] = w[i];
  // Random multiples of 1/1024 below 4096: they hardly compress (the file is much larger than
  // what opening it reads), and +0.5 stays exact.
  uint64_t x = 12345;
  for (float& e : emb) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    e = static_cast<float>((x >> 33) % (1u << 22)) / 1024.0f;
  }
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i);
  for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<int8_t>(i % 50);
  if (v.value) {
    emb[3 * 256 + 7] += 0.5f;
    q[100] = static_cast<int8_t>(q[100] + 3);
  }
  jtree::LeafOptions chunked;
  chunked.chunk_shape = {64, 256};  // 16 chunks of 64 KiB
  jtree::TreeBuilder t;
  t.dict();
  t.key("params").dict();
  if (v.spec) {
    t.key("w").array(jtree::DType::kFloat64, {64, 256}, jtree::ArrayView{w64.data()});
  } else {
    t.key("w").array(jtree::DType::kFloat32, {64, 256}, jtree::ArrayView{w.data()});
  }
  t.key("emb").array(jtree::DType::kFloat32, {1024, 256}, jtree::ArrayView{emb.data()}, chunked);
  if (!v.keys) t.key("b").array(jtree::DType::kFloat32, {16}, jtree::ArrayView{b.data()});
  t.key("q").array(jtree::DType::kInt8, {v.spec ? 4095u : 4096u}, jtree::ArrayView{q.data()});
  if (v.keys) t.key("extra").array(jtree::DType::kFloat32, {16}, jtree::ArrayView{b.data()});
  t.end();
  t.key("step").int_value(v.value ? 6 : 5);
  t.key("name").str(v.value ? "run-2" : v.spec ? "run-10" : "run-1");
  t.key("opt").none();
  t.key("blob").bytes(std::string(10000, 'x'));
  t.end();
  if (v.meta) {
    t.metadata("run", "2").metadata("extra", "yes");
  } else {
    t.metadata("run", "1").metadata("note", "base");
  }
  JTREE_ASSIGN_OR_RETURN(jtree::Tree tree, std::move(t).finish());
  return jtree::save(std::move(tree), path).status();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return std::fprintf(stderr, "usage: make_diff_files DIR\n"), 2;
  const std::string dir = argv[1];
  const std::pair<const char*, Variant> files[] = {
      {"a.jtree", {}},
      {"a_again.jtree", {}},
      {"value.jtree", {.value = true}},
      {"keys.jtree", {.keys = true}},
      {"spec.jtree", {.spec = true}},
      {"meta.jtree", {.meta = true}},
  };
  for (const auto& [name, variant] : files) {
    jtree::Status st = write(dir + "/" + name, variant);
    if (!st.ok()) return std::fprintf(stderr, "%s: %s\n", name, st.to_string().c_str()), 1;
  }
  return 0;
}
