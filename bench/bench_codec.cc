// Codec micro-benchmark: single-thread compression / decompression throughput and ratio of
// plain zstd on whole chunks versus jtree's encode_chunk / decode_chunk, on the same bytes.
//
//   bench_codec [total MiB per dataset = 256] [runs = 5] [chunk KiB = 4096]
//
// Small chunks (say 64) show what the encoder's shared plane choices save: the rows
// "choices shared" encode each chunk as its own leaf whose planes take the choices of the
// dtype's earlier leaves (a save of many small leaves), the others decide every chunk alone.
//
// Throughputs are raw (uncompressed) bytes per second of one core; each figure is the median
// of `runs` passes over the whole dataset, with the min and max. Decoding writes into a
// dataset-sized output buffer (as a load does), not into one cache-hot chunk.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <zstd.h>

#include "codec/byte_planes.h"
#include "codec/chunk_codec.h"
#include "../tests/synthetic_weights.h"

namespace {

using jtree::ChunkEncoding;
using jtree::Codec;
using jtree::DType;
using jtree::Filter;
using jtree::codec::ChunkFormat;

using Bytes = std::vector<std::byte>;
size_t g_chunk = size_t{4} << 20;  // (set from the command line)

double now_s() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

struct Stats {
  double median = 0, min = 0, max = 0;
};

Stats stats_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

// ---- data --------------------------------------------------------------------------------------

Bytes bf16_normal(size_t bytes, float sigma, uint64_t seed) {
  return jtree::synthetic::bf16_normal(bytes / 2, sigma, seed);
}

Bytes fp32_normal(size_t bytes, float sigma, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  Bytes b(bytes);
  for (size_t i = 0; i < bytes / 4; ++i) {
    const float v = normal(rng);
    std::memcpy(b.data() + 4 * i, &v, 4);
  }
  return b;
}

// Token ids of a 50257-word vocabulary with a Zipf-like (1/rank) frequency: what a tokenized
// text dataset stored as int32 looks like.
Bytes int32_tokens(size_t bytes, uint64_t seed) {
  constexpr int kVocab = 50257;
  std::vector<double> cdf(kVocab);
  double sum = 0;
  for (int r = 0; r < kVocab; ++r) cdf[r] = (sum += 1.0 / (r + 1.0));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, sum);
  // A fixed random rank -> id map, so frequent tokens are not all small numbers.
  std::vector<int32_t> id(kVocab);
  for (int r = 0; r < kVocab; ++r) id[r] = r;
  std::shuffle(id.begin(), id.end(), rng);
  Bytes b(bytes);
  for (size_t i = 0; i < bytes / 4; ++i) {
    const auto rank = std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin();
    std::memcpy(b.data() + 4 * i, &id[std::min<size_t>(rank, kVocab - 1)], 4);
  }
  return b;
}

// (8 + H(exponent byte)) / 16: the order-0 bound for bf16 with the sign + mantissa byte raw.
double bf16_entropy_bound(const Bytes& b) {
  std::vector<double> hist(256);
  for (size_t i = 0; i < b.size() / 2; ++i) {
    uint16_t v;
    std::memcpy(&v, b.data() + 2 * i, 2);
    hist[static_cast<uint16_t>((v << 1) | (v >> 15)) >> 8] += 1;
  }
  double h = 0;
  const double n = static_cast<double>(b.size() / 2);
  for (double c : hist) {
    if (c > 0) h -= c / n * std::log2(c / n);
  }
  return (8 + h) / 16;
}

// ---- methods ----------------------------------------------------------------------------------

struct Chunk {
  ChunkEncoding encoding = ChunkEncoding::kRaw;
  jtree::ScratchBytes stored;  // empty for kRaw chunks of the jtree codec (the raw bytes are the stored bytes)
};

struct Method {
  std::string name;
  std::function<size_t(const std::byte*, size_t, Chunk&)> compress;  // -> stored size
  std::function<void(const std::byte*, const Chunk&, std::byte*, size_t)> decompress;
};

void fail(const std::string& what) {
  std::fprintf(stderr, "bench_codec: %s\n", what.c_str());
  std::exit(1);
}

