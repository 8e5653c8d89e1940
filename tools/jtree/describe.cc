#include "describe.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

namespace jtree::cli {

uint64_t leaf_stored_bytes(const Reader& r, uint32_t leaf) {
  const Leaf& l = r.leaf(leaf);
  if (l.storage == Storage::kInline) return l.inline_data.size();
  if (l.storage != Storage::kChunked) return 0;
  uint64_t sum = 0;
  const uint64_t n = Tree::chunk_count(l);
  for (uint64_t k = 0; k < n; ++k) sum += r.chunk(l.first_chunk + k).stored_size;
  return sum;
}

uint64_t leaf_raw_bytes(const Leaf& l) {
  return l.is_payload() ? stored_bytes(l.dtype, l.num_elements()) : 0;
}

std::string storage_desc(const Leaf& l) {
  switch (l.storage) {
    case Storage::kNone: return "";
    case Storage::kInline: return "inline";
    case Storage::kChunked:
      if (l.codec == Codec::kRaw) return "raw";
      std::string s(codec_name(l.codec));
      s += std::to_string(l.level);
      if (l.filter != Filter::kNone) {
        s += '+';
        s += filter_name(l.filter);
      }
      return s;
  }
  return "";
}

// Decimal conversion below is quadratic in the size: past this many bytes (about 300 digits)
// a big int is shown in hexadecimal, head and tail (a file may hold 1 MiB of one).
constexpr size_t kMaxDecimalBytes = 128;

std::string big_int_hex(std::vector<uint8_t> mag, bool neg) {
  static const char* kHex = "0123456789abcdef";
  while (mag.size() > 1 && mag.back() == 0) mag.pop_back();
  std::string hex;
  for (size_t i = mag.size(); i-- > 0;) {
    hex += kHex[mag[i] >> 4];
    hex += kHex[mag[i] & 15];
  }
  const size_t lead = std::min(hex.find_first_not_of('0'), hex.size() - 1);
  hex.erase(0, lead);
  const size_t bits = hex.size() * 4 - (hex[0] < '2' ? 3 : hex[0] < '4' ? 2 : hex[0] < '8' ? 1 : 0);
  if (hex.size() > 64) hex = hex.substr(0, 32) + "..." + hex.substr(hex.size() - 32);
  return std::string(neg ? "-" : "") + "0x" + hex + " (an int of " + std::to_string(bits) +
         " bits)";
}

std::string big_int_decimal(const std::string& le) {
  if (le.empty()) return "0";
  // Magnitude as little-endian bytes; two's complement negation when negative.
  std::vector<uint8_t> mag(le.begin(), le.end());
  const bool neg = (mag.back() & 0x80) != 0;
  if (neg) {
    unsigned carry = 1;
    for (auto& b : mag) {
      unsigned v = static_cast<uint8_t>(~b) + carry;
      b = static_cast<uint8_t>(v);
      carry = v >> 8;
    }
  }
  if (mag.size() > kMaxDecimalBytes) return big_int_hex(std::move(mag), neg);
  std::string digits;
  while (true) {
    bool zero = true;
    unsigned rem = 0;
    for (size_t i = mag.size(); i-- > 0;) {
      unsigned cur = (rem << 8) | mag[i];
      mag[i] = static_cast<uint8_t>(cur / 10);
      rem = cur % 10;
      zero &= mag[i] == 0;
    }
    digits += static_cast<char>('0' + rem);
    if (zero) break;
  }
  if (neg) digits += '-';
  return std::string(digits.rbegin(), digits.rend());
}

std::string quoted(const std::string& s, size_t max_chars) {
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < max_chars; ++i) {
    char c = s[i];
    if (c == '\n') out += "\\n";
    else if (c == '\'') out += "\\'";
    else if (static_cast<unsigned char>(c) < 0x20) out += '?';
    else out += c;
  }
  out += "'";
  if (s.size() > max_chars) out += "...";
  return out;
}

namespace {

// "(re+imj)" as Python prints complex numbers.
std::string fmt_complex(double re, double im);

std::string fmt_double(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string fmt_complex(double re, double im) {
  std::string s = "(";
  s += fmt_double(re);
  if (im >= 0) s += '+';
  s += fmt_double(im);
  s += "j)";
  return s;
}

float half_to_float(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  float v;
  if (exp == 0) v = std::ldexp(static_cast<float>(man), -24);
  else if (exp == 31) v = man ? NAN : INFINITY;
  else v = std::ldexp(static_cast<float>(man | 0x400), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

}  // namespace

std::string scalar_value(const Leaf& l) {
  switch (l.kind) {
    case LeafKind::kInt:
      return l.big_int.empty() ? std::to_string(l.int_value) : big_int_decimal(l.big_int);
    case LeafKind::kFloat: return fmt_double(l.real);
    case LeafKind::kBool: return l.bool_value ? "True" : "False";
    case LeafKind::kComplex:
      return fmt_complex(l.real, l.imag);
    default: return "";
  }
}

std::string format_element(DType dtype, const std::byte* p) {
  auto load = [&](auto v) {
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  switch (dtype) {
    case DType::kBool: return load(uint8_t{}) ? "True" : "False";
    case DType::kInt8: return std::to_string(load(int8_t{}));
    case DType::kInt4:  // the value in the low nibble (the high one zero, or sign-extended)
      return std::to_string(static_cast<int8_t>(static_cast<uint8_t>(load(uint8_t{}) << 4)) >> 4);
    case DType::kInt16: return std::to_string(load(int16_t{}));
    case DType::kInt32: return std::to_string(load(int32_t{}));
    case DType::kInt64: return std::to_string(load(int64_t{}));
    case DType::kUInt8: return std::to_string(load(uint8_t{}));
    case DType::kUInt4: return std::to_string(load(uint8_t{}) & 0x0F);
    case DType::kUInt16: return std::to_string(load(uint16_t{}));
    case DType::kUInt32: return std::to_string(load(uint32_t{}));
    case DType::kUInt64: return std::to_string(load(uint64_t{}));
    case DType::kFloat16: return fmt_double(half_to_float(load(uint16_t{})));
    case DType::kBFloat16: {
      uint32_t u = static_cast<uint32_t>(load(uint16_t{})) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return fmt_double(f);
    }
    case DType::kFloat32: return fmt_double(load(float{}));
    case DType::kFloat64: return fmt_double(load(double{}));
    case DType::kComplex64: {
      float c[2];
      std::memcpy(c, p, 8);
      return fmt_complex(c[0], c[1]);
    }
    case DType::kComplex128: {
      double c[2];
      std::memcpy(c, p, 16);
      return fmt_complex(c[0], c[1]);
    }
    default: {
      char buf[8];
      std::snprintf(buf, sizeof buf, "0x%02x", static_cast<unsigned>(load(uint8_t{})));
      return buf;
    }
  }
}

}  // namespace jtree::cli
