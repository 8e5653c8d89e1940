#include "dlpack_dtype.h"

#include <cstdint>

namespace jtpy {
namespace {

using C = nb::dlpack::dtype_code;
using jtree::DType;

struct Pair {
  DType dtype;
  C code;
  uint8_t bits;
};

// DLPack codes 7-16 (DLPack 1.1) name one float8 or float6 type each, whatever the bits;
// jtree stores the 6-bit types one element per byte.
constexpr Pair kPairs[] = {
    {DType::kBool, C::Bool, 8},
    {DType::kInt8, C::Int, 8},
    {DType::kInt16, C::Int, 16},
    {DType::kInt32, C::Int, 32},
    {DType::kInt64, C::Int, 64},
    {DType::kUInt8, C::UInt, 8},
    {DType::kUInt16, C::UInt, 16},
    {DType::kUInt32, C::UInt, 32},
    {DType::kUInt64, C::UInt, 64},
    {DType::kFloat16, C::Float, 16},
    {DType::kFloat32, C::Float, 32},
    {DType::kFloat64, C::Float, 64},
    {DType::kBFloat16, C::Bfloat, 16},
    {DType::kComplex64, C::Complex, 64},
    {DType::kComplex128, C::Complex, 128},
    {DType::kFloat8E4M3FN, C::Float8_E4M3FN, 8},
    {DType::kFloat8E4M3FNUZ, C::Float8_E4M3FNUZ, 8},
    {DType::kFloat8E5M2, C::Float8_E5M2, 8},
    {DType::kFloat8E5M2FNUZ, C::Float8_E5M2FNUZ, 8},
    {DType::kFloat8E8M0FNU, C::Float8_E8M0FNU, 8},
    // Format version 2 (DLPack 1.1 codes).
    {DType::kFloat8E4M3B11FNUZ, C::Float8_E4M3B11FNUZ, 8},
    {DType::kFloat8E3M4, C::Float8_E3M4, 8},
    {DType::kFloat8E4M3, C::Float8_E4M3, 8},
    {DType::kFloat6E2M3FN, C::Float6_E2M3FN, 6},
    {DType::kFloat6E3M2FN, C::Float6_E3M2FN, 6},
};

// Codes that name one type whatever `bits` says (the float8 and float6 ones).
bool one_type_per_code(C c) {
  return static_cast<uint8_t>(c) >= static_cast<uint8_t>(C::Float8_E3M4);
}

}  // namespace

std::optional<DType> dtype_from_dlpack(nb::dlpack::dtype t) {
  if (t.lanes != 1) return std::nullopt;
  for (const Pair& p : kPairs) {
    if (static_cast<uint8_t>(p.code) != t.code) continue;
    if (one_type_per_code(p.code) || p.bits == t.bits) return p.dtype;
  }
  return std::nullopt;
}

std::optional<nb::dlpack::dtype> dlpack_of_dtype(DType d) {
  for (const Pair& p : kPairs) {
    if (p.dtype == d) {
      nb::dlpack::dtype t;
      t.code = static_cast<uint8_t>(p.code);
      t.bits = p.bits;
      t.lanes = 1;
      return t;
    }
  }
  return std::nullopt;
}

}  // namespace jtpy
