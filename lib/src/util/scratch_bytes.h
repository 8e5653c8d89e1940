// Scratch bytes: a growable byte buffer for the workers' buffers (fetched chunks, decoded
// planes, encoded chunks), different from std::vector<std::byte> in two ways:
//
// - resize() does not zero what it adds. std::vector<std::byte>::resize value-initialises, so
//   a buffer grown for every chunk pays a memset of the whole chunk only for the codec to
//   overwrite it; construct() below default-initialises instead (for std::byte: leaves the
//   bytes as they are).
// - Blocks of kMappedBytes and more are mapped straight from the kernel and unmapped when
//   freed, so that freeing a buffer gives its memory back at once: malloc may keep freed
//   blocks, depending on thresholds it moves as it goes, and the scratch caches
//   (util/scratch_cache.h) free sets precisely to give memory back.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>
#include <vector>

namespace jtree {

/// The allocator of ScratchBytes: mmap/munmap from kMappedBytes, operator new below; a
/// default-initialising construct().
template <class T>
struct ScratchAllocator {
  using value_type = T;
  static constexpr size_t kMappedBytes = size_t{256} << 10;

  ScratchAllocator() = default;
  template <class U>
  ScratchAllocator(const ScratchAllocator<U>&) noexcept {}

  T* allocate(size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_array_new_length();
    const size_t bytes = n * sizeof(T);
    if (bytes < kMappedBytes) return static_cast<T*>(::operator new(bytes));
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) noexcept {
    const size_t bytes = n * sizeof(T);  // (n is what allocate was given: the same rule)
    if (bytes < kMappedBytes) {
      ::operator delete(p);
    } else {
      ::munmap(p, bytes);
    }
  }

  template <class U>
  void construct(U* p) noexcept(noexcept(::new (static_cast<void*>(p)) U)) {
    ::new (static_cast<void*>(p)) U;  // default-, not value-initialised
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }

  template <class U>
  bool operator==(const ScratchAllocator<U>&) const noexcept { return true; }
};

/// Bytes whose resize() leaves new bytes uninitialised: for buffers the next step overwrites.
using ScratchBytes = std::vector<std::byte, ScratchAllocator<std::byte>>;

/// Grows `v` to at least `n` bytes (contents not kept meaningful: scratch).
inline void grow(ScratchBytes& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

}  // namespace jtree
