// Loads into device (GPU) memory for jtree._jtree.Reader: jtree::read_many_to_device, and the
// same path through the host-memory stand-in engine for tests on machines without a GPU.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <optional>

#include "jtree/reader.h"

namespace nb = nanobind;

namespace jtpy {

/// Options of Reader.read_to_device (0: the library's default).
struct DeviceReadArgs {
  int device = 0;
  uint64_t staging_bytes = 0;
  int staging_buffers = 0;
  bool verify = true;
  int threads = 0;
  std::optional<nb::object> progress;
};

/// requests: [(leaf, box | None, dst_address, nbytes)], box = (begin, end). Reads them with
/// jtree::read_many_to_device (the CUDA engine on args.device), the GIL released.
void read_to_device(const jtree::Reader& reader, nb::list requests, const DeviceReadArgs& args);

/// The same requests through jtree's host-memory CopyEngine (lib/src/cuda/host_copy_engine.h):
/// every dst_address is a host address. For tests without a GPU: the Python planning runs end
/// to end. Returns the engine's counters (peak pinned bytes, copies...) as a dict.
nb::dict read_staged_host_for_tests(const jtree::Reader& reader, nb::list requests,
                                    const DeviceReadArgs& args);

/// Registers cuda_built() and cuda_device_count() on the module.
void register_device(nb::module_& m);

}  // namespace jtpy
