// Array elements as numbers: what `get --json` prints and what `diff` subtracts. Every dtype
// jtree stores is decoded (float16, bfloat16, the float8 family and float4 included), in the
// memory layout of read buffers (4-bit types one per byte).
#pragma once

#include <cstdint>
#include <optional>

#include "cli_util.h"
#include "jtree/dtype.h"

namespace jtree::cli {

/// One element's value.
struct Element {
  enum class Kind { kBool, kInt, kUInt, kFloat, kComplex } kind = Kind::kFloat;
  int64_t i = 0;   ///< kInt, kBool (0/1)
  uint64_t u = 0;  ///< kUInt
  double re = 0;   ///< kFloat, kComplex (also the value of the integer kinds, rounded)
  double im = 0;   ///< kComplex
};

/// Element `p` of an array of `dtype` (memory layout); nullopt for unknown dtypes.
std::optional<Element> decode_element(DType dtype, const std::byte* p);

/// |a - b| as a double (exact for integers up to 2^53; NaN when either float is NaN, unless
/// both are: then 0).
double abs_difference(const Element& a, const Element& b);

/// Appends the element to `j`: a number (integers exact), true/false, [re, im] for complex;
/// "nan", "inf" or "-inf" as strings (JSON has no such numbers).
void json_element(Json& j, const Element& e);

}  // namespace jtree::cli
