#include "element.h"

#include <cmath>
#include <cstring>

namespace jtree::cli {
namespace {

template <typename T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// A small IEEE-like float: sign bit (if `sign`), `ebits` of exponent with `bias`, `mbits` of
// mantissa, subnormals at exponent 0. The special values differ per format and are handled by
// the caller.
double minifloat(uint32_t bits, int ebits, int mbits, int bias, bool sign = true) {
  const uint32_t m = bits & ((1u << mbits) - 1);
  const uint32_t e = (bits >> mbits) & ((1u << ebits) - 1);
  const bool neg = sign && ((bits >> (ebits + mbits)) & 1);
  double v = e == 0 ? std::ldexp(static_cast<double>(m), 1 - bias - mbits)
                    : std::ldexp(static_cast<double>(m | (1u << mbits)), static_cast<int>(e) - bias - mbits);
  return neg ? -v : v;
}

Element real(double v) {
  Element e;
  e.kind = Element::Kind::kFloat;
  e.re = v;
  return e;
}

Element sint(int64_t v) {
  Element e;
  e.kind = Element::Kind::kInt;
  e.i = v;
  e.re = static_cast<double>(v);
  return e;
}

Element uint(uint64_t v) {
  Element e;
  e.kind = Element::Kind::kUInt;
  e.u = v;
  e.re = static_cast<double>(v);
  return e;
}

}  // namespace

std::optional<Element> decode_element(DType dtype, const std::byte* p) {
  const uint8_t b = load<uint8_t>(p);
  switch (dtype) {
    case DType::kBool: {
      Element e = sint(b != 0);
      e.kind = Element::Kind::kBool;
      return e;
    }
    case DType::kInt8: return sint(load<int8_t>(p));
    // int4 in memory: the value in the low nibble (the high one zero, or sign-extended).
    case DType::kInt4: return sint(static_cast<int8_t>(static_cast<uint8_t>(b << 4)) >> 4);
    case DType::kInt16: return sint(load<int16_t>(p));
    case DType::kInt32: return sint(load<int32_t>(p));
    case DType::kInt64: return sint(load<int64_t>(p));
    case DType::kUInt8: return uint(b);
    case DType::kUInt4: return uint(b & 0x0F);
    case DType::kUInt16: return uint(load<uint16_t>(p));
    case DType::kUInt32: return uint(load<uint32_t>(p));
    case DType::kUInt64: return uint(load<uint64_t>(p));
    case DType::kFloat16: {
      const uint16_t h = load<uint16_t>(p);
      if (((h >> 10) & 0x1f) == 0x1f) {
        return real((h & 0x3ff) ? NAN : ((h >> 15) ? -INFINITY : INFINITY));
      }
      return real(minifloat(h, 5, 10, 15));
    }
    case DType::kBFloat16: {
      const uint32_t u = static_cast<uint32_t>(load<uint16_t>(p)) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return real(f);
    }
    case DType::kFloat32: return real(load<float>(p));
    case DType::kFloat64: return real(load<double>(p));
    case DType::kComplex64:
    case DType::kComplex128: {
      Element e;
      e.kind = Element::Kind::kComplex;
      if (dtype == DType::kComplex64) {
        e.re = load<float>(p);
        e.im = load<float>(p + 4);
      } else {
        e.re = load<double>(p);
        e.im = load<double>(p + 8);
      }
      return e;
    }
    case DType::kFloat8E4M3FN:  // no infinities; S.1111.111 is NaN
      return real((b & 0x7f) == 0x7f ? NAN : minifloat(b, 4, 3, 7));
    case DType::kFloat8E4M3FNUZ:  // no infinities, no -0: 0x80 is NaN
      return real(b == 0x80 ? NAN : minifloat(b, 4, 3, 8));
    case DType::kFloat8E5M2:  // IEEE-like
      if (((b >> 2) & 0x1f) == 0x1f) return real((b & 3) ? NAN : ((b >> 7) ? -INFINITY : INFINITY));
      return real(minifloat(b, 5, 2, 15));
    case DType::kFloat8E5M2FNUZ:
      return real(b == 0x80 ? NAN : minifloat(b, 5, 2, 16));
    case DType::kFloat8E8M0FNU:  // a power of two, 2^(e - 127); 0xff is NaN
      return real(b == 0xff ? NAN : std::ldexp(1.0, static_cast<int>(b) - 127));
    case DType::kFloat4E2M1FN:  // one per byte in memory, the low nibble
      return real(minifloat(b & 0x0f, 2, 1, 1));
    case DType::kFloat8E4M3B11FNUZ:  // no infinities, no -0: 0x80 is NaN; bias 11
      return real(b == 0x80 ? NAN : minifloat(b, 4, 3, 11));
    case DType::kFloat8E3M4:  // IEEE-like
      if (((b >> 4) & 0x7) == 0x7) return real((b & 0xf) ? NAN : ((b >> 7) ? -INFINITY : INFINITY));
      return real(minifloat(b, 3, 4, 3));
    case DType::kFloat8E4M3:  // IEEE-like
      if (((b >> 3) & 0xf) == 0xf) return real((b & 7) ? NAN : ((b >> 7) ? -INFINITY : INFINITY));
      return real(minifloat(b, 4, 3, 7));
    case DType::kFloat6E2M3FN:  // one per byte, the low 6 bits; finite only
      return real(minifloat(b & 0x3f, 2, 3, 1));
    case DType::kFloat6E3M2FN:  // one per byte, the low 6 bits; finite only
      return real(minifloat(b & 0x3f, 3, 2, 3));
    default: return std::nullopt;
  }
}

double abs_difference(const Element& a, const Element& b) {
  if (a.kind == Element::Kind::kComplex || b.kind == Element::Kind::kComplex) {
    return std::hypot(a.re - b.re, a.im - b.im);
  }
  if (a.kind == Element::Kind::kFloat || b.kind == Element::Kind::kFloat) {
    if (std::isnan(a.re) && std::isnan(b.re)) return 0;
    if (a.re == b.re) return 0;  // also equal infinities (their difference is NaN)
    return std::fabs(a.re - b.re);
  }
  // Integers: the difference exactly, then rounded once.
  if (a.kind == Element::Kind::kUInt && b.kind == Element::Kind::kUInt) {
    return static_cast<double>(a.u > b.u ? a.u - b.u : b.u - a.u);
  }
  const int64_t x = a.kind == Element::Kind::kUInt ? static_cast<int64_t>(a.u) : a.i;
  const int64_t y = b.kind == Element::Kind::kUInt ? static_cast<int64_t>(b.u) : b.i;
  // In unsigned arithmetic: the difference of two int64 always fits in uint64.
  const uint64_t d = x > y ? static_cast<uint64_t>(x) - static_cast<uint64_t>(y)
                           : static_cast<uint64_t>(y) - static_cast<uint64_t>(x);
  return static_cast<double>(d);
}

namespace {

void json_real(Json& j, double v) {
  if (std::isnan(v)) j.str("nan");
  else if (std::isinf(v)) j.str(v > 0 ? "inf" : "-inf");
  else j.num(v);
}

}  // namespace

void json_element(Json& j, const Element& e) {
  switch (e.kind) {
    case Element::Kind::kBool: j.boolean(e.i != 0); break;
    case Element::Kind::kInt: j.num(e.i); break;
    case Element::Kind::kUInt: j.num(e.u); break;
    case Element::Kind::kFloat: json_real(j, e.re); break;
    case Element::Kind::kComplex:
      j.begin_array();
      json_real(j, e.re);
      json_real(j, e.im);
      j.end_array();
      break;
  }
}

}  // namespace jtree::cli
