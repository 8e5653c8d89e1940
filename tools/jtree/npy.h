// Writing arrays as NumPy .npy files (format version 1.0).
#pragma once

#include <cstdio>
#include <span>
#include <string>

#include "jtree/jtree.h"

namespace jtree::cli {

/// The .npy 'descr' of a dtype. Types NumPy lacks natively (bfloat16, float8, float4) are
/// written as raw 'V' items of their size, which ml_dtypes users can view() as the real type;
/// int4/uint4 (one byte per element in memory, sign-extended) as int8/uint8.
std::string npy_descr(DType dtype, bool* exact);

/// The .npy preamble (magic, version, header dict padded to 64 bytes) for an array: the data
/// (C order) follows it.
std::string npy_header(DType dtype, const Shape& shape);

/// Writes a complete .npy file.
Status write_npy(const std::string& path, DType dtype, const Shape& shape,
                 std::span<const std::byte> data);

}  // namespace jtree::cli
