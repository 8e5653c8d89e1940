// One object per process, made on its first use in each process and never destroyed.
//
// Why per process: a child of fork() inherits its parent's objects as memory, but none of the
// parent's threads, and their mutexes and condition variables in whatever state those threads
// left them (a worker waiting on a condition variable makes the child's first notify block
// forever; a mutex held at the fork stays held). So a process never touches an object another
// process made: it makes its own on first use and leaves the inherited one alone (leaked:
// destroying it could join threads that do not exist here). No lock, for the same reason.
// The thread pools (util/thread_pool.cc), the scratch caches (util/scratch_cache.h) and the
// CUDA engine's pinned-buffer cache (cuda/cuda_copy_engine.cc) use it.
#pragma once

#include <unistd.h>

#include <atomic>
#include <memory>
#include <utility>

namespace jtree {

template <class T>
class PerProcess {
 public:
  /// This process's object: the one made here before, or `make()` (a std::unique_ptr<T>) now,
  /// after which `installed(object)` runs once. Threads racing to make it agree on one (the
  /// others' are destroyed unused).
  template <class Make, class Installed>
  T& get(Make&& make, Installed&& installed) {
    const pid_t pid = ::getpid();
    Owned* current = slot_.load(std::memory_order_acquire);
    while (current == nullptr || current->owner != pid) {
      auto fresh = std::make_unique<Owned>(Owned{pid, make()});
      if (slot_.compare_exchange_strong(current, fresh.get(), std::memory_order_acq_rel)) {
        T& object = *fresh.release()->object;
        installed(object);
        return object;
      }
      // Another thread of this process installed one first (`current` now holds it).
    }
    return *current->object;
  }
  template <class Make>
  T& get(Make&& make) {
    return get(std::forward<Make>(make), [](T&) {});
  }

 private:
  struct Owned {
    pid_t owner;
    std::unique_ptr<T> object;
  };
  std::atomic<Owned*> slot_{nullptr};
};

}  // namespace jtree
