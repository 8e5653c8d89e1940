// Describing leaves for people: sizes, codecs, values.
#pragma once

#include <cstdint>
#include <string>

#include "jtree/jtree.h"

namespace jtree::cli {

/// Bytes the leaf occupies in the file (its chunks, or its inline payload).
uint64_t leaf_stored_bytes(const Reader& r, uint32_t leaf);
/// Bytes of the leaf's payload before encoding (stored form).
uint64_t leaf_raw_bytes(const Leaf& leaf);
/// "zstd-3+floatsplit", "raw", "inline", "" (scalars).
std::string storage_desc(const Leaf& leaf);
/// A scalar's value as Python would print it (ints of any size in decimal).
std::string scalar_value(const Leaf& leaf);
/// Decimal text of a little-endian two's complement integer; past 128 bytes (where decimal
/// conversion, quadratic, would take long) hexadecimal, its head and tail, and its bit count.
std::string big_int_decimal(const std::string& le_bytes);
/// Up to `max_chars` of a string payload, quoted, with an ellipsis when cut.
std::string quoted(const std::string& s, size_t max_chars);
/// One element of an array in memory layout, formatted.
std::string format_element(DType dtype, const std::byte* p);

}  // namespace jtree::cli
