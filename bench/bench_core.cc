// bench_core: the core library's numbers against the limits set by the machine, in one run.
//
//   bench_core [--dir DIR] [--mib N] [--runs R] [--only raw|compressed|open] [--open-file F]
//
// 1. Raw load: a page-cached file of N MiB (default 1024) of raw float32 chunks, loaded whole
//    with 1 thread and with all threads, against single-thread memcpy of the same size.
// 2. Compressed save and load, one thread: jtree (default options, and filter None) against the
//    zstd library's own ZSTD_compress/ZSTD_decompress at the same level on the same bytes
//    (bf16 weights, normal(0, 0.02)), in the same 4 MiB pieces; and against the same zstd
//    calls with each frame written to / read from a file, the bound of any save or load
//    through one.
// 3. Open + structure of a file of 100,000 leaves (or of the existing file F: --open-file).
//
// Each figure is the median of R runs (default 5) with [min, max]. Files go to DIR (default
// /dev/shm when it exists: page cache without a disk under it).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <thread>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>
#include <zstd.h>

#include "codec/checksum.h"
#include "util/scratch_bytes.h"
#include "jtree/jtree.h"

#include "bench_util.h"

namespace {

using namespace jtree::bench;

void die(const jtree::Status& st) {
  std::fprintf(stderr, "bench_core: %s\n", st.to_string().c_str());
  std::exit(1);
}

void touch(std::vector<std::byte>& v) {
  for (size_t i = 0; i < v.size(); i += 4096) v[i] = std::byte{1};
}

jtree::Tree one_leaf(jtree::DType dtype, uint64_t elements, const std::byte* data,
                     jtree::LeafOptions lo) {
  jtree::TreeBuilder b;
  b.dict().key("x").array(dtype, {elements}, jtree::ArrayView{data}, lo).end();
  auto t = std::move(b).finish();
  if (!t.ok()) die(t.status());
  return std::move(*t);
}

void raw_load(const std::string& dir, uint64_t mib, int runs) {
  const uint64_t bytes = mib << 20;
  std::vector<std::byte> src(bytes), dst(bytes);
  for (size_t i = 0; i < bytes; i += 8) std::memcpy(&src[i], &i, 8);
  touch(dst);
  const std::string path = dir + "/bench_raw.jtree";
  jtree::WriteOptions wo;
  wo.codec = jtree::Codec::kRaw;
  wo.sync = false;
  Stat save = measure(runs, [&] {
    auto st = jtree::save(one_leaf(jtree::DType::kFloat32, bytes / 4, src.data(), {}), path, wo);
    if (!st.ok()) die(st.status());
  });
  Stat mc = measure(runs, [&] { std::memcpy(dst.data(), src.data(), bytes); });
  auto reader = jtree::Reader::open(path);
  if (!reader.ok()) die(reader.status());
  auto load = [&](int threads, bool verify) {
    jtree::ReadOptions ro;
    ro.threads = threads;
    ro.verify_checksums = verify;
    return measure(runs, [&] {
      jtree::Status st = (*reader)->read(0, dst, ro);
      if (!st.ok()) die(st);
    });
  };
  Stat l1 = load(1, true), l1n = load(1, false), ln = load(0, true), lnn = load(0, false);
  if (std::memcmp(dst.data(), src.data(), bytes) != 0) die(jtree::Status::corruption("mismatch"));
  // The storage-read bound: plain pread of the same file into the same buffer, 4 MiB pieces.
  // With `hash`, the bound of a verified load: each 4 MiB piece read in 1 MiB parts, each part
  // hashed (XXH3, as chunk checksums are) right after it lands, as the Reader does.
  auto pread_all = [&](int threads, bool hash) {
    auto file = jtree::open_file_source(path, false);
    if (!file.ok()) die(file.status());
    const uint64_t piece = 4 << 20;
    const uint64_t pieces = (bytes + piece - 1) / piece;
    std::atomic<uint64_t> sink{0};
    return measure(runs, [&] {
      std::vector<std::thread> ts;
      for (int t = 0; t < threads; ++t) {
        ts.emplace_back([&, t] {
          for (uint64_t p = t; p < pieces; p += threads) {
            const uint64_t n = std::min(piece, bytes - p * piece);
            // The segment holds exactly the array's bytes (raw, aligned chunks).
            const uint64_t at = (*reader)->info().segments[0].file_offset + p * piece;
            if (!hash) {
              jtree::ReadRange r{at, std::span(dst).subspan(p * piece, n)};
              (void)(*file)->read(std::span(&r, 1));
              continue;
            }
            jtree::Xxh3Stream h(p);
            for (uint64_t done = 0; done < n; done += 1 << 20) {
              auto part = std::span(dst).subspan(p * piece + done, std::min<uint64_t>(1 << 20, n - done));
              jtree::ReadRange r{at + done, part};
              (void)(*file)->read(std::span(&r, 1));
              h.update(part);
            }
            sink.fetch_xor(h.digest(), std::memory_order_relaxed);  // (used: not optimized away)
          }
        });
      }
      for (auto& th : ts) th.join();
    });
  };
  const int all = static_cast<int>(std::thread::hardware_concurrency());
  Stat p1 = pread_all(1, false), pn = pread_all(all, false);
  Stat h1 = pread_all(1, true), hn = pread_all(all, true);
  const double m = bytes / mc.median;
  std::printf("\n## 1. Raw load of a page-cached %llu MiB file\n\n", (unsigned long long)mib);
  std::printf("| what | throughput | vs memcpy (1 thread) |\n|---|---|---|\n");
  std::printf("| memcpy, 1 thread | %s | 1.00 |\n", gbps(bytes, mc).c_str());
  std::printf("| pread of the file, 1 thread (the storage-read bound) | %s | %.2f |\n",
              gbps(bytes, p1).c_str(), bytes / p1.median / m);
  std::printf("| pread of the file, all threads | %s | %.2f |\n", gbps(bytes, pn).c_str(),
              bytes / pn.median / m);
  std::printf("| pread + XXH3 of each 1 MiB, 1 thread (the verified-load bound) | %s | %.2f |\n",
              gbps(bytes, h1).c_str(), bytes / h1.median / m);
  std::printf("| pread + XXH3 of each 1 MiB, all threads | %s | %.2f |\n", gbps(bytes, hn).c_str(),
              bytes / hn.median / m);
  std::printf("| jtree load, 1 thread, checksums verified | %s | %.2f |\n", gbps(bytes, l1).c_str(),
              bytes / l1.median / m);
  std::printf("| jtree load, 1 thread, checksums skipped | %s | %.2f |\n", gbps(bytes, l1n).c_str(),
              bytes / l1n.median / m);
  std::printf("| jtree load, all threads, checksums verified | %s | %.2f |\n",
              gbps(bytes, ln).c_str(), bytes / ln.median / m);
  std::printf("| jtree load, all threads, checksums skipped | %s | %.2f |\n",
              gbps(bytes, lnn).c_str(), bytes / lnn.median / m);
  std::printf("| jtree save (raw, no fsync), all threads | %s | %.2f |\n", gbps(bytes, save).c_str(),
              bytes / save.median / m);
  std::filesystem::remove(path);
}

void compressed(const std::string& dir, uint64_t mib, int runs, int level) {
  const uint64_t bytes = mib << 20;
  auto data = bf16_weights(bytes / 2, 7);
  std::vector<std::byte> back(bytes);
  touch(back);
  const size_t piece = 4 << 20;
  // zstd itself on the same bytes, in the same pieces, one thread.
  std::vector<jtree::ScratchBytes> frames(bytes / piece);  // resize() does not zero-fill
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  uint64_t zsize = 0;
  Stat zc = measure(runs, [&] {
    zsize = 0;
    for (size_t i = 0; i < frames.size(); ++i) {
      frames[i].resize(ZSTD_compressBound(piece));
      size_t n = ZSTD_compressCCtx(cctx, frames[i].data(), frames[i].size(),
                                   data.data() + i * piece, piece, level);
      frames[i].resize(n);
      zsize += n;
    }
  });
  Stat zd = measure(runs, [&] {
    for (size_t i = 0; i < frames.size(); ++i) {
      ZSTD_decompressDCtx(dctx, back.data() + i * piece, piece, frames[i].data(), frames[i].size());
    }
  });
  // What any compressed save or load through a file pays on top of that: the same zstd calls,
  // with each frame written to a new file that is then renamed over the old one (as a save
  // does), or read back with pread before it is decompressed.
  const std::string zpath = dir + "/bench_zstd_frames";
  std::vector<char> frame(ZSTD_compressBound(piece));
  Stat zcf = measure(runs, [&] {
    const std::string tmp = zpath + ".tmp";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) die(jtree::Status::io_error("cannot create " + tmp));
    for (size_t i = 0; i < frames.size(); ++i) {
      const size_t n = ZSTD_compressCCtx(cctx, frame.data(), frame.size(),
                                         data.data() + i * piece, piece, level);
      if (ZSTD_isError(n) || ::write(fd, frame.data(), n) != static_cast<ssize_t>(n)) {
        die(jtree::Status::io_error("cannot write " + tmp));
      }
    }
    ::close(fd);
    std::filesystem::rename(tmp, zpath);
  });
  Stat zdf = measure(runs, [&] {
    const int fd = ::open(zpath.c_str(), O_RDONLY);
    if (fd < 0) die(jtree::Status::io_error("cannot open " + zpath));
    uint64_t at = 0;
    for (size_t i = 0; i < frames.size(); ++i) {
      const size_t n = frames[i].size();
      if (::pread(fd, frame.data(), n, static_cast<off_t>(at)) != static_cast<ssize_t>(n)) {
        die(jtree::Status::io_error("cannot read " + zpath));
      }
      at += n;
      ZSTD_decompressDCtx(dctx, back.data() + i * piece, piece, frame.data(), n);
    }
    ::close(fd);
  });
  std::filesystem::remove(zpath);
  ZSTD_freeCCtx(cctx);
  ZSTD_freeDCtx(dctx);

