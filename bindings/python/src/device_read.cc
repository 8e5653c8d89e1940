// Loads into device memory for Python: the request list in, jtree::read_many_staged through the
// CUDA engine (or, for tests, the host stand-in engine) with the GIL released, Status out.
//
// The destinations are raw addresses (torch's data_ptr(), a DLPack buffer's pointer): the
// Python layer allocates them with the exact byte count the box takes, and the library checks
// that count against the leaf before pinning anything (InvalidArgument naming the leaf).
#include "device_read.h"

#include <nanobind/stl/vector.h>

#include <vector>

#include "common.h"
#include "host_copy_engine.h"  // (lib/src/cuda: internal to the library, used by the test hook)
#include "jtree/device.h"
#include "py_progress.h"

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

jtree::DeviceOptions device_options(const DeviceReadArgs& a) {
  jtree::DeviceOptions o;
  o.device = a.device;
  if (a.staging_bytes > 0) o.staging_bytes = a.staging_bytes;
  if (a.staging_buffers > 0) o.staging_buffers = a.staging_buffers;
  o.read.verify_checksums = a.verify;
  o.read.threads = a.threads;
  return o;
}

// Runs a load through `engine` (null: read_many_to_device on args.device), the GIL released.
void run(const jtree::Reader& reader, nb::list requests, const DeviceReadArgs& args,
         jtree::CopyEngine* engine) {
  std::vector<jtree::DeviceRequest> reqs = device_requests(reader, requests);
  jtree::DeviceOptions o = device_options(args);
  PyProgress report(args.progress);
  o.read.progress = report.fn();
  const jtree::Status st = without_gil([&] {
    return engine ? jtree::read_many_staged(reader, reqs, *engine, o)
                  : jtree::read_many_to_device(reader, reqs, o);
  });
  report.rethrow();
  check(st);
}

}  // namespace

void read_to_device(const jtree::Reader& reader, nb::list requests, const DeviceReadArgs& args) {
  run(reader, requests, args, nullptr);
}

nb::dict read_staged_host_for_tests(const jtree::Reader& reader, nb::list requests,
                                    const DeviceReadArgs& args) {
  jtree::staging::HostCopyEngine engine;
  run(reader, requests, args, &engine);
  const auto s = engine.stats();
  nb::dict d;
  d["peak_pinned_bytes"] = s.peak_pinned_bytes;
  d["pinned_bytes"] = s.pinned_bytes;
  d["allocations"] = s.allocations;
  d["frees"] = s.frees;
  d["copies"] = s.copies_done;
  d["bytes_copied"] = s.bytes_copied;
  d["misuses"] = s.misuses;
  return d;
}

void register_device(nb::module_& m) {
  m.def("cuda_built", &jtree::cuda_built,
        "True when this build of jtree has CUDA support (loads straight into GPU memory).");
  m.def("cuda_device_count", &jtree::cuda_device_count,
        "The CUDA devices this process can use (0 without CUDA support, driver or device).");
}

}  // namespace jtpy
