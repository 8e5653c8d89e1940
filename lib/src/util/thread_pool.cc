#include "util/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <memory>

#include "util/guarded.h"
#include "util/per_process.h"

namespace jtree {

int resolve_threads(int threads) {
  if (threads > 0) return threads;
  unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

ThreadPool::ThreadPool(int threads) : threads_(resolve_threads(threads)) {}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (workers_.empty()) {
      // (Started here rather than by the constructor: creating threads costs a fresh
      // process's first small open more than its work, and many processes never need them.)
      workers_.reserve(threads_);
      for (int i = 0; i < threads_; ++i) workers_.emplace_back([this] { run(); });
    }
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void ThreadPool::run() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and drained
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

namespace {

// The process-wide pools, made per process (util/per_process.h says why); they live until the
// process exits.
PerProcess<ThreadPool> g_cpu_pool;
PerProcess<ThreadPool> g_io_pool;

}  // namespace

ThreadPool& ThreadPool::shared() {
  return g_cpu_pool.get([] { return std::make_unique<ThreadPool>(0); });
}

ThreadPool& ThreadPool::shared_io() {
  return g_io_pool.get([] { return std::make_unique<ThreadPool>(kIoThreads); });
}

ThreadPool& pool_for(int parallelism) {
  ThreadPool& cpu = ThreadPool::shared();
  return parallelism <= cpu.size() + 1 ? cpu : ThreadPool::shared_io();
}

namespace {

// State shared by the caller and the helper tasks of one parallel_for. Helpers hold it by
// shared_ptr: one may start after the caller has returned (and must then do nothing).
struct LoopState {
  explicit LoopState(size_t count, const std::function<Status(size_t)>& f) : n(count), fn(&f) {}
  size_t n;
  const std::function<Status(size_t)>* fn;  // valid while active > 0 or the caller waits
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::condition_variable cv;
  int active = 0;  // threads inside drain()
  Status first_error;

  // Claims and runs items until none are left or one has failed.
  void drain() {
    for (;;) {
      if (failed.load(std::memory_order_relaxed)) return;
      size_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= n) return;
      // (An exception fails the loop like an error: on a worker it would end the process.)
      Status st = guarded([&] { return (*fn)(i); });
      if (!st.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (!failed.exchange(true)) first_error = std::move(st);
      }
    }
  }
};

}  // namespace

Status parallel_for(ThreadPool& pool, size_t n, int parallelism,
                    const std::function<Status(size_t)>& fn) {
  if (n == 0) return Status::success();
  if (parallelism <= 0) parallelism = pool.size() + 1;
  size_t helpers = std::min<size_t>(static_cast<size_t>(parallelism) - 1, n - 1);
  if (helpers == 0) {
    for (size_t i = 0; i < n; ++i) JTREE_RETURN_IF_ERROR(guarded([&] { return fn(i); }));
    return Status::success();
  }
  auto state = std::make_shared<LoopState>(n, fn);
  for (size_t h = 0; h < helpers; ++h) {
    pool.submit([state] {
      {
        std::lock_guard<std::mutex> lock(state->mu);
        // The caller may already be done (all items claimed): then fn may be gone.
        if (state->next.load() >= state->n || state->failed.load()) return;
        ++state->active;
      }
      state->drain();
      {
        std::lock_guard<std::mutex> lock(state->mu);
        --state->active;
      }
      state->cv.notify_all();
    });
  }
  state->drain();
  std::unique_lock<std::mutex> lock(state->mu);
  // Items are all claimed (or one failed); wait for helpers still running one. New helpers
  // see the exhausted counter under the lock and never touch fn.
  state->next.store(state->n);
  state->cv.wait(lock, [&] { return state->active == 0; });
  return state->first_error;
}

}  // namespace jtree
