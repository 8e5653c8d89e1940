// jtree/dtype.h — element types of array leaves.
//
// Each DType has two sizes:
//  - its *memory* item size: bytes per element in the buffers the API reads from and writes
//    into (for the 4-bit types one byte per element, as ml_dtypes holds them: the value in the
//    low nibble, the high nibble zero on read, int4 included; a written int4 byte may also be
//    sign-extended, only its low nibble is stored);
//  - its *stored* bit width: bits per element in the file (4-bit types are packed two per byte,
//    the first element of each pair in the low nibble; see spec/FORMAT.md).
// The numeric values are the file's codes and never change.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "jtree/export.h"

namespace jtree {

enum class DType : uint8_t {
  kInvalid = 0,
  kBool = 1,
  kInt8 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kUInt8 = 6,
  kUInt16 = 7,
  kUInt32 = 8,
  kUInt64 = 9,
  kFloat16 = 10,
  kBFloat16 = 11,
  kFloat32 = 12,
  kFloat64 = 13,
  kComplex64 = 14,
  kComplex128 = 15,
  kFloat8E4M3FN = 16,
  kFloat8E4M3FNUZ = 17,
  kFloat8E5M2 = 18,
  kFloat8E5M2FNUZ = 19,
  kFloat8E8M0FNU = 20,
  kFloat4E2M1FN = 21,
  kInt4 = 22,
  kUInt4 = 23,
  // Format version 2 (a file holding one of these has min_read_version 2).
  kFloat8E4M3B11FNUZ = 24,
  kFloat8E3M4 = 25,
  kFloat8E4M3 = 26,
  kFloat6E2M3FN = 27,  ///< 6 bits, stored and held one element per byte (the low 6 bits)
  kFloat6E3M2FN = 28,  ///< 6 bits, stored and held one element per byte (the low 6 bits)
};

/// One past the largest code this build knows.
inline constexpr int kDTypeCodeEnd = 29;

/// The first code of format version 2: files using a code >= this need a version-2 reader.
inline constexpr uint8_t kFirstVersion2DTypeCode = 24;

/// Static facts about a dtype.
struct JTREE_API DTypeInfo {
  DType dtype;
  std::string_view name;     ///< NumPy/ml_dtypes name: "bfloat16", "float8_e4m3fn", "int4"...
  uint8_t stored_bits;       ///< bits per element in the file: 4, 8, 16, 32, 64 or 128
                             ///< (8 for the 6-bit float types, stored one per byte)
  uint8_t item_size;         ///< bytes per element in memory buffers
  uint8_t float_component;   ///< bytes of one IEEE-like float component (2/4/8), 0 if none:
                             ///< the element size FloatSplit rotates (complex: per component)
};

/// Facts about `dtype`, or nullopt for kInvalid and codes this build does not know.
JTREE_API std::optional<DTypeInfo> dtype_info(DType dtype);

/// True when `code` names a dtype this build knows.
JTREE_API bool dtype_known(uint8_t code);

/// The dtype called `name` (NumPy/ml_dtypes spelling, e.g. "float32", "bfloat16"), or nullopt.
JTREE_API std::optional<DType> dtype_from_name(std::string_view name);

/// The name of `dtype`, or "dtype#<code>" for unknown codes (for messages).
JTREE_API std::string_view dtype_name(DType dtype);

/// Bytes that `elements` elements of `dtype` take in memory buffers.
/// Precondition: the dtype is known; overflow is the caller's to rule out (see limits).
JTREE_API uint64_t memory_bytes(DType dtype, uint64_t elements);

/// Bytes that `elements` elements take when stored (4-bit types: ceil(elements / 2)).
JTREE_API uint64_t stored_bytes(DType dtype, uint64_t elements);

/// True for the packed 4-bit types.
JTREE_API bool is_4bit(DType dtype);

}  // namespace jtree
