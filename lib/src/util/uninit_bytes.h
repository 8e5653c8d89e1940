// A growable byte buffer whose resize() does not zero the new bytes.
//
// std::vector<std::byte>::resize value-initialises what it adds, so a buffer that is cleared and
// grown again for every chunk pays a memset of the whole chunk each time, only for the codec to
// overwrite it. The allocator below default-initialises instead (for std::byte: leaves the
// bytes as they are), which is the one difference from std::vector.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

namespace jtree {

template <class T>
struct DefaultInitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <class U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}

  template <class U>
  void construct(U* p) noexcept(noexcept(::new (static_cast<void*>(p)) U)) {
    ::new (static_cast<void*>(p)) U;  // default-, not value-initialised
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

/// Bytes that resize() leaves uninitialised: for buffers the next step overwrites in full.
using UninitBytes = std::vector<std::byte, DefaultInitAllocator<std::byte>>;

}  // namespace jtree
