// Loads into device memory for Python: the request list in, jtree::read_many_staged through the
// CUDA engine (or, for tests, the host stand-in engine) with the GIL released, Status out.
//
// The destinations are raw addresses (torch's data_ptr(), a DLPack buffer's pointer): the
// Python layer allocates them with the exact byte count the box takes, and the library checks
// that count against the leaf before pinning anything (InvalidArgument naming the leaf).
#include "device_read.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <limits>

#include <vector>

#include "common.h"
#include "jtree/device.h"
#include "py_progress.h"
#include "test_hooks.h"  // (lib/src/testing: the library's test hooks, the module's one seam)

namespace jtpy {
namespace {

std::vector<jtree::DeviceRequest> device_requests(const jtree::Reader& reader, nb::list requests) {
  std::vector<jtree::DeviceRequest> reqs;
  reqs.reserve(requests.size());
  for (nb::handle h : requests) {
    auto t = nb::cast<nb::tuple>(h);
    if (t.size() != 4) {
      throw_value_error("read_to_device: requests are (leaf, box | None, dst_address, nbytes)");
    }
    jtree::DeviceRequest r;
    r.leaf = nb::cast<uint32_t>(t[0]);
    if (!t[1].is_none()) {
      auto box = nb::cast<nb::tuple>(t[1]);
      if (box.size() != 2) throw_value_error("read_to_device: a box is (begin, end)");
      jtree::Box b;
      b.begin = nb::cast<std::vector<uint64_t>>(box[0]);
      b.end = nb::cast<std::vector<uint64_t>>(box[1]);
      r.box = std::move(b);
    }
    r.dst = reinterpret_cast<void*>(nb::cast<uintptr_t>(t[2]));
    r.dst_bytes = nb::cast<uint64_t>(t[3]);
    reqs.push_back(std::move(r));
  }
  return reqs;
}

// The C++ options of a load: the library's defaults where a setting is not given, the
// direct_io name parsed and every value checked by the library (InvalidArgumentError naming
// the setting), so that bad values are refused before anything is read, on any machine.
jtree::DeviceOptions device_options(const DeviceReadArgs& a) {
  jtree::DeviceOptions o;
  o.device = a.device;
  if (a.staging_bytes) o.staging_bytes = *a.staging_bytes;
  if (a.staging_buffers) {
    // (Outside int's range: saturated, which check() refuses like any value past 64.)
    o.staging_buffers = static_cast<int>(std::clamp<int64_t>(
        *a.staging_buffers, std::numeric_limits<int>::min(), std::numeric_limits<int>::max()));
  }
  o.direct_io = value_or_raise(jtree::parse_direct_io(a.direct_io));
  o.zero_copy = value_or_raise(jtree::parse_zero_copy(a.zero_copy));
  o.read.verify_checksums = a.verify;
  o.read.threads = a.threads;
  check(o.check());
  return o;
}

nb::dict stats_dict(const jtree::DeviceStats& s) {
  nb::dict d;
  d["direct_bytes"] = s.direct_bytes;
  d["buffered_bytes"] = s.buffered_bytes;
  d["direct_io_note"] = decode_utf8(s.direct_io_note);  // (it may quote a file's path)
  d["zero_copy_bytes"] = s.zero_copy_bytes;
  d["zero_copy_note"] = decode_utf8(s.zero_copy_note);
  return d;
}

// Runs a load through `engine` (null: read_many_to_device on args.device), the GIL released.
// Returns its stats.
nb::dict run(const jtree::Reader& reader, nb::list requests, const DeviceReadArgs& args,
             jtree::CopyEngine* engine) {
  jtree::DeviceOptions o = device_options(args);
  std::vector<jtree::DeviceRequest> reqs = device_requests(reader, requests);
  jtree::DeviceStats stats;
  o.stats = &stats;
  PyProgress report(args.progress);
  o.read.progress = report.fn();
  const jtree::Status st = without_gil([&] {
    return engine ? jtree::read_many_staged(reader, reqs, *engine, o)
                  : jtree::read_many_to_device(reader, reqs, o);
  });
  report.rethrow();
  check(st, reader);
  return stats_dict(stats);
}

}  // namespace

nb::dict read_to_device(const jtree::Reader& reader, nb::list requests,
                        const DeviceReadArgs& args) {
  return run(reader, requests, args, nullptr);
}

nb::dict read_staged_host_for_tests(const jtree::Reader& reader, nb::list requests,
                                    const DeviceReadArgs& args) {
  jtree::testing::HostEngineForTests host;
  nb::dict d = run(reader, requests, args, &host.engine());
  const jtree::testing::HostEngineCounters c = host.counters();
  d["peak_pinned_bytes"] = c.peak_pinned_bytes;
  d["pinned_bytes"] = c.pinned_bytes;
  d["allocations"] = c.allocations;
  d["frees"] = c.frees;
  d["copies"] = c.copies;
  d["bytes_copied"] = c.bytes_copied;
  d["misuses"] = c.misuses;
  d["registrations"] = c.registrations;
  d["unregistrations"] = c.unregistrations;
  d["peak_registered_bytes"] = c.peak_registered_bytes;
  return d;
}

void register_device(nb::module_& m) {
  m.def("cuda_built", &jtree::cuda_built,
        "True when this build of jtree has CUDA support (loads straight into GPU memory).");
  m.def("release_pinned_memory", &jtree::release_pinned_memory,
        "Frees the pinned staging buffers loads to a device keep for the process's next load "
        "(jtree::release_pinned_memory); returns the bytes freed (0 without CUDA).");
  m.def("cuda_device_count", &jtree::cuda_device_count,
        "The CUDA devices this process can use (0 without CUDA support, driver or device).");
  m.def(
      "check_device_options",
      [](std::optional<uint64_t> staging_bytes, std::optional<int64_t> staging_buffers,
         const std::string& direct_io, const std::string& zero_copy) {
        DeviceReadArgs a;
        a.staging_bytes = staging_bytes;
        a.staging_buffers = staging_buffers;
        a.direct_io = direct_io;
        a.zero_copy = zero_copy;
        (void)device_options(a);
      },
      nb::arg("staging_bytes").none() = nb::none(), nb::arg("staging_buffers").none() = nb::none(),
      nb::arg("direct_io") = "auto", nb::arg("zero_copy") = "off",
      "Checks the settings of a load to a device (jtree::DeviceOptions::check, "
      "jtree::parse_direct_io, jtree::parse_zero_copy; None: the default): "
      "InvalidArgumentError naming the setting.");
  m.def(
      "pin_staging_buffers_async",
      [](int device, std::optional<uint64_t> staging_bytes,
         std::optional<int64_t> staging_buffers) {
        DeviceReadArgs a;
        a.device = device;
        a.staging_bytes = staging_bytes;
        a.staging_buffers = staging_buffers;
        check(jtree::pin_staging_buffers_async(device_options(a)));
      },
      nb::arg("device"), nb::arg("staging_bytes").none() = nb::none(),
      nb::arg("staging_buffers").none() = nb::none(),
      "Starts pinning the staging buffers of a load to CUDA device `device` on a thread of its "
      "own and returns at once (jtree::pin_staging_buffers_async): a load planned meanwhile "
      "finds them pinned. NotSupportedError without CUDA or device.");
  m.def("_refuse_direct_open_for_tests", &jtree::testing::refuse_direct_open,
        nb::arg("refuse"),
        "TESTS ONLY: while True, files opened from now on refuse O_DIRECT as a file system "
        "without it does (EINVAL), as tmpfs did before Linux 6.6. Not a public API.");
  m.def("_cold_direct_bytes_for_tests", &jtree::testing::cold_direct_bytes_read,
        "TESTS ONLY: bytes that reads of cold local files have read with O_DIRECT "
        "(lib/src/read/cold_reads.h), in all, since the process started. Not a public API.");
}

}  // namespace jtpy
