// Tests of ThreadPool and parallel_for (lib/src/util/thread_pool.h).
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <memory>
#include <new>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "util/thread_pool.h"

namespace jtree {
namespace {

// Runs fn on its own thread and gives it `seconds` to finish. A deadlock cannot be recovered
// from inside the process (the stuck threads cannot be joined), so it ends the test run with
// a message instead of hanging it.
template <typename Fn>
void within_deadline(const char* what, Fn fn, int seconds = 60) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> finished = done->get_future();
  std::thread t([fn, done]() mutable {
    fn();
    done->set_value();
  });
  if (finished.wait_for(std::chrono::seconds(seconds)) != std::future_status::ready) {
    std::fprintf(stderr, "DEADLOCK: %s did not finish within %d s\n", what, seconds);
    std::_Exit(1);
  }
  t.join();
}

TEST_CASE("parallel_for runs every index exactly once") {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    CHECK(pool.size() == threads);
    for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{17}, size_t{1000},
                     size_t{100000}}) {
      for (int parallelism : {-1, 0, 1, 2, 3, 16}) {
        CAPTURE(threads);
        CAPTURE(n);
        CAPTURE(parallelism);
        std::vector<std::atomic<int>> hits(n);
        Status st = parallel_for(pool, n, parallelism, [&](size_t i) {
          if (i >= n) return Status::invalid_argument("index out of range");
          hits[i].fetch_add(1, std::memory_order_relaxed);
          return Status::success();
        });
        REQUIRE(st.ok());
        size_t wrong = 0;
        for (auto& h : hits) wrong += h.load() != 1;
        CHECK(wrong == 0);
      }
    }
  }
}

TEST_CASE("parallel_for: n = 0 calls nothing, n = 1 runs on the caller") {
  ThreadPool pool(2);
  int calls = 0;
  CHECK(parallel_for(pool, 0, 0, [&](size_t) {
          ++calls;
          return Status::corruption("must not run");
        }).ok());
  CHECK(calls == 0);

  std::thread::id ran_on;
  Status st = parallel_for(pool, 1, 0, [&](size_t i) {
    ++calls;
    ran_on = std::this_thread::get_id();
    return i == 0 ? Status::success() : Status::invalid_argument("bad index");
  });
  CHECK(st.ok());
  CHECK(calls == 1);
  CHECK(ran_on == std::this_thread::get_id());

  st = parallel_for(pool, 1, 0, [](size_t) { return Status::not_found("only item"); });
  CHECK(st.code() == StatusCode::kNotFound);
  CHECK(st.message() == "only item");
}

TEST_CASE("parallel_for: writes made by the items are visible to the caller") {
  // Plain (non-atomic) writes: the thread sanitizer reports a race if parallel_for returned
  // before its helpers' writes happen-before the return.
  ThreadPool pool(4);
  for (int round = 0; round < 200; ++round) {
    std::vector<uint64_t> out(257, 0);
    REQUIRE(parallel_for(pool, out.size(), 0, [&](size_t i) {
              out[i] = i * i + 1;
              return Status::success();
            }).ok());
    for (size_t i = 0; i < out.size(); ++i) REQUIRE(out[i] == i * i + 1);
  }
}

TEST_CASE("parallel_for never runs more than `parallelism` items at once") {
  ThreadPool pool(4);
  for (int parallelism : {1, 2, 3}) {
    CAPTURE(parallelism);
    std::atomic<int> running{0}, peak{0};
    REQUIRE(parallel_for(pool, 200, parallelism, [&](size_t) {
              const int now = running.fetch_add(1) + 1;
              int p = peak.load();
              while (now > p && !peak.compare_exchange_weak(p, now)) {
              }
              std::this_thread::sleep_for(std::chrono::microseconds(200));
              running.fetch_sub(1);
              return Status::success();
            }).ok());
    CHECK(peak.load() <= parallelism);
    CHECK(peak.load() >= 1);
  }
}

TEST_CASE("parallel_for: sequential (parallelism 1) stops at the first error") {
  ThreadPool pool(2);
  std::vector<size_t> ran;
  Status st = parallel_for(pool, 100, 1, [&](size_t i) {
    ran.push_back(i);
    if (i == 5) return Status::corruption("item 5");
    if (i == 7) return Status::io_error("item 7");
    return Status::success();
  });
  CHECK(st.code() == StatusCode::kCorruption);
  CHECK(st.message() == "item 5");
  CHECK(ran == std::vector<size_t>{0, 1, 2, 3, 4, 5});
}

