// bench_multihost: many processes, one file (the numbers of issue 7), with real processes.
//
//  1. Aggregate write throughput. One bf16 matrix of trained-like weights (normal(0, 0.02)),
//     saved by P forked processes, each writing the rows it holds as a segment, then one commit;
//     against one process saving the whole matrix with save(). Same bytes, same options, same
//     run; the time runs from the start signal to the committed file.
//  2. Commit cost against data size. Four processes' segments of growing size, committed
//     locally (copy_file_range) and, with --s3, on S3 (UploadPartCopy): the commit's time and
//     the bytes the committing process sent (WriteStats::io).
//
//   bench_multihost [--dir DIR] [--mib 256] [--runs 3] [--procs 1,2,4]
//                   [--commit-mib 64,256,1024] [--s3 s3://bucket/prefix] [--s3-mib 16,64,128]
//
// bench/multihost.sh starts an S3 server (Ceph RGW, as the tests do) and runs both parts.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <thread>

#include <jtree/jtree.h>

#include "bench_util.h"

using namespace jtree;
using namespace jtree::bench;

namespace {

constexpr uint64_t kCols = 4096;  // bf16: 8 KiB per row

void die(const Status& st) {
  std::fprintf(stderr, "bench_multihost: %s\n", st.to_string().c_str());
  std::exit(1);
}

std::vector<uint64_t> parse_list(const std::string& s) {
  std::vector<uint64_t> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoull(item));
  return out;
}

