// The jtree demo: write a transformer-shaped checkpoint, then read back one layer and a slice
// of the embedding, reporting what was read against the file's size.
//
//   jtree_demo write ckpt.jtree [--layers N]   # save (a few hundred MB by default)
//   jtree ls ckpt.jtree                        # look at it
//   jtree_demo load ckpt.jtree                 # partial loads, checked bit-exact
//
// The values are generated from fixed seeds, so `load` regenerates what it expects and checks
// every byte it reads.
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "jtree/jtree.h"

namespace {

using Clock = std::chrono::steady_clock;

// Model shape: a small GPT-like decoder.
constexpr uint64_t kVocab = 32000, kModel = 1024, kHidden = 4096;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string mib(uint64_t n) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f MiB", n / 1048576.0);
  return b;
}

// xoshiro256** with a Box-Muller normal: fast, deterministic per seed.
struct Rng {
  uint64_t s[4];
  explicit Rng(uint64_t seed) {
    for (auto& x : s) {
      seed += 0x9e3779b97f4a7c15ull;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      x = z ^ (z >> 31);
    }
  }
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t next() {
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0], s[3] ^= s[1], s[1] ^= s[2], s[0] ^= s[3], s[2] ^= t, s[3] = rotl(s[3], 45);
    return r;
  }
  double uniform() { return ((next() >> 11) + 0.5) * 0x1.0p-53; }
  void normals(float* out, size_t n, float std) {
    for (size_t i = 0; i < n; i += 2) {
      double r = std::sqrt(-2 * std::log(uniform())), a = 6.283185307179586 * uniform();
      out[i] = static_cast<float>(r * std::cos(a)) * std;
      if (i + 1 < n) out[i + 1] = static_cast<float>(r * std::sin(a)) * std;
    }
  }
};

uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

// The leaves of the checkpoint, with their generated data.
struct Array {
  std::string path;
  jtree::DType dtype;
  jtree::Shape shape;
  std::vector<std::byte> data;
};

// Weights like trained ones: normal(0, std), some rows with outliers; fp32 Adam moments.
Array weight(const std::string& path, jtree::Shape shape, uint64_t seed, bool outliers) {
  uint64_t n = 1;
  for (auto d : shape) n *= d;
  std::vector<float> f(n);
  Rng rng(seed);
  rng.normals(f.data(), n, 0.02f);
  if (outliers) {
    for (uint64_t i = 0; i < n; i += 997) f[i] *= 40.0f;  // a sparse set of large weights
  }
  Array a{path, jtree::DType::kBFloat16, std::move(shape), std::vector<std::byte>(n * 2)};
  auto* out = reinterpret_cast<uint16_t*>(a.data.data());
  for (uint64_t i = 0; i < n; ++i) out[i] = to_bf16(f[i]);
  return a;
}

Array moment(const std::string& path, jtree::Shape shape, uint64_t seed, bool second) {
  uint64_t n = 1;
  for (auto d : shape) n *= d;
  Array a{path, jtree::DType::kFloat32, std::move(shape), std::vector<std::byte>(n * 4)};
  auto* f = reinterpret_cast<float*>(a.data.data());
  Rng rng(seed);
  rng.normals(f, n, second ? 1e-4f : 1e-3f);
  if (second) {
    for (uint64_t i = 0; i < n; ++i) f[i] = f[i] * f[i];  // nu: squared gradients
  }
  return a;
}

std::vector<Array> make_arrays(int layers) {
  std::vector<Array> out;
  out.push_back(weight("params/embed", {kVocab, kModel}, 1, false));
  for (int l = 0; l < layers; ++l) {
    const std::string p = "params/layers/" + std::to_string(l) + "/";
    const uint64_t s = 100 + 10 * l;
    out.push_back(weight(p + "attn/qkv", {kModel, 3 * kModel}, s + 1, l % 3 == 1));
    out.push_back(weight(p + "attn/out", {kModel, kModel}, s + 2, false));
    out.push_back(weight(p + "mlp/up", {kModel, kHidden}, s + 3, l % 2 == 0));
    out.push_back(weight(p + "mlp/down", {kHidden, kModel}, s + 4, false));
  }
  // Adam moments of the first layer's MLP (fp32): optimizer state is most of a checkpoint.
  for (int l = 0; l < std::min(layers, 2); ++l) {
    const std::string p = "opt_state/layers/" + std::to_string(l) + "/mlp/up/";
    out.push_back(moment(p + "mu", {kModel, kHidden}, 900 + l, false));
    out.push_back(moment(p + "nu", {kModel, kHidden}, 950 + l, true));
  }
  return out;
}