TEST_CASE("parallel_for: the first error is returned and later items stop starting") {
  // The pool learns of a failure only after fn returns, and a thread preempted between the
  // two lets the others go on for a while; so the bound below is loose. Without the stop,
  // all n items run.
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    CAPTURE(threads);
    for (int round = 0; round < 10; ++round) {
      const size_t n = 20000;
      const size_t bad = 20 + static_cast<size_t>(round) * 7;
      std::atomic<size_t> started{0};
      Status st = parallel_for(pool, n, threads + 1, [&](size_t i) {
        started.fetch_add(1);
        if (i == bad) return Status::aborted("item " + std::to_string(i));
        std::this_thread::sleep_for(std::chrono::microseconds(10));
        return Status::success();
      });
      REQUIRE(st.code() == StatusCode::kAborted);
      CHECK(st.message() == "item " + std::to_string(bad));
      CHECK(started.load() > bad);
      CHECK(started.load() < n / 2);
    }
  }
}

TEST_CASE("parallel_for: with many failures, one of them is returned") {
  ThreadPool pool(4);
  for (int round = 0; round < 50; ++round) {
    std::atomic<size_t> calls{0};
    Status st = parallel_for(pool, 1000, 0, [&](size_t i) {
      calls.fetch_add(1);
      return Status::io_error("item " + std::to_string(i));
    });
    REQUIRE(st.is_io_error());
    CHECK(st.message().rfind("item ", 0) == 0);
    // Every thread fails on its first item and then stops.
    CHECK(calls.load() <= static_cast<size_t>(pool.size() + 1));
  }
}

TEST_CASE("parallel_for: an item that throws fails the loop, on a worker as on the caller") {
  // An exception escaping a worker's task used to end the process (std::terminate). Here the
  // items on workers throw, and the caller's items wait until one has: a worker surely threw.
  ThreadPool pool(3);
  for (int kind = 0; kind < 2; ++kind) {
    CAPTURE(kind);
    std::atomic<bool> thrown{false};
    Status st;
    within_deadline("a loop whose workers throw", [&] {
      const std::thread::id caller = std::this_thread::get_id();  // (within_deadline's thread)
      st = parallel_for(pool, 64, 4, [&](size_t) -> Status {
        if (std::this_thread::get_id() == caller) {
          while (!thrown.load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
          return Status::success();
        }
        thrown.store(true);
        if (kind == 0) throw std::bad_alloc();
        throw std::runtime_error("a worker's item threw");
      });
    });
    if (kind == 0) {
      CHECK(st.code() == StatusCode::kResourceExhausted);
      CHECK(st.message() == "out of memory");
    } else {
      CHECK(st.code() == StatusCode::kAborted);
      CHECK(st.message() == "unexpected exception: a worker's item threw");
    }
  }
  // Sequential (parallelism 1): the same Status on the caller, and the loop stops there.
  std::vector<size_t> ran;
  Status st = parallel_for(pool, 10, 1, [&](size_t i) -> Status {
    ran.push_back(i);
    if (i == 3) throw std::bad_alloc();
    return Status::success();
  });
  CHECK(st.code() == StatusCode::kResourceExhausted);
  CHECK(ran == std::vector<size_t>{0, 1, 2, 3});
}

TEST_CASE("parallel_for: nested calls from inside pool tasks do not deadlock") {
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    ThreadPool pool(threads);

    // A pool task (on the only worker, for a pool of 1) runs a parallel_for on its own pool.
    within_deadline("parallel_for inside a submitted task", [&pool] {
      std::promise<Status> result;
      std::atomic<size_t> sum{0};
      pool.submit([&] {
        result.set_value(parallel_for(pool, 1000, 0, [&](size_t i) {
          sum.fetch_add(i);
          return Status::success();
        }));
      });
      Status st = result.get_future().get();
      CHECK(st.ok());
      CHECK(sum.load() == 999 * 1000 / 2);
    });

    // Three levels deep, every level wider than the pool.
    within_deadline("nested parallel_for", [&pool] {
      std::atomic<size_t> leaves{0};
      Status st = parallel_for(pool, 8, 8, [&](size_t) {
        return parallel_for(pool, 8, 8, [&](size_t) {
          return parallel_for(pool, 16, 8, [&](size_t) {
            leaves.fetch_add(1);
            return Status::success();
          });
        });
      });
      CHECK(st.ok());
      CHECK(leaves.load() == 8 * 8 * 16);
    });

    // Every worker blocked in a task that waits on a nested loop.
    within_deadline("all workers inside parallel_for", [&pool, threads] {
      std::vector<std::promise<Status>> results(static_cast<size_t>(threads) * 2);
      for (auto& r : results) {
        pool.submit([&pool, &r] {
          std::atomic<int> count{0};
          Status st = parallel_for(pool, 500, 0, [&](size_t) {
            count.fetch_add(1);
            return Status::success();
          });
          if (st.ok() && count.load() != 500) st = Status::corruption("missing items");
          r.set_value(st);
        });
      }
      for (auto& r : results) CHECK(r.get_future().get().ok());
    });
  }
}