// Rows [first, first + n) of the benchmark matrix: bf16 normal(0, 0.02), each row from its
// own seed, so that every writer can make exactly the rows it holds.
std::vector<std::byte> matrix_rows(uint64_t first, uint64_t n, uint64_t seed) {
  std::vector<std::byte> out;
  out.reserve(n * kCols * 2);
  for (uint64_t r = first; r < first + n; ++r) {
    const auto row = bf16_weights(kCols, seed * 1000003 + r);
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

// The tree process `rank` of `procs` saves: the rows it holds of a [rows, kCols] matrix
// (`data` holds just those), or (procs == 0) the whole matrix as a plain leaf.
Tree matrix_tree(const std::byte* data, uint64_t rows, uint32_t rank, uint32_t procs) {
  auto in = std::make_shared<LeafInput>();
  if (procs == 0) {
    in->source = ArrayView{data};
  } else {
    const uint64_t per = rows / procs;
    in->shard_shape = {per, kCols};
    in->shards =
        std::vector<Shard>{{Box{{rank * per, 0}, {(rank + 1) * per, kCols}}, ArrayView{data}}};
  }
  Leaf w;
  w.kind = LeafKind::kArray;
  w.dtype = DType::kBFloat16;
  w.shape = {rows, kCols};
  w.storage = Storage::kChunked;
  w.input = std::move(in);
  TreeBuilder b;
  b.dict().key("w").leaf(w).key("step").int_value(1000).end();
  auto t = std::move(b).finish();
  if (!t.ok()) die(t.status());
  return std::move(*t);
}

// What the writing processes of one run do.
struct Job {
  uint32_t procs = 0;  // 0: one process, save() of the whole matrix
  uint64_t rows = 0, seed = 0;
  std::string target;
  Codec codec = Codec::kZstd;
  int threads = 0;
};

// A writer, run as "bench_multihost --writer RANK PROCS ROWS SEED TARGET CODEC THREADS
// READY_FD GO_FD": makes its rows, says it is ready, waits for the start, writes, exits 0 on
// success.
int writer_main(char** argv) {
  const auto rank = static_cast<uint32_t>(std::stoul(argv[0]));
  Job job;
  job.procs = static_cast<uint32_t>(std::stoul(argv[1]));
  job.rows = std::stoull(argv[2]);
  job.seed = std::stoull(argv[3]);
  job.target = argv[4];
  job.codec = std::string(argv[5]) == "raw" ? Codec::kRaw : Codec::kZstd;
  job.threads = std::stoi(argv[6]);
  const int ready = std::stoi(argv[7]), go = std::stoi(argv[8]);
  const uint64_t per = job.procs == 0 ? job.rows : job.rows / job.procs;
  const auto data = matrix_rows(rank * per, per, job.seed);
  char c = 'r';
  if (write(ready, &c, 1) != 1 || read(go, &c, 1) != 1) return 2;
  WriteOptions wo;
  wo.codec = job.codec;
  wo.threads = job.threads;
  Tree tree = matrix_tree(data.data(), job.rows, rank, job.procs);
  auto st = job.procs == 0 ? save(std::move(tree), job.target, wo)
                           : save_segment(std::move(tree), job.target, {rank, job.procs, 42}, wo);
  if (!st.ok()) std::fprintf(stderr, "writer %u: %s\n", rank, st.status().to_string().c_str());
  return st.ok() ? 0 : 1;
}

// Starts the job's writers as fresh processes (fork + exec of this program: a forked copy of
// a process with threads could inherit a lock held by one of them), waits until each has made
// its data, and returns a function that starts them all and waits for their success.
std::function<void()> start_writers(const Job& job) {
  int ready[2], go[2];
  if (pipe(ready) != 0 || pipe(go) != 0) die(Status::io_error("pipe"));
  const uint32_t n = std::max<uint32_t>(job.procs, 1);
  std::vector<pid_t> pids;
  for (uint32_t rank = 0; rank < n; ++rank) {
    const pid_t pid = fork();
    if (pid < 0) die(Status::io_error("fork"));
    if (pid == 0) {
      close(ready[0]);
      close(go[1]);
      const std::vector<std::string> args = {
          "bench_multihost", "--writer", std::to_string(rank), std::to_string(job.procs),
          std::to_string(job.rows), std::to_string(job.seed), job.target,
          job.codec == Codec::kRaw ? "raw" : "zstd", std::to_string(job.threads),
          std::to_string(ready[1]), std::to_string(go[0])};
      std::vector<char*> argv;
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv("/proc/self/exe", argv.data());
      _exit(127);
    }
    pids.push_back(pid);
  }
  close(ready[1]);
  close(go[0]);
  for (uint32_t i = 0; i < n; ++i) {
    char c;
    if (read(ready[0], &c, 1) != 1) die(Status::aborted("a writer died while making its data"));
  }
  close(ready[0]);
  return [n, pids, go_fd = go[1]] {
    const std::string start(n, 'g');
    if (write(go_fd, start.data(), start.size()) != static_cast<ssize_t>(start.size())) {
      die(Status::io_error("write to the start pipe"));
    }
    close(go_fd);
    bool failed = false;
    for (pid_t pid : pids) {
      int status = 0;
      waitpid(pid, &status, 0);
      failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    }
    if (failed) die(Status::aborted("a writing process failed"));
  };
}

// Median [min, max] of `runs` runs of a job, timed from the start signal to the committed file
// (segments: the writers, then the commit); making the data is not timed.
Stat time_job(const Job& job, int runs) {
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    auto go = start_writers(job);
    const auto t0 = Clock::now();
    go();
    if (job.procs > 0) {
      auto st = commit_segments(job.target, job.procs);
      if (!st.ok()) die(st.status());
    }
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t.front(), t.back()};
}

void write_throughput(const std::string& dir, uint64_t mib, int runs,
                      const std::vector<uint64_t>& procs_list) {
  const uint64_t rows = mib * (1 << 20) / (kCols * 2);
  const uint64_t bytes = rows * kCols * 2;
  const std::string target = dir + "/bench-multihost.jtree";
  std::printf("\n## 1. Aggregate write throughput: %llu MiB of bf16 normal(0, 0.02), [%llu, %llu]\n\n",
              (unsigned long long)mib, (unsigned long long)rows, (unsigned long long)kCols);
  std::printf("Time from the start signal to the committed file (segments written in parallel by "
              "separate processes, then one commit), median of %d runs [min, max]; throughput = "
              "array bytes / time; \"vs save()\" = its throughput over one process's save() of "
              "the whole matrix with the same options in this run.\n\n", runs);
  std::printf("| codec | threads per process | writer | time | throughput | vs save() |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (const Codec codec : {Codec::kZstd, Codec::kRaw}) {
    for (const int threads : {0, 1}) {
      Job job;
      job.rows = rows;
      job.seed = 11;
      job.target = target;
      job.codec = codec;
      job.threads = threads;
      const Stat base = time_job(job, runs);
      const char* codec_name = codec == Codec::kZstd ? "zstd-1 (default)" : "raw";
      const std::string t =
          threads == 0 ? "all (" + std::to_string(std::thread::hardware_concurrency()) + ")"
                       : std::to_string(threads);
      std::printf("| %s | %s | 1 process, save() | %.3f s [%.3f, %.3f] | %s | 1.00 |\n",
                  codec_name, t.c_str(), base.median, base.min, base.max,
                  gbps(bytes, base).c_str());
      for (uint64_t p : procs_list) {
        job.procs = static_cast<uint32_t>(p);
        const Stat s = time_job(job, runs);
        std::printf("| %s | %s | %u process%s, segments + commit | %.3f s [%.3f, %.3f] | %s | "
                    "%.2f |\n", codec_name, t.c_str(), job.procs, job.procs == 1 ? "" : "es",
                    s.median, s.min, s.max, gbps(bytes, s).c_str(), base.median / s.median);
      }
      std::fflush(stdout);
    }
  }
  (void)remove_object(target);
}

// Part 2 for one target (a local path or an s3:// URL).
void commit_cost(const std::string& where, const std::string& target,
                 const std::vector<uint64_t>& sizes, int runs) {
  constexpr uint32_t kProcs = 4;
  std::printf("\n### Commit on %s\n\n", where.c_str());
  std::printf("| data | segments | commit time | vs smallest | one process's save() of the data | "
              "commit / save() | bytes sent by the committer | requests |\n"
              "|---|---|---|---|---|---|---|---|\n");
  double first = 0;
  for (uint64_t mib : sizes) {
    Job job;
    job.procs = kProcs;
    job.rows = mib * (1 << 20) / (kCols * 2) / kProcs * kProcs;
    job.seed = 12;
    job.target = target;
    job.codec = Codec::kRaw;
    start_writers(job)();
    CommitOptions co;
    co.keep_segments = true;  // committed again by every run
    WriteStats last;
    const Stat s = measure(runs, [&] {
      auto st = commit_segments(target, kProcs, co);
      if (!st.ok()) die(st.status());
      last = *st;
    });
    if (first == 0) first = s.median;
    // What moving the data through one process costs: a save() of the same bytes, raw.
    Job whole = job;
    whole.procs = 0;
    whole.target = target + ".whole";
    const Stat w = time_job(whole, runs);
    (void)remove_object(whole.target);
    std::printf("| %llu MiB | %u x %llu MiB | %.3f s [%.3f, %.3f] | %.2f | %.3f s [%.3f, %.3f] | "
                "%.2f | %llu B | %llu |\n",
                (unsigned long long)mib, kProcs, (unsigned long long)(mib / kProcs), s.median,
                s.min, s.max, s.median / first, w.median, w.min, w.max, s.median / w.median,
                (unsigned long long)last.io.bytes_written,
                (unsigned long long)last.io.write_requests);
    std::fflush(stdout);
    for (uint32_t k = 0; k < kProcs; ++k) (void)remove_object(segment_path(target, k, kProcs));
  }
  (void)remove_object(target);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 11 && std::string(argv[1]) == "--writer") return writer_main(argv + 2);
  std::string dir = std::filesystem::exists("/dev/shm") ? "/dev/shm" : "/tmp";
  std::string s3;
  uint64_t mib = 256;
  int runs = 3;
  // S3 sizes stay small by default: the tests' RGW keeps objects in a 3 GiB memstore and frees
  // deleted ones only at its garbage collection, hours later.
  std::vector<uint64_t> procs = {1, 2, 4}, commit_mib = {64, 256, 1024}, s3_mib = {16, 64, 128};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--dir") dir = v;
    else if (a == "--mib") mib = std::stoull(v);
    else if (a == "--runs") runs = std::stoi(v);
    else if (a == "--procs") procs = parse_list(v);
    else if (a == "--commit-mib") commit_mib = parse_list(v);
    else if (a == "--s3") s3 = v;
    else if (a == "--s3-mib") s3_mib = parse_list(v);
    else return std::fprintf(stderr, "bench_multihost: unknown option %s\n", a.c_str()), 2;
  }
  std::printf("# bench_multihost: files in %s%s, %d runs, %u hardware threads\n", dir.c_str(),
              s3.empty() ? "" : (", S3 at " + s3).c_str(), runs,
              std::thread::hardware_concurrency());
  write_throughput(dir, mib, runs, procs);

  std::printf("\n## 2. Commit time against data size (4 processes' segments, raw chunks)\n\n"
              "The commit copies each segment's data as a block: copy_file_range locally, "
              "server-side part copies (UploadPartCopy) on S3; median of %d commits of the same "
              "segments [min, max]. Bytes sent: what the committing process wrote or uploaded "
              "into the target (locally the copies count, as copy_file_range reports them).\n",
              runs);
  commit_cost("a local file system (" + dir + ")", dir + "/bench-commit.jtree", commit_mib, runs);
  if (!s3.empty()) commit_cost("S3 (" + s3 + ")", s3 + "/bench-commit.jtree", s3_mib, runs);
  return 0;
}
