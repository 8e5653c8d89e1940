// jtree/device.h in builds without CUDA (JTREE_CUDA=OFF, or AUTO without the toolkit): the
// staging pipeline is there (read_many_staged with any CopyEngine); the CUDA engine is not.
#include "jtree/device.h"

namespace jtree {

bool cuda_built() { return false; }

int cuda_device_count() { return 0; }

uint64_t release_pinned_memory() { return 0; }

Status pin_staging_buffers_async(const DeviceOptions& options) {
  if (Status st = options.check(); !st.ok()) return st;
  return make_cuda_copy_engine(options.device).status();
}

Result<std::unique_ptr<DeviceMemory>> allocate_device_memory(int device, uint64_t bytes,
                                                              uint64_t keep_free) {
  (void)bytes;
  (void)keep_free;
  return make_cuda_copy_engine(device).status();
}

Result<std::unique_ptr<CopyEngine>> make_cuda_copy_engine(int device) {
  return Status::not_supported(
      "jtree: this build has no CUDA support (configure with -DJTREE_CUDA=ON and the CUDA "
      "toolkit installed)");
}

}  // namespace jtree
