// Crash safety (issue "safe under faults"): a child process runs a save, an append, a
// compaction or a commit and is SIGKILLed at its I/O operation N (half of the write that was
// under way reaches the file first), for N = 0, 1, 2, ... until it finishes. After every kill
// the target must read bit-exact as the previous committed state — or as the new one, when
// the kill came after the commit point — and the next run of the same operation must succeed.
//
// What a kill may leave behind, and why it is harmless:
//  - a temporary file `.ckpt.jtree.tmp-<16 hex>` beside the target (new files are written
//    under a temporary name and renamed on commit). Readers open only the target's name; the
//    next save of the same target removes it (a writer holds a lock on its temporary file
//    that dies with it: lib/src/io/temp_files.h), and so does remove_stale_temp_files();
//    the temporary files of live writers, in this process or another, are kept.
//  - after a killed in-place append: bytes after the committed footer (a torn generation,
//    ignored by readers through the commit slot written first, and truncated by the next
//    append), and a commit slot (the 64 unhashed preamble bytes that record generations).
#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <string>
#include <thread>

#include <doctest/doctest.h>

#include "expect.h"
#include "fault_run.h"
#include "scenarios.h"
#include "test_util.h"
#include "util/thread_pool.h"

using namespace jtree;
using namespace jtree::safety;
using jtree::testing::TempDir;

namespace {

bool is_temp_file(const std::string& name) {
  const std::string prefix = std::string(".") + kTarget + ".tmp-";
  return name.rfind(prefix, 0) == 0 && name.size() == prefix.size() + 16;
}

// The temporary files of any target in `dir` (`.<name>.tmp-<16 hex>`).
std::vector<std::string> any_temp_files(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  REQUIRE(d != nullptr);
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    const size_t tag = name.rfind(".tmp-");
    if (name[0] == '.' && tag != std::string::npos && name.size() == tag + 5 + 16) {
      out.push_back(name);
    }
  }
  ::closedir(d);
  return out;
}

// Runs `s` in a child that dies at operation `n`. True if the child was killed, false if the
// operation finished (without meeting operation n).
bool run_killed_at(const Scenario& s, const std::string& dir, uint64_t n) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    FaultPlan plan;
    plan.fail_at = n;
    plan.kind = FaultKind::kKill;
    Status st;
    {
      FaultScope faults(std::make_shared<FaultInjector>(plan));
      st = s.run(dir);
    }
    _exit(st.ok() ? 0 : 1);  // no doctest teardown, no leak report of the parent's objects
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  if (WIFSIGNALED(status)) {
    REQUIRE(WTERMSIG(status) == SIGKILL);
    return true;
  }
  REQUIRE_MESSAGE((WIFEXITED(status) && WEXITSTATUS(status) == 0),
                  s.name << ": the operation failed without being killed");
  return false;
}

// What a killed run left in `dir`: the problems, or "" when all is as the header comment says.
std::string check_after_kill(const Scenario& s, const std::string& dir, uint64_t* temp_files,
                             bool* committed) {
  DirState got = dir_state(dir);
  for (auto it = got.begin(); it != got.end();) {
    if (is_temp_file(it->first)) {
      ++*temp_files;
      it = got.erase(it);
    } else {
      ++it;
    }
  }
  const std::string target = dir + "/" + kTarget;
  const Snapshot now = got.count(kTarget) ? snapshot_file(target) : Snapshot{};
  if (got.count(kTarget) && difference(now, s.after, target).empty()) {
    *committed = true;  // the kill came after the commit point
    return "";
  }
  if (s.patches_slots) {
    // The committed generation is intact below a possible torn tail; readers recover it.
    auto& bytes = got[kTarget];
    const auto& start = s.start.at(kTarget);
    if (bytes.size() < start.size()) return "the file lost committed bytes";
    bytes.resize(start.size());
    Snapshot recovered = s.before;
    recovered.recovered = true;
    if (!difference(now, s.before, target).empty() && !difference(now, recovered, target).empty()) {
      return "reads neither as before nor as after: " + difference(now, s.before, target);
    }
  } else if (s.start.count(kTarget)) {
    if (std::string d = difference(now, s.before, target); !d.empty()) return "reads differently: " + d;
  }
  return dir_difference(got, s.start, s.patches_slots ? kTarget : "");
}

// Whether the sanitizer runtime survives a fork() while another thread allocates: GCC 12's
// ASan does not (its allocator lock is not taken around fork, so a child can inherit it held
// and deadlock in its first malloc); TSan refuses threads in a child of a threaded process.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kForkWhileAllocatingIsSafe = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kForkWhileAllocatingIsSafe = false;
#else
constexpr bool kForkWhileAllocatingIsSafe = true;
#endif
#else
constexpr bool kForkWhileAllocatingIsSafe = true;
#endif

// Forks, and in the child runs a parallel loop on the shared pool; the child's exit status.
int parallel_loop_in_child() {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    alarm(20);  // a deadlock kills the child with SIGALRM instead of hanging the test
    std::atomic<int> sum{0};
    Status st = parallel_for(ThreadPool::shared(), 100, 0, [&](size_t k) {
      sum += static_cast<int>(k);
      return Status::success();
    });
    _exit(st.ok() && sum == 4950 ? 0 : 1);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return status;
}

}  // namespace

