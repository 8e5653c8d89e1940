// read_many_to_device: the staging pipeline through the CUDA engine.
#include "jtree/device.h"

namespace jtree {

Status read_many_to_device(const Reader& reader, std::span<const DeviceRequest> requests,
                           const DeviceOptions& options) {
  // Bad options are InvalidArgument before anything else, also in builds or on machines
  // without CUDA (where the engine would be NotSupported): a caller's mistake is reported as
  // one wherever it runs.
  if (Status st = options.check(); !st.ok()) return st.with_prefix(reader.name());
  JTREE_ASSIGN_OR_RETURN(std::unique_ptr<CopyEngine> engine,
                         make_cuda_copy_engine(options.device));
  return read_many_staged(reader, requests, *engine, options);
}

}  // namespace jtree