TEST_CASE("parallel_for: many concurrent calls from different threads share a pool") {
  for (int threads : {1, 2, 4}) {
    CAPTURE(threads);
    ThreadPool pool(threads);
    within_deadline("concurrent parallel_for", [&pool] {
      std::atomic<int> bad{0};
      std::vector<std::thread> callers;
      for (int c = 0; c < 8; ++c) {
        callers.emplace_back([&pool, &bad, c] {
          for (int round = 0; round < 100; ++round) {
            const size_t n = 1 + static_cast<size_t>((c * 37 + round * 11) % 300);
            std::vector<int> hits(n, 0);
            const bool fail = round % 10 == 3;
            Status st = parallel_for(pool, n, (round % 4), [&](size_t i) {
              hits[i] += 1;
              if (fail && i == n / 2) return Status::aborted("stop");
              return Status::success();
            });
            const auto once = static_cast<size_t>(std::count(hits.begin(), hits.end(), 1));
            if (fail ? st.code() != StatusCode::kAborted : !st.ok() || once != n) ++bad;
          }
        });
      }
      for (auto& t : callers) t.join();
      CHECK(bad.load() == 0);
    });
  }
}

TEST_CASE("ThreadPool runs submitted tasks and finishes queued ones before joining") {
  std::atomic<int> ran{0};
  {
    ThreadPool pool(2);
    for (int i = 0; i < 1000; ++i) pool.submit([&ran] { ran.fetch_add(1); });
  }
  CHECK(ran.load() == 1000);

  ThreadPool& shared = ThreadPool::shared();
  CHECK(&shared == &ThreadPool::shared());
  CHECK(shared.size() == resolve_threads(0));
  std::atomic<int> sum{0};
  CHECK(parallel_for(shared, 100, 0, [&](size_t i) {
          sum.fetch_add(static_cast<int>(i));
          return Status::success();
        }).ok());
  CHECK(sum.load() == 4950);
}

// The threads of this process (Linux: /proc/self/task has one entry per thread).
size_t process_threads() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// process_threads() once it is `want`, or after 10 s what it is then. Why wait: a joined
// thread can still be listed for a moment (the kernel wakes its joiner before it removes the
// thread from /proc/self/task), as can a thread of an earlier test case; a count that never
// comes is still a failure.
size_t process_threads_when(size_t want) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  size_t n = process_threads();
  while (n != want && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    n = process_threads();
  }
  return n;
}

// process_threads() once it has stayed the same for 50 ms (at most 10 s): the threads of
// earlier test cases gone.
size_t settled_process_threads() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  size_t n = process_threads();
  auto since = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() < deadline &&
         std::chrono::steady_clock::now() - since < std::chrono::milliseconds(50)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const size_t now = process_threads();
    if (now != n) {
      n = now;
      since = std::chrono::steady_clock::now();
    }
  }
  return n;
}

TEST_CASE("ThreadPool starts its workers with its first task, not before") {
  const size_t before = settled_process_threads();
  {
    ThreadPool pool(3);
    CHECK(pool.size() == 3);  // (what parallel_for counts on, before any worker exists)
    CHECK(process_threads() == before);
    std::atomic<int> sum{0};
    // Work that runs on the caller alone (one item, or parallelism 1) starts none.
    CHECK(parallel_for(pool, 1, 0, [&](size_t) {
            sum.fetch_add(1);
            return Status::success();
          }).ok());
    CHECK(parallel_for(pool, 50, 1, [&](size_t) {
            sum.fetch_add(1);
            return Status::success();
          }).ok());
    CHECK(sum.load() == 51);
    CHECK(process_threads() == before);
    std::promise<void> ran;
    pool.submit([&ran] { ran.set_value(); });
    ran.get_future().wait();
    CHECK(process_threads_when(before + 3) == before + 3);
  }
  CHECK(process_threads_when(before) == before);  // joined
}

TEST_CASE("resolve_threads") {
  CHECK(resolve_threads(3) == 3);
  CHECK(resolve_threads(1) == 1);
  CHECK(resolve_threads(0) >= 1);
  CHECK(resolve_threads(-4) == resolve_threads(0));
  ThreadPool pool(0);
  CHECK(pool.size() == resolve_threads(0));
}

}  // namespace
}  // namespace jtree
