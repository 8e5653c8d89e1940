#include "jtree/dtype.h"

#include <array>
#include <string>

namespace jtree {
namespace {

// name, stored bits, memory item size, float component bytes (for FloatSplit).
constexpr std::array<DTypeInfo, kDTypeCodeEnd> kTable = {{
    {DType::kInvalid, "invalid", 0, 0, 0},
    {DType::kBool, "bool", 8, 1, 0},
    {DType::kInt8, "int8", 8, 1, 0},
    {DType::kInt16, "int16", 16, 2, 0},
    {DType::kInt32, "int32", 32, 4, 0},
    {DType::kInt64, "int64", 64, 8, 0},
    {DType::kUInt8, "uint8", 8, 1, 0},
    {DType::kUInt16, "uint16", 16, 2, 0},
    {DType::kUInt32, "uint32", 32, 4, 0},
    {DType::kUInt64, "uint64", 64, 8, 0},
    {DType::kFloat16, "float16", 16, 2, 2},
    {DType::kBFloat16, "bfloat16", 16, 2, 2},
    {DType::kFloat32, "float32", 32, 4, 4},
    {DType::kFloat64, "float64", 64, 8, 8},
    {DType::kComplex64, "complex64", 64, 8, 4},
    {DType::kComplex128, "complex128", 128, 16, 8},
    {DType::kFloat8E4M3FN, "float8_e4m3fn", 8, 1, 0},
    {DType::kFloat8E4M3FNUZ, "float8_e4m3fnuz", 8, 1, 0},
    {DType::kFloat8E5M2, "float8_e5m2", 8, 1, 0},
    {DType::kFloat8E5M2FNUZ, "float8_e5m2fnuz", 8, 1, 0},
    {DType::kFloat8E8M0FNU, "float8_e8m0fnu", 8, 1, 0},
    {DType::kFloat4E2M1FN, "float4_e2m1fn", 4, 1, 0},
    {DType::kInt4, "int4", 4, 1, 0},
    {DType::kUInt4, "uint4", 4, 1, 0},
    // Format version 2. The 6-bit types take a whole byte in the file too (their value in the
    // low 6 bits, as ml_dtypes holds them): no packing, so a chunk is its memory bytes.
    {DType::kFloat8E4M3B11FNUZ, "float8_e4m3b11fnuz", 8, 1, 0},
    {DType::kFloat8E3M4, "float8_e3m4", 8, 1, 0},
    {DType::kFloat8E4M3, "float8_e4m3", 8, 1, 0},
    {DType::kFloat6E2M3FN, "float6_e2m3fn", 8, 1, 0},
    {DType::kFloat6E3M2FN, "float6_e3m2fn", 8, 1, 0},
}};

}  // namespace

bool dtype_known(uint8_t code) { return code > 0 && code < kDTypeCodeEnd; }

std::optional<DTypeInfo> dtype_info(DType dtype) {
  auto code = static_cast<uint8_t>(dtype);
  if (!dtype_known(code)) return std::nullopt;
  return kTable[code];
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (int i = 1; i < kDTypeCodeEnd; ++i) {
    if (kTable[i].name == name) return kTable[i].dtype;
  }
  return std::nullopt;
}

std::string_view dtype_name(DType dtype) {
  auto code = static_cast<uint8_t>(dtype);
  if (dtype_known(code)) return kTable[code].name;
  static thread_local std::string buf;
  buf = "dtype#" + std::to_string(code);
  return buf;
}

bool is_4bit(DType dtype) {
  return dtype == DType::kInt4 || dtype == DType::kUInt4 || dtype == DType::kFloat4E2M1FN;
}

uint64_t memory_bytes(DType dtype, uint64_t elements) {
  return elements * kTable[static_cast<uint8_t>(dtype)].item_size;
}

uint64_t stored_bytes(DType dtype, uint64_t elements) {
  const auto& info = kTable[static_cast<uint8_t>(dtype)];
  if (info.stored_bits == 4) return elements / 2 + (elements & 1);
  return elements * (info.stored_bits / 8);
}

}  // namespace jtree