  std::printf("\n## 2. Compressed save and load, one thread, %llu MiB of bf16 normal(0, 0.02), "
              "zstd level %d\n\n", (unsigned long long)mib, level);
  std::printf("| what | size / raw | save | load | save vs zstd | load vs zstd |\n");
  std::printf("|---|---|---|---|---|---|\n");
  std::printf("| zstd library (ZSTD_compress / ZSTD_decompress, 4 MiB pieces) | %.3f | %s | %s | "
              "1.00 | 1.00 |\n", (double)zsize / bytes, gbps(bytes, zc).c_str(),
              gbps(bytes, zd).c_str());
  std::printf("| zstd library + write(2) of each frame to a new file / pread(2) of each frame "
              "(the bound of a save and load through a file) | %.3f | %s | %s | %.2f | %.2f |\n",
              (double)zsize / bytes, gbps(bytes, zcf).c_str(), gbps(bytes, zdf).c_str(),
              zc.median / zcf.median, zd.median / zdf.median);
  for (jtree::Filter f : {jtree::Filter::kFloatSplit, jtree::Filter::kNone}) {
    const std::string path = dir + "/bench_zstd.jtree";
    jtree::WriteOptions wo;
    wo.sync = false;
    wo.threads = 1;
    wo.level = level;
    jtree::LeafOptions lo;
    lo.filter = f;
    uint64_t file_size = 0;
    Stat s = measure(runs, [&] {
      auto st = jtree::save(one_leaf(jtree::DType::kBFloat16, bytes / 2, data.data(), lo), path, wo);
      if (!st.ok()) die(st.status());
      file_size = st->file_size;
    });
    auto reader = jtree::Reader::open(path);
    if (!reader.ok()) die(reader.status());
    jtree::ReadOptions ro;
    ro.threads = 1;
    Stat l = measure(runs, [&] {
      jtree::Status st = (*reader)->read(0, back, ro);
      if (!st.ok()) die(st);
    });
    if (back != data) die(jtree::Status::corruption("mismatch"));
    std::printf("| jtree save/load, filter %s (file, checksums, everything) | %.3f | %s | %s | "
                "%.2f | %.2f |\n", std::string(jtree::filter_name(f)).c_str(),
                (double)file_size / bytes, gbps(bytes, s).c_str(), gbps(bytes, l).c_str(),
                zc.median / s.median, zd.median / l.median);
    std::filesystem::remove(path);
  }
}