// Builds the tree: nested dicts from the paths, plus a step counter and a config dict.
jtree::Tree make_tree(const std::vector<Array>& arrays, int layers) {
  jtree::TreeBuilder b;
  b.dict();
  b.key("step").int_value(125000);
  b.key("config").dict();
  b.key("model").str("demo-gpt");
  b.key("vocab").int_value(kVocab);
  b.key("d_model").int_value(kModel);
  b.key("layers").int_value(layers);
  b.key("learning_rate").float_value(3e-4);
  b.key("dtype").str("bfloat16");
  b.end();
  // Group arrays by their path prefixes (arrays are listed in tree order).
  std::vector<std::string> open;
  for (const Array& a : arrays) {
    std::vector<std::string> parts;
    size_t pos = 0;
    while (true) {
      size_t slash = a.path.find('/', pos);
      parts.push_back(a.path.substr(pos, slash - pos));
      if (slash == std::string::npos) break;
      pos = slash + 1;
    }
    size_t common = 0;
    while (common < open.size() && common + 1 < parts.size() && open[common] == parts[common]) {
      ++common;
    }
    while (open.size() > common) {
      b.end();
      open.pop_back();
    }
    for (size_t i = common; i + 1 < parts.size(); ++i) {
      // "layers" holds a list of layer dicts.
      const bool index = !parts[i].empty() && std::isdigit(static_cast<unsigned char>(parts[i][0]));
      if (!index) b.key(parts[i]);
      if (parts[i] == "layers") b.list();
      else b.dict();
      open.push_back(parts[i]);
    }
    // The embedding is read by rows: smaller chunks make row slices cheaper.
    jtree::LeafOptions lo;
    if (a.path == "params/embed") lo.target_chunk_bytes = 512 * 1024;
    b.key(parts.back()).array(a.dtype, a.shape, jtree::ArrayView{a.data.data()}, lo);
  }
  while (!open.empty()) {
    b.end();
    open.pop_back();
  }
  b.end();
  auto tree = std::move(b).finish();
  if (!tree.ok()) {
    std::fprintf(stderr, "demo: %s\n", tree.status().to_string().c_str());
    std::exit(1);
  }
  return std::move(*tree);
}

int cmd_write(const std::string& path, int layers) {
  auto t0 = Clock::now();
  std::vector<Array> arrays = make_arrays(layers);
  uint64_t raw = 0;
  for (const Array& a : arrays) raw += a.data.size();
  std::printf("generated %zu arrays, %s, in %.1f s\n", arrays.size(), mib(raw).c_str(),
              seconds_since(t0));
  jtree::WriteOptions wo;  // defaults: zstd-1, FloatSplit for floats, 4 MiB chunks
  if (std::getenv("JTREE_DEMO_NO_SYNC")) wo.sync = false;
  int last_pct = -1;
  wo.progress = [&](uint64_t done, uint64_t total) {
    int pct = total ? static_cast<int>(100 * done / total) : 100;
    if (pct / 10 != last_pct / 10) {
      std::printf("  saving... %3d%%\n", pct);
      std::fflush(stdout);
      last_pct = pct;
    }
    return true;
  };
  t0 = Clock::now();
  auto st = jtree::save(make_tree(arrays, layers), path, wo);
  if (!st.ok()) {
    std::fprintf(stderr, "demo: %s\n", st.status().to_string().c_str());
    return 1;
  }
  const double s = seconds_since(t0);
  std::printf("saved %s: %s -> %s (ratio %.3f) in %.2f s, %.0f MB/s, %llu chunks\n",
              path.c_str(), mib(st->raw_bytes).c_str(), mib(st->file_size).c_str(),
              static_cast<double>(st->file_size) / st->raw_bytes, s, st->raw_bytes / s / 1e6,
              static_cast<unsigned long long>(st->chunks));
  return 0;
}

