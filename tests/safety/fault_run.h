// Running an operation with every one of its I/O operations failed in turn.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "io/fault_injection.h"

namespace jtree::safety {

/// Installs `injector` on every source and sink opened while the scope lives.
class FaultScope {
 public:
  explicit FaultScope(std::shared_ptr<FaultInjector> injector);

 private:
  IoHookScope hooks_;
};

/// A short name of a plan, for messages: "short write at 7 (sticky)".
std::string plan_name(const FaultPlan& plan);

/// Calls `attempt(plan)` for plans failing operation N = 0, 1, 2, ... of kind `kind`, until an
/// attempt's injector did not fire (the operation ran out of operations to fail). Returns the
/// number of attempts; fails the test if that takes more than `max_attempts`.
uint64_t for_each_fault_point(FaultKind kind, bool sticky,
                              const std::function<bool(const FaultPlan& plan)>& attempt,
                              uint64_t max_attempts = 20000);

}  // namespace jtree::safety
