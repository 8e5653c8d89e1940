// Fuzz target: the HTTP Content-Range parser (lib/src/io/remote/content_range.h), which reads
// what a server (or anyone in the middle) sends back. Whatever it accepts must be consistent:
// first <= last, last < total when both are known, and printing it back parses to the same.
#include <string>

#include "fuzz_util.h"
#include "io/remote/content_range.h"

using namespace jtree;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto d = remote::parse_decimal(text);
  if (d) JTREE_FUZZ_CHECK(remote::parse_decimal(std::to_string(*d)) == d, "decimal");
  auto cr = remote::parse_content_range(text);
  if (!cr.ok()) {
    JTREE_FUZZ_CHECK(cr.status().is_invalid_argument(), cr.status().to_string());
    return 0;
  }
  if (cr->has_range) {
    JTREE_FUZZ_CHECK(cr->first <= cr->last, "first > last accepted");
    JTREE_FUZZ_CHECK(cr->length() == cr->last - cr->first + 1, "length");
    if (cr->total) JTREE_FUZZ_CHECK(cr->last < *cr->total, "range past the total accepted");
  } else {
    JTREE_FUZZ_CHECK(cr->total.has_value(), "'bytes */*' accepted");
  }
  const std::string again =
      "bytes " +
      (cr->has_range ? std::to_string(cr->first) + "-" + std::to_string(cr->last) : "*") + "/" +
      (cr->total ? std::to_string(*cr->total) : "*");
  auto back = remote::parse_content_range(again);
  JTREE_FUZZ_CHECK(back.ok() && back->has_range == cr->has_range && back->first == cr->first &&
                       back->last == cr->last && back->total == cr->total,
                   "does not round-trip: " + again);
  return 0;
}
