// Writing arrays as NumPy .npy files (format version 1.0).
#pragma once

#include <cstdio>
#include <span>
#include <string>

#include "jtree/jtree.h"

namespace jtree::cli {

/// The .npy 'descr' of a dtype. Types NumPy lacks natively (bfloat16, float8, float4) are
/// written as raw 'V' items of their size, which ml_dtypes users can view() as the real type;
/// int4/uint4 as int8/uint8 (npy_widen4 turns the library's bytes into those values).
std::string npy_descr(DType dtype, bool* exact);

/// For a .npy of int4 (written as int8): sign-extends each byte's low nibble in place, since
/// in memory the library holds int4 -1 as 0x0F (ml_dtypes' bytes), which as int8 reads 15.
/// Other dtypes are left alone.
void npy_widen4(DType dtype, std::span<std::byte> data);

/// The .npy preamble (magic, version, header dict padded to 64 bytes) for an array: the data
/// (C order) follows it.
std::string npy_header(DType dtype, const Shape& shape);

/// Writes a complete .npy file.
Status write_npy(const std::string& path, DType dtype, const Shape& shape,
                 std::span<const std::byte> data);

}  // namespace jtree::cli