Method plain_zstd(int level) {
  auto cctx = std::shared_ptr<ZSTD_CCtx>(ZSTD_createCCtx(), ZSTD_freeCCtx);
  auto dctx = std::shared_ptr<ZSTD_DCtx>(ZSTD_createDCtx(), ZSTD_freeDCtx);
  Method m;
  m.name = "zstd-" + std::to_string(level);
  m.compress = [cctx, level](const std::byte* src, size_t n, Chunk& c) {
    c.stored.resize(ZSTD_compressBound(n));
    const size_t r = ZSTD_compressCCtx(cctx.get(), c.stored.data(), c.stored.size(), src, n, level);
    if (ZSTD_isError(r)) fail(ZSTD_getErrorName(r));
    c.stored.resize(r);
    return r;
  };
  m.decompress = [dctx](const std::byte*, const Chunk& c, std::byte* dst, size_t n) {
    const size_t r = ZSTD_decompressDCtx(dctx.get(), dst, n, c.stored.data(), c.stored.size());
    if (r != n) fail("zstd decompression failed");
  };
  return m;
}

Method jtree_codec(const std::string& name, ChunkFormat format, bool shared_choices = false) {
  auto scratch = std::make_shared<jtree::ScratchBytes>();
  using Kind = std::array<std::atomic<uint8_t>, 16>;
  auto kind = shared_choices ? std::make_shared<Kind>() : nullptr;
  Method m;
  m.name = name;
  m.compress = [format, scratch, kind](const std::byte* src, size_t n, Chunk& c) {
    jtree::codec::PlaneChoices leaf;  // each chunk its own leaf...
    leaf.kind = kind.get();           // ...of a kind shared with the others
    ChunkFormat f = format;
    if (kind) f.choices = &leaf;
    auto r = jtree::codec::encode_chunk({src, n}, f, c.stored, *scratch);
    if (!r.ok()) fail(r.status().to_string());
    c.encoding = *r;
    return c.encoding == ChunkEncoding::kRaw ? n : c.stored.size();
  };
  m.decompress = [format, scratch](const std::byte* raw, const Chunk& c, std::byte* dst,
                                   size_t n) {
    const std::span<const std::byte> stored =
        c.encoding == ChunkEncoding::kRaw ? std::span<const std::byte>(raw, n)
                                          : std::span<const std::byte>(c.stored);
    const auto s = jtree::codec::decode_chunk(stored, c.encoding, format, {dst, n}, *scratch);
    if (!s.ok()) fail(s.to_string());
  };
  return m;
}

struct Row {
  std::string method;
  double ratio = 0;
  Stats comp, decomp;  // MB/s
};

Row run(const Method& m, const Bytes& data, int runs) {
  const size_t chunks = data.size() / g_chunk;
  std::vector<Chunk> out(chunks);
  Bytes back(data.size());
  std::vector<double> comp, decomp;
  size_t stored = 0;
  for (int r = 0; r < runs; ++r) {
    stored = 0;
    double t0 = now_s();
    for (size_t c = 0; c < chunks; ++c) {
      stored += m.compress(data.data() + c * g_chunk, g_chunk, out[c]);
    }
    double t1 = now_s();
    comp.push_back(static_cast<double>(data.size()) / (t1 - t0) / 1e6);
    t0 = now_s();
    for (size_t c = 0; c < chunks; ++c) {
      m.decompress(data.data() + c * g_chunk, out[c], back.data() + c * g_chunk, g_chunk);
    }
    t1 = now_s();
    decomp.push_back(static_cast<double>(data.size()) / (t1 - t0) / 1e6);
  }
  if (back != data) fail(m.name + ": round trip mismatch");
  return {m.name, static_cast<double>(stored) / static_cast<double>(data.size()), stats_of(comp),
          stats_of(decomp)};
}

