#include "fault_run.h"

#include <doctest/doctest.h>

namespace jtree::safety {

FaultScope::FaultScope(std::shared_ptr<FaultInjector> injector)
    : hooks_(IoHooks{
          [injector](std::shared_ptr<Source> s) { return faulty_source(std::move(s), injector); },
          [injector](std::unique_ptr<Sink> s) { return faulty_sink(std::move(s), injector); }}) {}

std::string plan_name(const FaultPlan& plan) {
  const char* kind = "?";
  switch (plan.kind) {
    case FaultKind::kError: kind = "error"; break;
    case FaultKind::kShort: kind = "short transfer"; break;
    case FaultKind::kNoSpace: kind = "ENOSPC"; break;
    case FaultKind::kCorrupt: kind = "flipped byte"; break;
    case FaultKind::kKill: kind = "SIGKILL"; break;
  }
  return std::string(kind) + " at operation " + std::to_string(plan.fail_at) +
         (plan.sticky ? " and after" : "");
}

uint64_t for_each_fault_point(FaultKind kind, bool sticky,
                              const std::function<bool(const FaultPlan& plan)>& attempt,
                              uint64_t max_attempts) {
  for (uint64_t n = 0; n < max_attempts; ++n) {
    FaultPlan plan;
    plan.fail_at = n;
    plan.sticky = sticky;
    plan.kind = kind;
    if (!attempt(plan)) return n + 1;
  }
  FAIL("the operation still reached a fault after " << max_attempts << " attempts");
  return max_attempts;
}

}  // namespace jtree::safety
