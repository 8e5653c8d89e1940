// bench_remote — remote reads against loopback nginx (bench/remote.md has the commands and
// the results).
//
//   bench_remote WWW_DIR BASE_URL [--leaves N] [--leaf-mib M] [--runs R] [--raw]
//
// Writes WWW_DIR/bench_remote.jtree (N leaves of M MiB of bf16 weights; zstd unless --raw)
// if it is not there, then measures, median of R runs:
//  1. one leaf out of the file over HTTP: bytes transferred against the budget (the leaf's
//     stored bytes + header + index + 64 KiB) and the round trips before the data request;
//  2. the whole file: local load vs remote load throughput (raw bytes per second).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "io/remote/remote_source.h"
#include "jtree/jtree.h"

using namespace jtree;
using Clock = std::chrono::steady_clock;

namespace {

double secs(Clock::time_point a) { return std::chrono::duration<double>(Clock::now() - a).count(); }

// CPU seconds this process used so far (all threads, user + system).
double cpu_seconds() {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

[[noreturn]] void die(const Status& st) {
  std::fprintf(stderr, "bench_remote: %s\n", st.to_string().c_str());
  std::exit(1);
}

// bf16 values of normal(0, 0.02) weights: what checkpoints hold.
void fill_weights(std::byte* out, size_t n_values, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> d(0.0f, 0.02f);
  for (size_t i = 0; i < n_values; ++i) {
    const float f = d(g);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    const uint16_t b = static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
    std::memcpy(out + 2 * i, &b, 2);
  }
}

void make_file(const std::string& path, int leaves, uint64_t leaf_bytes, bool raw) {
  const uint64_t values = leaf_bytes / 2;
  TreeBuilder b;
  b.dict();
  b.key("params").dict();
  for (int i = 0; i < leaves; ++i) {
    FillFn fill = [i](const Box& box, std::span<std::byte> dst) {
      fill_weights(dst.data(), dst.size() / 2, static_cast<uint64_t>(i) * 1000003 + box.begin[0]);
      return Status::success();
    };
    b.key("layer" + std::to_string(i)).array(DType::kBFloat16, {values}, fill);
  }
  b.end();
  b.end();
  WriteOptions wo;
  if (raw) wo.codec = Codec::kRaw;
  auto t = std::move(b).finish();
  if (!t.ok()) die(t.status());
  const auto start = Clock::now();
  auto st = save(std::move(*t), path, wo);
  if (!st.ok()) die(st.status());
  std::printf("wrote %s: %.2f GiB stored, %d leaves, %.1f s\n", path.c_str(),
              static_cast<double>(st->file_size) / (1 << 30), leaves, secs(start));
}

// Reads every leaf; returns raw bytes per second, and adds the CPU seconds it took to `cpu`.
double load_all(const Reader& r, std::vector<std::vector<std::byte>>& bufs,
                const ReadOptions& ro, std::vector<double>* cpu = nullptr) {
  const Tree& t = r.tree();
  std::vector<ReadRequest> reqs;
  for (uint32_t i = 0; i < t.leaves.size(); ++i) reqs.push_back({i, std::nullopt, bufs[i]});
  const double cpu0 = cpu_seconds();
  const auto start = Clock::now();
  Status st = r.read_many(reqs, ro);
  const double s = secs(start);
  if (cpu != nullptr) cpu->push_back(cpu_seconds() - cpu0);
  if (!st.ok()) die(st);
  uint64_t bytes = 0;
  for (auto& b : bufs) bytes += b.size();
  return static_cast<double>(bytes) / s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_remote WWW_DIR BASE_URL [--leaves N] [--leaf-mib M] "
                         "[--runs R] [--raw]\n");
    return 2;
  }
  const std::string www = argv[1], base = argv[2];
  int leaves = 1000, runs = 5;
  uint64_t leaf_mib = 1;
  bool raw = false;
  ReadOptions ro;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--leaves" && i + 1 < argc) leaves = std::stoi(argv[++i]);
    else if (a == "--leaf-mib" && i + 1 < argc) leaf_mib = std::stoull(argv[++i]);
    else if (a == "--runs" && i + 1 < argc) runs = std::stoi(argv[++i]);
    else if (a == "--raw") raw = true;
    else if (a == "--fetch-mib" && i + 1 < argc) ro.max_fetch_bytes = std::stoull(argv[++i]) << 20;
  }
  const std::string name = std::string("bench_remote") + (raw ? "_raw" : "") + ".jtree";
  const std::string path = www + "/" + name;
  const std::string url = base + "/" + name;
  if (!std::filesystem::exists(path)) make_file(path, leaves, leaf_mib << 20, raw);

  // ---- 1. one leaf --------------------------------------------------------------------------
  std::vector<double> bytes_runs, open_s, leaf_s;
  uint64_t budget = 0, round_trips = 0, requests = 0;
  for (int run = 0; run < runs; ++run) {
    const auto t0 = Clock::now();
    auto r = Reader::open(url);
    if (!r.ok()) die(r.status());
    open_s.push_back(secs(t0));
    const auto* rs = dynamic_cast<const remote::RemoteSource*>((*r)->source().get());
    round_trips = rs->detailed_stats().round_trips;
    const uint32_t leaf = *(*r)->find_leaf("params/layer" + std::to_string(leaves / 2));
    const Leaf& l = (*r)->tree().leaves[leaf];
    std::vector<std::byte> dst(l.memory_bytes());
    const auto t1 = Clock::now();
    Status st = (*r)->read(leaf, dst);
    if (!st.ok()) die(st);
    leaf_s.push_back(secs(t1));
    uint64_t stored = 0;
    for (uint64_t c = 0; c < Tree::chunk_count(l); ++c) stored += (*r)->chunk(l.first_chunk + c).stored_size;
    const FileInfo& info = (*r)->info();
    budget = stored + info.header_size + info.index_size + 64 * 1024;
    const IoStats io = (*r)->io_stats();
    bytes_runs.push_back(static_cast<double>(io.bytes_read));
    requests = io.read_requests;
    if (run == 0) {
      std::printf("\none leaf of %s (%.1f MiB stored, %llu chunk(s)); header %llu B, index %llu B\n",
                  url.c_str(), static_cast<double>(stored) / (1 << 20),
                  static_cast<unsigned long long>(Tree::chunk_count(l)),
                  static_cast<unsigned long long>(info.header_size),
                  static_cast<unsigned long long>(info.index_size));
    }
  }
  const double transferred = median(bytes_runs);
  std::printf("  transferred %.0f B, budget %llu B (leaf + header + index + 64 KiB): %s\n",
              transferred, static_cast<unsigned long long>(budget),
              transferred <= static_cast<double>(budget) ? "within" : "OVER");
  std::printf("  round trips before the data request: %llu; requests in all: %llu\n",
              static_cast<unsigned long long>(round_trips), static_cast<unsigned long long>(requests));
  std::printf("  open %.2f ms, leaf %.2f ms (medians of %d)\n", median(open_s) * 1e3,
              median(leaf_s) * 1e3, runs);

  // ---- 2. the whole file, local vs remote ----------------------------------------------------
  auto local = Reader::open(path);
  if (!local.ok()) die(local.status());
  std::vector<std::vector<std::byte>> bufs;
  for (const Leaf& l : (*local)->tree().leaves) bufs.emplace_back(l.memory_bytes());
  load_all(**local, bufs, ro);  // warm-up: page cache, buffers touched
  std::vector<double> local_bps, remote_bps, local_cpu, remote_cpu;
  for (int run = 0; run < runs; ++run) {
    local_bps.push_back(load_all(**local, bufs, ro, &local_cpu));
    auto remote_reader = Reader::open(url);
    if (!remote_reader.ok()) die(remote_reader.status());
    remote_bps.push_back(load_all(**remote_reader, bufs, ro, &remote_cpu));
  }
  const double lo = median(local_bps), re = median(remote_bps);
  std::printf("\nwhole file (%.2f GiB raw): local %.2f GB/s, remote %.2f GB/s: %.0f%% of local "
              "(medians of %d)\n",
              static_cast<double>(leaves * (leaf_mib << 20)) / (1 << 30), lo / 1e9, re / 1e9,
              100 * re / lo, runs);
  std::printf("  CPU of this process per load: local %.2f s, remote %.2f s (medians; nginx's own "
              "CPU not counted); load average %.1f\n",
              median(local_cpu), median(remote_cpu), [] {
                double l[1] = {0};
                return getloadavg(l, 1) == 1 ? l[0] : 0.0;
              }());
  return 0;
}