int cmd_load(const std::string& path, int layers) {
  auto t0 = Clock::now();
  auto reader = jtree::Reader::open(path);
  if (!reader.ok()) {
    std::fprintf(stderr, "demo: %s\n", reader.status().to_string().c_str());
    return 1;
  }
  const jtree::Reader& r = **reader;
  const uint64_t file_size = r.info().file_size;
  const jtree::IoStats open_io = r.io_stats();
  std::printf("opened %s (%s) in %.1f ms: %llu reads, %s read for the structure of %zu leaves\n",
              path.c_str(), mib(file_size).c_str(), seconds_since(t0) * 1e3,
              static_cast<unsigned long long>(open_io.read_requests),
              mib(open_io.bytes_read).c_str(), static_cast<size_t>(r.num_leaves()));

  // Expected data, regenerated from the seeds.
  std::vector<Array> expected = make_arrays(layers);
  auto find = [&](const std::string& p) -> const Array& {
    for (const Array& a : expected)
      if (a.path == p) return a;
    std::fprintf(stderr, "demo: no array %s\n", p.c_str());
    std::exit(1);
  };

  // 1. One whole layer: all its leaves in one read_many call.
  const int layer = layers / 2;
  const std::string prefix = "params/layers/" + std::to_string(layer) + "/";
  std::vector<std::string> names = {"attn/qkv", "attn/out", "mlp/up", "mlp/down"};
  std::vector<std::vector<std::byte>> bufs;
  std::vector<jtree::ReadRequest> reqs;
  for (const std::string& n : names) {
    auto leaf = r.find_leaf(prefix + n);
    if (!leaf.ok()) {
      std::fprintf(stderr, "demo: %s\n", leaf.status().to_string().c_str());
      return 1;
    }
    bufs.emplace_back(r.leaf(*leaf).memory_bytes());
    reqs.push_back({*leaf, std::nullopt, {}});
  }
  for (size_t i = 0; i < reqs.size(); ++i) reqs[i].dst = bufs[i];
  jtree::IoStats before = r.io_stats();
  t0 = Clock::now();
  jtree::Status st = r.read_many(reqs);
  double s = seconds_since(t0);
  if (!st.ok()) {
    std::fprintf(stderr, "demo: %s\n", st.to_string().c_str());
    return 1;
  }
  uint64_t layer_bytes = 0;
  bool exact = true;
  for (size_t i = 0; i < names.size(); ++i) {
    layer_bytes += bufs[i].size();
    exact &= bufs[i] == find(prefix + names[i]).data;
  }
  uint64_t got = r.io_stats().bytes_read - before.bytes_read;
  std::printf("layer %d (%zu leaves, %s in memory): read %s of the file's %s (%.1f%%) in "
              "%.3f s, %.0f MB/s decoded; %s\n",
              layer, names.size(), mib(layer_bytes).c_str(), mib(got).c_str(),
              mib(file_size).c_str(), 100.0 * got / file_size, s, layer_bytes / s / 1e6,
              exact ? "bit-exact" : "MISMATCH");

  // 2. A slice of the embedding: rows 1000..1100.
  auto emb = r.find_leaf("params/embed");
  if (!emb.ok()) return 1;
  const uint64_t rows0 = 1000, rows1 = 1100;
  std::vector<std::byte> rows((rows1 - rows0) * kModel * 2);
  before = r.io_stats();
  t0 = Clock::now();
  st = r.read_box(*emb, {{rows0, 0}, {rows1, kModel}}, rows);
  s = seconds_since(t0);
  if (!st.ok()) {
    std::fprintf(stderr, "demo: %s\n", st.to_string().c_str());
    return 1;
  }
  got = r.io_stats().bytes_read - before.bytes_read;
  const Array& e = find("params/embed");
  const bool slice_exact =
      std::memcmp(rows.data(), e.data.data() + rows0 * kModel * 2, rows.size()) == 0;
  std::printf("embedding rows [%llu:%llu] (%s): read %s of the file's %s (%.2f%%) in %.1f ms; "
              "%s\n",
              static_cast<unsigned long long>(rows0), static_cast<unsigned long long>(rows1),
              mib(rows.size()).c_str(), mib(got).c_str(), mib(file_size).c_str(),
              100.0 * got / file_size, s * 1e3, slice_exact ? "bit-exact" : "MISMATCH");

  // 3. Everything, for the throughput of a full load.
  std::vector<std::vector<std::byte>> all;
  std::vector<jtree::ReadRequest> all_reqs;
  const jtree::Tree& t = r.tree();
  for (uint32_t l = 0; l < t.leaves.size(); ++l) {
    if (t.leaves[l].kind != jtree::LeafKind::kArray) continue;
    all.emplace_back(t.leaves[l].memory_bytes());
    all_reqs.push_back({l, std::nullopt, {}});
  }
  uint64_t total = 0;
  for (size_t i = 0; i < all.size(); ++i) all_reqs[i].dst = all[i], total += all[i].size();
  t0 = Clock::now();
  st = r.read_many(all_reqs);
  s = seconds_since(t0);
  if (!st.ok()) {
    std::fprintf(stderr, "demo: %s\n", st.to_string().c_str());
    return 1;
  }
  std::printf("full load: %s in %.2f s, %.0f MB/s (checksums verified, %d threads)\n",
              mib(total).c_str(), s, total / s / 1e6,
              static_cast<int>(std::thread::hardware_concurrency()));
  return exact && slice_exact ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: jtree_demo write|load FILE [--layers N]\n");
    return 2;
  }
  int layers = 8;
  for (int i = 3; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--layers") layers = std::atoi(argv[i + 1]);
  }
  const std::string cmd = argv[1], path = argv[2];
  if (cmd == "write") return cmd_write(path, layers);
  if (cmd == "load") return cmd_load(path, layers);
  std::fprintf(stderr, "usage: jtree_demo write|load FILE [--layers N]\n");
  return 2;
}
