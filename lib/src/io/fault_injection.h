// Fault injection for Sources and Sinks (tests and fuzzing; not part of the public API).
//
// A FaultInjector counts the operations of the decorated backends — Source::size and read,
// Sink::append, append_from, sync, patch and commit; abort() always passes through — and makes
// operation N (0-based) fail, once or from then on, in one of several ways: an error, a short
// transfer (part of the bytes, then an error: a torn write), ENOSPC, bytes flipped on the way
// (a read that lies), or the death of the process by SIGKILL in the middle of a write (crash
// tests, in a child process). Running an operation for N = 0, 1, 2, ... until it succeeds
// without the fault firing visits every failure point of that operation.
//
// IoHookScope installs decorators process-wide: while it lives, open_source(), create_sink()
// and open_append_sink() pass what they open through it, so that whole operations (append,
// compact, Reader::open) can be faulted through their public entry points.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "jtree/io.h"

namespace jtree {

enum class FaultKind : uint8_t {
  kError,    ///< the operation does nothing and returns IOError
  kShort,    ///< a transfer moves its first half, then returns IOError (a torn write/read)
  kNoSpace,  ///< as kShort, with ENOSPC's message ("No space left on device")
  kCorrupt,  ///< a read succeeds but one byte of what it returns is flipped
  kKill,     ///< SIGKILL after half of a write reached the backend (crash tests, in a child)
};

struct FaultPlan {
  uint64_t fail_at = UINT64_MAX;  ///< the 0-based operation number that fails
  bool sticky = false;            ///< every operation from fail_at on fails (a dead disk)
  FaultKind kind = FaultKind::kError;
};

/// Counts operations and decides which fail. Thread-safe; shared by every decorator of one
/// experiment (a source and a sink of one append count together).
class FaultInjector {
 public:
  explicit FaultInjector(FaultPlan plan = {}) : plan_(plan) {}
  /// Called once per operation; the fault to inject, if this operation gets one.
  std::optional<FaultKind> next(const char* op);
  /// Operations counted so far.
  uint64_t operations() const { return count_.load(); }
  /// Whether a fault was injected.
  bool fired() const { return fired_.load(); }
  /// The operations seen, in order ("read append sync ..."), for messages.
  std::string log() const;

 private:
  const FaultPlan plan_;
  std::atomic<uint64_t> count_{0};
  std::atomic<bool> fired_{false};
  mutable std::mutex mu_;
  std::string log_;
};

/// `inner` with faults from `injector`. The decorated Source has no mapping (every read goes
/// through read(), where faults are).
std::shared_ptr<Source> faulty_source(std::shared_ptr<Source> inner,
                                      std::shared_ptr<FaultInjector> injector);
std::unique_ptr<Sink> faulty_sink(std::unique_ptr<Sink> inner,
                                  std::shared_ptr<FaultInjector> injector);

/// Decorators applied by open_source(), create_sink() and open_append_sink() while installed.
struct IoHooks {
  std::function<std::shared_ptr<Source>(std::shared_ptr<Source>)> source;
  std::function<std::unique_ptr<Sink>(std::unique_ptr<Sink>)> sink;
};

/// Installs `hooks` process-wide for its lifetime (one scope at a time; tests only).
class IoHookScope {
 public:
  explicit IoHookScope(IoHooks hooks);
  ~IoHookScope();
  IoHookScope(const IoHookScope&) = delete;
  IoHookScope& operator=(const IoHookScope&) = delete;

 private:
  IoHooks hooks_;
};

/// What dispatch.cc calls on everything it opens: the installed hooks, or nothing.
std::shared_ptr<Source> apply_io_hooks(std::shared_ptr<Source> source);
std::unique_ptr<Sink> apply_io_hooks(std::unique_ptr<Sink> sink);

}  // namespace jtree
