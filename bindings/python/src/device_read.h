// Loads into device (GPU) memory for jtree._jtree.Reader: jtree::read_many_to_device, and the
// same path through the host-memory stand-in engine for tests on machines without a GPU.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <optional>
#include <string>

#include "jtree/reader.h"

namespace nb = nanobind;

namespace jtpy {

/// Options of Reader.read_to_device (nullopt: the library's default). Every value is checked
/// by jtree::DeviceOptions::check(), the direct_io and zero_copy names by
/// jtree::parse_direct_io() and jtree::parse_zero_copy().
struct DeviceReadArgs {
  int device = 0;
  std::optional<uint64_t> staging_bytes;
  std::optional<int64_t> staging_buffers;  // (int64: a huge Python int still reaches check())
  std::string direct_io = "auto";
  bool verify = true;
  int threads = 0;
  std::optional<nb::object> progress;
  std::string zero_copy = "off";
};

/// requests: [(leaf, box | None, dst_address, nbytes)], box = (begin, end). Reads them with
/// jtree::read_many_to_device (the CUDA engine on args.device), the GIL released. Returns
/// the load's jtree::DeviceStats as {"direct_bytes", "buffered_bytes", "direct_io_note",
/// "zero_copy_bytes", "zero_copy_note"}.
nb::dict read_to_device(const jtree::Reader& reader, nb::list requests,
                        const DeviceReadArgs& args);

/// The same requests through jtree's host-memory CopyEngine (lib/src/testing/test_hooks.h):
/// every dst_address is a host address. For tests without a GPU: the Python planning runs end
/// to end. Returns the engine's counters (peak pinned bytes, copies...) and the load's
/// DeviceStats (as read_to_device) in one dict.
nb::dict read_staged_host_for_tests(const jtree::Reader& reader, nb::list requests,
                                    const DeviceReadArgs& args);

/// Registers cuda_built(), cuda_device_count(), check_device_options() and the test hook
/// _refuse_direct_open_for_tests() on the module.
void register_device(nb::module_& m);

}  // namespace jtpy
