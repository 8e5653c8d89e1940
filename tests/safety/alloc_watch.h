// The largest single heap allocation made while an AllocWatch lives (any thread), from a
// replacement of the global operator new (alloc_watch.cc: link it into one test executable
// only). Lets a test assert that a hostile file is refused *before* the allocation its sizes
// ask for, not by an allocation that happened to fail or succeed.
#pragma once

#include <cstddef>

namespace jtree::safety {

class AllocWatch {
 public:
  AllocWatch();
  ~AllocWatch();
  AllocWatch(const AllocWatch&) = delete;
  AllocWatch& operator=(const AllocWatch&) = delete;
  /// The largest allocation so far, in bytes.
  size_t largest() const;
};

}  // namespace jtree::safety
