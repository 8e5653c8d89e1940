// Parsing HTTP Content-Range values (RFC 9110, section 14.4): "bytes 0-99/1234",
// "bytes 0-99/*", "bytes */1234". Pure functions over text, fuzzed.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "jtree/status.h"

namespace jtree::remote {

/// A parsed Content-Range.
struct ContentRange {
  /// The range sent, [first, last] inclusive; absent for "bytes */N" (416 answers).
  bool has_range = false;
  uint64_t first = 0;
  uint64_t last = 0;
  /// The object's complete length; absent for ".../*".
  std::optional<uint64_t> total;

  uint64_t length() const { return has_range ? last - first + 1 : 0; }
};

/// Parses a Content-Range header value. InvalidArgument for anything else than the two forms
/// above with unit "bytes", decimal numbers of at most 19 digits, first <= last, and
/// last < total when both are known. Surrounding whitespace is ignored.
Result<ContentRange> parse_content_range(std::string_view value);

/// Parses a decimal number of at most 19 digits (no sign, no spaces); nullopt otherwise.
std::optional<uint64_t> parse_decimal(std::string_view s);

}  // namespace jtree::remote
