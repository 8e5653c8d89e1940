#include "util/utf8.h"

#include <cstdint>
#include <cstring>

namespace jtree {

std::optional<size_t> utf8_error(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    // ASCII fast path, 8 bytes at a time: names are almost always ASCII.
    while (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    const uint8_t c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    // The ranges of RFC 3629's table (section 4): the second byte's range depends on the
    // first, which rules out overlong forms, surrogates and code points above U+10FFFF.
    size_t len;
    uint8_t lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return i;
    }
    if (n - i < len) return i;
    if (p[i + 1] < lo || p[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k) {
      if (p[i + k] < 0x80 || p[i + k] > 0xBF) return i;
    }
    i += len;
  }
  return std::nullopt;
}

std::string escape_for_message(std::string_view s, size_t max_bytes) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  size_t i = 0;
  while (i < s.size() && i < max_bytes) {
    const auto c = static_cast<uint8_t>(s[i]);
    if (c >= 0x80) {
      // A whole valid sequence is kept; a byte that does not start one is escaped.
      const size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
      if (i + len <= s.size() && !utf8_error(s.substr(i, len))) {
        out.append(s.substr(i, len));
        i += len;
        continue;
      }
    } else if (c >= 0x20 && c < 0x7F && c != '\\') {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 15];
    ++i;
  }
  if (i < s.size()) out += "...";
  return out;
}

}  // namespace jtree