void print_table(const std::string& title, const std::vector<Row>& rows) {
  std::printf("\n### %s\n\n", title.c_str());
  std::printf("| method | ratio | compress MB/s median [min, max] |"
              " decompress MB/s median [min, max] | size vs zstd-1 | compress speed vs zstd-1 |"
              " decompress speed vs zstd-1 |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  const Row& base = rows.front();
  for (const Row& r : rows) {
    std::printf("| %s | %.4f | %.0f [%.0f, %.0f] | %.0f [%.0f, %.0f] | %.3f | %.2fx | %.2fx |\n",
                r.method.c_str(), r.ratio, r.comp.median, r.comp.min, r.comp.max, r.decomp.median,
                r.decomp.min, r.decomp.max, r.ratio / base.ratio, r.comp.median / base.comp.median,
                r.decomp.median / base.decomp.median);
  }
  std::fflush(stdout);
}

// ---- kernels ----------------------------------------------------------------------------------

void bench_kernels(int runs) {
  std::printf("\n### kernels on one 4 MiB chunk (cache-warm), GB/s median [min, max]\n\n");
  std::printf("| kernel | GB/s |\n|---|---|\n");
  const Bytes src = bf16_normal(g_chunk, 0.02f, 1);
  Bytes dst(g_chunk);
  auto time_it = [&](const char* name, const std::function<void()>& f) {
    std::vector<double> v;
    for (int r = 0; r < std::max(runs, 5) * 4; ++r) {
      const double t0 = now_s();
      f();
      v.push_back(static_cast<double>(g_chunk) / (now_s() - t0) / 1e9);
    }
    const Stats s = stats_of(v);
    std::printf("| %s | %.1f [%.1f, %.1f] |\n", name, s.median, s.min, s.max);
  };
  for (size_t w : {2, 4, 8, 16}) {
    const std::string sh = "shuffle W=" + std::to_string(w);
    const std::string un = "unshuffle W=" + std::to_string(w);
    time_it(sh.c_str(), [&] { jtree::codec::shuffle(src, dst, w); });
    time_it(un.c_str(), [&] { jtree::codec::unshuffle(src, dst, w); });
  }
  for (size_t c : {2, 4, 8}) {
    const std::string name = "rotate_right_1 component=" + std::to_string(c);
    time_it(name.c_str(), [&] { jtree::codec::rotate_right_1(dst, c); });
  }
  time_it("memcpy", [&] { std::memcpy(dst.data(), src.data(), g_chunk); });
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 256;
  const int runs = argc > 2 ? std::atoi(argv[2]) : 5;
  if (argc > 3) g_chunk = std::max<size_t>(std::strtoull(argv[3], nullptr, 10), 1) << 10;
  const size_t total = std::max<size_t>((std::max<size_t>(mib, 4) << 20) / g_chunk, 1) * g_chunk;
  std::printf("bench_codec: %zu MiB per dataset in %zu KiB chunks, %d runs, one thread, zstd %s\n",
              total >> 20, g_chunk >> 10, runs, ZSTD_versionString());

  bench_kernels(runs);

  const Method z1 = plain_zstd(1), z3 = plain_zstd(3);
  {
    const Bytes d = bf16_normal(total, 0.02f, 42);
    std::printf("\nbf16 normal(0, 0.02): order-0 entropy bound (8 + H(exponent byte)) / 16 ="
                " %.4f\n",
                bf16_entropy_bound(d));
    print_table("bf16 normal(0, 0.02)",
                {run(z1, d, runs), run(z3, d, runs),
                 run(jtree_codec("None+zstd-1",
                                 {DType::kBFloat16, Filter::kNone, Codec::kZstd, 1}), d, runs),
                 run(jtree_codec("FloatSplit+zstd-1", {DType::kBFloat16, Filter::kFloatSplit,
                                                       Codec::kZstd, 1}), d, runs),
                 run(jtree_codec("FloatSplit+zstd-1, choices shared",
                                 {DType::kBFloat16, Filter::kFloatSplit, Codec::kZstd, 1}, true),
                     d, runs),
                 run(jtree_codec("Shuffle+zstd-1",
                                 {DType::kBFloat16, Filter::kShuffle, Codec::kZstd, 1}), d, runs)});
  }
  {
    const Bytes d = fp32_normal(total, 1e-3f, 43);
    print_table("fp32 normal(0, 1e-3)",
                {run(z1, d, runs), run(z3, d, runs),
                 run(jtree_codec("FloatSplit+zstd-1", {DType::kFloat32, Filter::kFloatSplit,
                                                       Codec::kZstd, 1}), d, runs),
                 run(jtree_codec("FloatSplit+zstd-1, choices shared",
                                 {DType::kFloat32, Filter::kFloatSplit, Codec::kZstd, 1}, true),
                     d, runs),
                 run(jtree_codec("Shuffle+zstd-1",
                                 {DType::kFloat32, Filter::kShuffle, Codec::kZstd, 1}), d, runs)});
  }
  {
    const Bytes d = int32_tokens(total, 44);
    print_table("int32 tokens (Zipf over 50257 ids)",
                {run(z1, d, runs), run(z3, d, runs),
                 run(jtree_codec("None+zstd-1", {DType::kInt32, Filter::kNone, Codec::kZstd, 1}),
                     d, runs),
                 run(jtree_codec("Shuffle+zstd-1",
                                 {DType::kInt32, Filter::kShuffle, Codec::kZstd, 1}), d, runs)});
  }
  {
    const Bytes d(total);
    print_table("zeros (int32)",
                {run(z1, d, runs), run(z3, d, runs),
                 run(jtree_codec("None+zstd-1", {DType::kInt32, Filter::kNone, Codec::kZstd, 1}),
                     d, runs),
                 run(jtree_codec("Shuffle+zstd-1",
                                 {DType::kInt32, Filter::kShuffle, Codec::kZstd, 1}), d, runs)});
  }
  return 0;
}
