// jtree._jtree.device_array: device (or host) memory that a load filled, handed to a framework
// through DLPack without a copy. JAX has no way to wrap an address as an array; the direct path
// for JAX (python/jtree/_device_jax.py) fills one allocation of JAX's own per device and hands
// each leaf back as a view of it, this object keeping the allocation alive.
#include <nanobind/ndarray.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common.h"
#include "dlpack_dtype.h"

namespace jtpy {

void register_device_array(nb::module_& m) {
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
