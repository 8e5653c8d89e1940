// Loads to a device through pinned staging buffers (jtree/device.h): read_many_staged plans
// the load (staged_load_plan.h) and then carries the plan out (staged_load.h); and the
// CopyEngine defaults every engine shares.
#include "cuda/staged_load.h"
#include "cuda/staged_load_plan.h"
#include "jtree/device.h"
#include "read/read_scratch.h"

namespace jtree {

CopyEngine::~CopyEngine() = default;
DeviceMemory::~DeviceMemory() = default;

Status CopyEngine::register_host(const std::byte* p, size_t bytes) {
  (void)p;
  (void)bytes;
  return Status::not_supported(name() + " cannot register host memory for copies");
}

void CopyEngine::unregister_host(const std::byte* p) { (void)p; }

namespace {

// Writes the report into DeviceOptions::stats however the load ends.
struct ReportOnExit {
  const staging::StagingReport& report;
  DeviceStats* stats;
  ~ReportOnExit() { report.write_to(stats); }
};

}  // namespace

Status read_many_staged(const Reader& reader, std::span<const DeviceRequest> requests,
                        CopyEngine& engine, const DeviceOptions& options) {
  // (read.check() included, as host reads make it; the error names the file.)
  if (Status st = options.check(); !st.ok()) return st.with_prefix(reader.name());
  // The fillers' read_many calls, buffer after buffer, keep their scratch sets between them.
  ReadScratchCache::Use scratch(ReadScratchCache::shared());
  staging::StagingReport report;
  const ReportOnExit report_on_exit{report, options.stats};
  JTREE_ASSIGN_OR_RETURN(staging::CheckedRequests checked,
                         staging::check_device_requests(reader, requests));
  if (checked.total == 0) return Status::success();
  JTREE_ASSIGN_OR_RETURN(const staging::StagedLoadPlan plan,
                         staging::plan_staged_load(reader, requests, std::move(checked), engine,
                                                   options, report));
  return staging::run_staged_load(reader, requests, plan, engine, options, report);
}

}  // namespace jtree
