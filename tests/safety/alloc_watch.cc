// Replaces the global operator new (every form the library uses goes through these) with one
// that notes the largest request while a watch is active, then allocates with malloc as the
// default one does. Sanitizers intercept malloc, so they still see every allocation.
#include "alloc_watch.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {

std::atomic<int> g_watching{0};
std::atomic<size_t> g_largest{0};

void note(size_t n) {
  if (g_watching.load(std::memory_order_relaxed) == 0) return;
  size_t cur = g_largest.load(std::memory_order_relaxed);
  while (n > cur && !g_largest.compare_exchange_weak(cur, n, std::memory_order_relaxed)) {
  }
}

void* allocate(size_t n, size_t align) {
  note(n);
  if (n == 0) n = 1;
  void* p = align > alignof(std::max_align_t) ? std::aligned_alloc(align, (n + align - 1) / align * align)
                                              : std::malloc(n);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

}  // namespace

namespace jtree::safety {

AllocWatch::AllocWatch() {
  g_largest.store(0);
  g_watching.fetch_add(1);
}
AllocWatch::~AllocWatch() { g_watching.fetch_sub(1); }
size_t AllocWatch::largest() const { return g_largest.load(); }

}  // namespace jtree::safety

void* operator new(size_t n) { return allocate(n, 0); }
void* operator new[](size_t n) { return allocate(n, 0); }
void* operator new(size_t n, std::align_val_t a) { return allocate(n, static_cast<size_t>(a)); }
void* operator new[](size_t n, std::align_val_t a) { return allocate(n, static_cast<size_t>(a)); }
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  try {
    return allocate(n, 0);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](size_t n, const std::nothrow_t&) noexcept {
  try {
    return allocate(n, 0);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { std::free(p); }