// A file of 100,000 leaves in dicts of 100: every other one a float32[16] (inline), the others
// Python floats. Returns its size.
uint64_t write_many(const std::string& path) {
  const int n = 100000;
  std::vector<float> small(16, 1.0f);
  jtree::TreeBuilder b;
  b.dict();
  for (int i = 0; i < n / 100; ++i) {
    b.key("layer" + std::to_string(i)).dict();
    for (int j = 0; j < 100; ++j) {
      const std::string k = "p" + std::to_string(j);
      if (j % 2) b.key(k).array(jtree::DType::kFloat32, {16}, jtree::ArrayView{small.data()});
      else b.key(k).float_value(j);
    }
    b.end();
  }
  b.end();
  auto t = std::move(b).finish();
  if (!t.ok()) die(t.status());
  jtree::WriteOptions wo;
  wo.sync = false;
  auto st = jtree::save(std::move(*t), path, wo);
  if (!st.ok()) die(st.status());
  return st->file_size;
}

// Opens `file` (kept), or a generated file of 100,000 leaves in `dir` (removed after).
void open_many(const std::string& dir, int runs, const std::string& file) {
  const std::string path = file.empty() ? dir + "/bench_many.jtree" : file;
  uint64_t file_size = 0;
  if (file.empty()) {
    file_size = write_many(path);
  } else {
    std::error_code ec;
    file_size = std::filesystem::file_size(path, ec);
    if (ec) die(jtree::Status::not_found(path + ": " + ec.message()));
  }
  size_t leaves = 0;
  std::vector<std::shared_ptr<jtree::Reader>> keep;  // freeing is not part of opening
  // Open, then visit the whole structure through the Reader's accessors (every node's kind and
  // key, every leaf's number): what a loader that builds its own tree does.
  Stat s = measure(runs * 2, [&] {
    auto r = jtree::Reader::open(path);
    if (!r.ok()) die(r.status());
    const jtree::Reader& reader = **r;
    size_t found = 0, key_bytes = 0;
    for (uint32_t i = 0; i < reader.num_nodes(); ++i) {
      const jtree::NodeView node = reader.node(i);
      key_bytes += node.key.str.size();
      found += node.kind == jtree::NodeKind::kLeaf;
    }
    // (The generated file's keys are all strings: a walk that read none went wrong.)
    if (found != reader.num_leaves() || (file.empty() && key_bytes == 0)) {
      die(jtree::Status::aborted("the walk found the wrong leaf count"));
    }
    leaves = found;
    keep.push_back(std::move(*r));
  });
  keep.clear();
  // The same, then the whole tree as a jtree::Tree (a struct per node and per leaf).
  Stat full = measure(runs * 2, [&] {
    auto r = jtree::Reader::open(path);
    if (!r.ok()) die(r.status());
    if ((*r)->tree().leaves.size() != leaves) die(jtree::Status::aborted("tree() has the wrong leaf count"));
    keep.push_back(std::move(*r));
  });
  std::printf("\n## 3. Open + structure of a %zu-leaf file (%.1f MiB%s%s)\n\n", leaves,
              file_size / 1048576.0, file.empty() ? "" : ": ", file.c_str());
  std::printf("Reader::open (read, verify and check header and index; validate everything) + "
              "a walk of every node: %.1f ms median [%.1f, %.1f]\n",
              s.median * 1e3, s.min * 1e3, s.max * 1e3);
  std::printf("Reader::open + Reader::tree() (every node and leaf as a struct): "
              "%.1f ms median [%.1f, %.1f]\n", full.median * 1e3, full.min * 1e3,
              full.max * 1e3);
  keep.clear();
  if (file.empty()) std::filesystem::remove(path);
}

}  // namespace

