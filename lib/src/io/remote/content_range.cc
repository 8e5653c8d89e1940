#include "io/remote/content_range.h"

#include <string>

namespace jtree::remote {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

Status bad(std::string_view value) {
  // Bounded: a hostile server's header could be long.
  return Status::invalid_argument("malformed Content-Range \"" +
                                 std::string(value.substr(0, 100)) + "\"");
}

}  // namespace

std::optional<uint64_t> parse_decimal(std::string_view s) {
  // 19 digits always fit in 64 bits, so no overflow check is needed below.
  if (s.empty() || s.size() > 19) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

Result<ContentRange> parse_content_range(std::string_view value) {
  std::string_view s = trim(value);
  constexpr std::string_view kUnit = "bytes ";
  if (s.size() < kUnit.size()) return bad(value);
  for (size_t i = 0; i + 1 < kUnit.size(); ++i) {  // the unit is case-insensitive
    if ((s[i] | 0x20) != kUnit[i]) return bad(value);
  }
  if (s[kUnit.size() - 1] != ' ') return bad(value);
  s = trim(s.substr(kUnit.size()));
  const size_t slash = s.find('/');
  if (slash == std::string_view::npos) return bad(value);
  const std::string_view range = s.substr(0, slash);
  const std::string_view total = s.substr(slash + 1);

  ContentRange cr;
  if (total != "*") {
    cr.total = parse_decimal(total);
    if (!cr.total) return bad(value);
  }
  if (range == "*") {
    if (!cr.total) return bad(value);  // "bytes */*" says nothing
    return cr;
  }
  const size_t dash = range.find('-');
  if (dash == std::string_view::npos) return bad(value);
  const auto first = parse_decimal(range.substr(0, dash));
  const auto last = parse_decimal(range.substr(dash + 1));
  if (!first || !last || *first > *last) return bad(value);
  if (cr.total && *last >= *cr.total) return bad(value);
  cr.has_range = true;
  cr.first = *first;
  cr.last = *last;
  return cr;
}

}  // namespace jtree::remote
