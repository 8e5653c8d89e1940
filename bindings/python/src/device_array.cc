// jtree._jtree.device_array: device (or host) memory that a load filled, handed to a framework
// through DLPack without a copy; and jtree._jtree.device_memory, such memory. JAX has no way to
// wrap an address as an array; the direct path for JAX (python/jtree/_device_jax.py) fills one
// allocation per device (jtree::allocate_device_memory, else one of JAX's own) and hands each
// leaf back as a view of it, the view keeping the allocation alive.
#include <nanobind/ndarray.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "common.h"
#include "dlpack_dtype.h"
#include "jtree/device.h"

namespace jtpy {

namespace {

// Memory a load fills and its leaves view (device_array's owner): on a CUDA device
// (jtree::allocate_device_memory), or, for tests, in host memory.
struct NativeMemory {
  std::unique_ptr<jtree::DeviceMemory> device;
  std::unique_ptr<void, decltype(&std::free)> host{nullptr, &std::free};
  uintptr_t address = 0;
  uint64_t size = 0;
};

}  // namespace

void register_device_array(nb::module_& m) {
  nb::class_<NativeMemory>(m, "NativeMemory",
                           "Memory a load into device memory fills (device_memory).",
                           nb::is_weak_referenceable())
      .def_ro("address", &NativeMemory::address, "The first byte's address.")
      .def_ro("size", &NativeMemory::size, "Bytes.");
  m.def(
      "device_memory",
      [](int device, uint64_t bytes, uint64_t keep_free) {
        auto mem = std::make_unique<NativeMemory>();
        {
          nb::gil_scoped_release release;  // (cudaMalloc may wait for the device)
          mem->device = value_or_raise(jtree::allocate_device_memory(device, bytes, keep_free));
        }
        mem->address = reinterpret_cast<uintptr_t>(mem->device->data());
        mem->size = bytes;
        return mem;
      },
      nb::arg("device"), nb::arg("bytes"), nb::arg("keep_free") = 0,
      "`bytes` of memory on CUDA device `device` (jtree::allocate_device_memory: cudaMalloc, "
      "not initialised), freed when the object is. ResourceExhaustedError when the device "
      "lacks it, or when fewer than `keep_free` bytes would stay free; NotSupportedError "
      "without CUDA or device.");
  m.def(
      "_host_memory_for_tests",
      [](uint64_t bytes) {
        auto mem = std::make_unique<NativeMemory>();
        const uint64_t n = (bytes + 255) / 256 * 256;
        mem->host.reset(std::aligned_alloc(256, n == 0 ? 256 : n));
        if (!mem->host) throw std::bad_alloc();
        mem->address = reinterpret_cast<uintptr_t>(mem->host.get());
        mem->size = bytes;
        return mem;
      },
      nb::arg("bytes"),
      "TESTS ONLY: device_memory's stand-in, `bytes` of host memory aligned to 256 bytes.");

  m.def(
      "device_array",
      [](nb::handle owner, uintptr_t address, const std::vector<size_t>& shape, int dtype_code,
         int device_type, int device_id) {
        if (dtype_code < 0 || dtype_code > 255 ||
            !jtree::dtype_known(static_cast<uint8_t>(dtype_code))) {
          throw_value_error("device_array: unknown jtree dtype code " +
                            std::to_string(dtype_code));
        }
        const auto d = static_cast<jtree::DType>(dtype_code);
        const std::optional<nb::dlpack::dtype> dl = dlpack_of_dtype(d);
        if (!dl) {
          throw_value_error("device_array: dtype " + std::string(jtree::dtype_info(d)->name) +
                            " has no DLPack code");
        }
        if (device_type != nb::device::cpu::value && device_type != nb::device::cuda::value) {
          throw_value_error("device_array: DLPack device type " + std::to_string(device_type) +
                            " (1: CPU, 2: CUDA)");
        }
        if (address == 0) throw_value_error("device_array: null address");
        return nb::ndarray<nb::array_api>(reinterpret_cast<void*>(address), shape.size(),
                                          shape.data(), owner, nullptr, *dl, device_type,
                                          device_id);
      },
      nb::arg("owner"), nb::arg("address"), nb::arg("shape"), nb::arg("dtype_code"),
      nb::arg("device_type"), nb::arg("device_id"),
      "A C-contiguous array of `shape` and jtree dtype `dtype_code` at `address` on a DLPack "
      "device (type 1: CPU, 2: CUDA; `device_id`), for `jax.dlpack.from_dlpack` and other "
      "DLPack consumers. Copies nothing and checks nothing about the memory: the caller "
      "guarantees that `owner` (kept alive by the result) owns at least the array's bytes at "
      "`address`, and that they are ready (no copy to them still running).");
}

}  // namespace jtpy