TEST_CASE("jtree works in a child forked after (or while) its thread pool ran") {
  // The crash tests fork; so do Python's multiprocessing and data-loader workers. A child
  // inherits none of the parent's pool threads, and the idle workers' wait on the pool's
  // condition variable leaves it in a state where the child's first notify would block.
  (void)parallel_for(ThreadPool::shared(), 64, 0, [](size_t) { return Status::success(); });
  for (int i = 0; i < 5; ++i) {
    const int status = parallel_loop_in_child();
    CHECK_MESSAGE(WIFEXITED(status), "signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0));
    CHECK(WEXITSTATUS(status) == 0);
  }
  if (!kForkWhileAllocatingIsSafe) return;
  // And while another thread keeps the pool busy (forks at any point of its work).
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    while (!stop.load()) {
      (void)parallel_for(ThreadPool::shared(), 64, 0, [](size_t) { return Status::success(); });
    }
  });
  for (int i = 0; i < 20; ++i) {
    const int status = parallel_loop_in_child();
    CHECK_MESSAGE(WIFEXITED(status), "signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0));
    CHECK(WEXITSTATUS(status) == 0);
  }
  stop = true;
  busy.join();
}

TEST_CASE("a writer killed at any I/O operation leaves the committed state, or the new one") {
  for (const Scenario& s : scenarios()) {
    TempDir tmp;
    const std::string dir = tmp.path().string();
    Tally tally(s.name + " / killed");
    uint64_t kills = 0, temp_files = 0, committed = 0;
    for (uint64_t n = 0; n < 10000; ++n) {
      restore_dir(dir, s.start);
      if (!run_killed_at(s, dir, n)) {
        tally.record(difference(snapshot_file(dir + "/" + kTarget), s.after, kTarget),
                     "unkilled run");
        break;
      }
      ++kills;
      const std::string where = "killed at operation " + std::to_string(n);
      bool done = false;
      tally.record(check_after_kill(s, dir, &temp_files, &done), where);
      committed += done;
      // Whatever the kill left, the same operation then succeeds and reads back right (an
      // append truncates the torn tail; a save picks another temporary name).
      // (An append whose kill came after its commit point is then appended to once more.)
      Snapshot want = s.after;
      if (done && s.patches_slots) ++want.generation;
      const Status again = s.run(dir);
      tally.record(again.ok() ? difference(snapshot_file(dir + "/" + kTarget), want, kTarget)
                              : "the next run failed: " + again.to_string(),
                   where + ", then run again");
      // ... and that run removed the temporary files the killed one left.
      const std::vector<std::string> left = any_temp_files(dir);
      tally.record(left.empty() ? "" : "the next run left the killed run's " + left[0],
                   where + ", then run again");
    }
    CHECK(kills > 5);
    // Writers of new files always leave a temporary file when killed before their rename;
    // in-place appends never create one.
    if (s.patches_slots) {
      CHECK(temp_files == 0);
    } else {
      CHECK(temp_files > 0);
    }
    MESSAGE(s.name << ": " << kills << " kills, " << committed << " after the commit point, "
                   << temp_files << " temporary files left (each removed by the next run)");
  }
}

TEST_CASE("a live writer's temporary file is kept; once it is killed, the next save removes it") {
  TempDir tmp;
  const std::string dir = tmp.path().string();
  const std::string target = dir + "/" + kTarget;
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // A writer in the middle of its save: its temporary file exists, the rename has not come.
    auto sink = create_file_sink(target);
    if (!sink.ok()) _exit(1);
    const std::byte some[16] = {};
    if (!(*sink)->append(some).ok()) _exit(1);
    const char c = 1;
    if (::write(ready[1], &c, 1) != 1) _exit(1);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char c = 0;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  ::close(ready[0]);
  REQUIRE(any_temp_files(dir).size() == 1);
  const std::string child_file = any_temp_files(dir)[0];

  // Neither a cleanup nor another save of the same target touch a live writer's file.
  auto removed = remove_stale_temp_files(target);
  CHECK((removed.ok() && *removed == 0));
  auto small_tree = [] {
    TreeBuilder b;
    b.dict();
    b.key("step").int_value(7);
    b.end();
    auto t = std::move(b).finish();
    REQUIRE(t.ok());
    return std::move(*t);
  };
  REQUIRE(save(small_tree(), target, scenario_write_options()).ok());
  CHECK(any_temp_files(dir) == std::vector<std::string>{child_file});

  ::kill(pid, SIGKILL);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFSIGNALED(status));
  CHECK(any_temp_files(dir) == std::vector<std::string>{child_file});  // nothing removes it by itself
  REQUIRE(save(small_tree(), target, scenario_write_options()).ok());
  CHECK(any_temp_files(dir).empty());  // the next save did
  auto reader = Reader::open(target);
  CHECK(reader.ok());
}
