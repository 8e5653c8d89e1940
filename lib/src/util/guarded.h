// Work on a thread of its own (a pool worker, a staging filler, an upload task) must not let an
// exception escape: past the thread's function std::terminate ends the process, where the
// call that handed the work out should fail with a Status. The library reports its own errors
// as Status; what can still throw is the standard library (std::bad_alloc from a container
// that cannot grow, or from ScratchBytes when mmap fails, as under a ulimit -v).
#pragma once

#include <exception>
#include <new>
#include <string>
#include <type_traits>
#include <utility>

#include "jtree/status.h"

namespace jtree {

/// The Status of an exception being handled (call only inside a catch block): ResourceExhausted
/// for std::bad_alloc, Aborted "unexpected exception: <what>" for any other, as the C API
/// reports them (capi/c_internal.h's guard). Never throws.
Status status_of_current_exception() noexcept;

/// fn(), which returns a Status or a Result<T>; or, when it throws, the exception's Status
/// (status_of_current_exception) prefixed with `where()` (a std::string: the file and the key
/// path, say). Never throws.
template <class Fn, class Where>
auto guarded(Fn&& fn, Where&& where) noexcept -> std::invoke_result_t<Fn&> {
  using R = std::invoke_result_t<Fn&>;
  try {
    return fn();
  } catch (...) {
    Status st = status_of_current_exception();
    try {
      return R(st.with_prefix(where()));
    } catch (...) {
      return R(std::move(st));  // (no memory for the prefix either)
    }
  }
}

/// guarded() without a prefix.
template <class Fn>
auto guarded(Fn&& fn) noexcept -> std::invoke_result_t<Fn&> {
  using R = std::invoke_result_t<Fn&>;
  try {
    return fn();
  } catch (...) {
    return R(status_of_current_exception());
  }
}

}  // namespace jtree
