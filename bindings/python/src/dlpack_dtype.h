// The one table between jtree dtypes and DLPack dtypes, both ways: arrays imported through
// DLPack for a save (builder.cc) and device memory handed to a framework after a load
// (device_array.cc).
#pragma once

#include <nanobind/ndarray.h>

#include <optional>

#include "jtree/dtype.h"

namespace jtpy {

namespace nb = nanobind;

/// The jtree dtype of a DLPack dtype; nullopt where jtree has none (or lanes != 1).
std::optional<jtree::DType> dtype_from_dlpack(nb::dlpack::dtype t);

/// The DLPack dtype of a jtree dtype; nullopt for the 4-bit dtypes (two elements per byte,
/// which DLPack describes differently) and any dtype without a DLPack code.
std::optional<nb::dlpack::dtype> dlpack_of_dtype(jtree::DType d);

}  // namespace jtpy
