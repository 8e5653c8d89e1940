// A Python progress callback as a jtree::ProgressFn: the library calls it from its worker
// threads (never two at once); the Python function runs with the GIL taken for the call,
// at most every kInterval (and always for the last report), so a save of many small chunks
// does not queue on the GIL. An exception it raises cancels the operation (the library stops
// with Aborted, and nothing is committed) and is raised again by rethrow() in the caller.
#pragma once

#include <nanobind/nanobind.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <utility>

#include "jtree/options.h"

namespace nb = nanobind;

namespace jtpy {

class PyProgress {
 public:
  static constexpr std::chrono::milliseconds kInterval{50};

  /// `fn` None or absent: no callback (fn() is empty: the library skips counting).
  explicit PyProgress(std::optional<nb::object> fn) {
    if (fn && !fn->is_none()) fn_ = std::move(*fn);
  }
  PyProgress(const PyProgress&) = delete;
  PyProgress& operator=(const PyProgress&) = delete;

  /// The ProgressFn for the library's options; valid while this object lives.
  jtree::ProgressFn fn() {
    if (!fn_) return {};
    return [this](uint64_t done, uint64_t total) { return call(done, total); };
  }

  /// With the GIL held, after the operation: raises what the callback raised, if it did.
  void rethrow() {
    if (raised_) {
      nb::python_error e = std::move(*raised_);
      raised_.reset();
      throw e;
    }
  }

 private:
  bool call(uint64_t done, uint64_t total) {
    const auto now = std::chrono::steady_clock::now();
    if (done < total && called_ && now - last_ < kInterval) return true;
    called_ = true;
    last_ = now;
    nb::gil_scoped_acquire gil;
    try {
      nb::object r = (*fn_)(done, total);
      // Returning False also cancels (as commit_segments' callback does).
      return r.is_none() || PyObject_IsTrue(r.ptr()) != 0;
    } catch (nb::python_error& e) {
      raised_.emplace(std::move(e));
      return false;
    }
  }

  std::optional<nb::object> fn_;
  std::optional<nb::python_error> raised_;
  bool called_ = false;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace jtpy