int main(int argc, char** argv) {
  std::string only;  // "" = every section; else raw, compressed or open
  std::string dir = std::filesystem::exists("/dev/shm") ? "/dev/shm" : "/tmp";
  uint64_t mib = 1024;
  int runs = 5;
  std::string open_file;  // section 3 opens this file instead of a generated one
  for (int i = 1; i < argc; i += 2) {
    std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "bench_core: %s needs a value\n", a.c_str());
      return 2;
    }
    if (a == "--dir") dir = argv[i + 1];
    else if (a == "--mib") mib = std::stoull(argv[i + 1]);
    else if (a == "--runs") runs = std::stoi(argv[i + 1]);
    else if (a == "--only") only = argv[i + 1];
    else if (a == "--open-file") open_file = argv[i + 1];
    else {
      std::fprintf(stderr, "bench_core: unknown option %s (see the comment at the top)\n",
                   a.c_str());
      return 2;
    }
  }
  std::printf("# bench_core: %llu MiB, %d runs, files in %s, %u hardware threads\n",
              (unsigned long long)mib, runs, dir.c_str(), std::thread::hardware_concurrency());
  if (only != "" && only != "raw" && only != "compressed" && only != "open") {
    std::fprintf(stderr, "bench_core: --only takes raw, compressed or open\n");
    return 2;
  }
  if (only == "" || only == "raw") raw_load(dir, mib, runs);
  if (only == "" || only == "compressed") compressed(dir, std::min<uint64_t>(mib, 256), runs, 1);
  if (only == "" || only == "open") open_many(dir, runs, open_file);
  return 0;
}
