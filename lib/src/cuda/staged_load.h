// The execution of a load to a device (read_many_staged, jtree/device.h): the batches of its
// plan (staged_load_plan.h) filled by a few threads into a ring of pinned buffers
// (staging_ring.h), each buffer copied on its own stream while the next ones are filled.
#pragma once

#include <span>

#include "cuda/staged_load_plan.h"
#include "jtree/device.h"

namespace jtree::staging {

/// Carries out `plan` (made by plan_staged_load for the same arguments): fills every batch,
/// queues its copies and waits for them all. Counts what each path carried into `report` (and
/// notes there where O_DIRECT or zero copy stops mid-load, under DirectIo/ZeroCopy::kAuto).
/// The first error wins and stops the others; the copies already queued are waited for before
/// it returns, whatever happens. Errors name the file and the batch's first leaf.
Status run_staged_load(const Reader& reader, std::span<const DeviceRequest> requests,
                       const StagedLoadPlan& plan, CopyEngine& engine,
                       const DeviceOptions& options, StagingReport& report);

}  // namespace jtree::staging
