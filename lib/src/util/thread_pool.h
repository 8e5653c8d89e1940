// A fixed pool of worker threads and a parallel-for in which the caller takes part.
//
// parallel_for() never deadlocks when called from inside a pool task or when the pool is busy:
// the calling thread claims work items itself, so the loop completes even if no worker is
// free. Workers only speed it up.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "jtree/status.h"

namespace jtree {

class ThreadPool {
 public:
  /// `threads` workers; 0 means std::thread::hardware_concurrency(). The workers start with
  /// the first task: a process whose work all runs on the caller (a small file's open, a
  /// parallel_for of one item) creates no thread.
  explicit ThreadPool(int threads = 0);
  /// Finishes queued tasks, then joins the workers.
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  /// Queues a task. Tasks must not throw (an exception on a worker ends the process): wrap
  /// what may in guarded() (util/guarded.h), as parallel_for does.
  void submit(std::function<void()> task);
  /// The workers it has or will start: what parallel_for may count on.
  int size() const { return threads_; }

  /// The process-wide pool (hardware threads), created on first use in each process: a child
  /// of fork() gets its own (the parent's workers do not exist in it), so jtree works in
  /// forked children (multiprocessing, data-loader workers, crash tests). Never destroyed.
  static ThreadPool& shared();
  /// A process-wide pool for work that mostly waits on I/O (remote reads): kIoThreads threads,
  /// created on first use.
  static ThreadPool& shared_io();
  static constexpr int kIoThreads = 64;

 private:
  void run();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  int threads_ = 0;
  std::vector<std::thread> workers_;  // started by the first submit (under mu_)
};

/// Runs fn(i) for every i in [0, n), on the caller plus up to `parallelism - 1` pool workers
/// (parallelism <= 0: the pool's size + 1). Once an item fails, no new items start; returns
/// the first failure (by completion time), or OK. An item that throws fails like one that
/// returns an error, wherever it ran: ResourceExhausted for std::bad_alloc, Aborted for
/// another exception (util/guarded.h).
Status parallel_for(ThreadPool& pool, size_t n, int parallelism,
                    const std::function<Status(size_t)>& fn);

/// Resolves a `threads` option: 0 or less means the hardware's thread count (at least 1).
int resolve_threads(int threads);

/// The pool for a loop of `parallelism`: the shared CPU pool when it is large enough, else the
/// I/O pool.
ThreadPool& pool_for(int parallelism);

}  // namespace jtree
