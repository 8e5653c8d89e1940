// Packing of 4-bit dtypes (int4, uint4, float4_e2m1fn): two elements per stored byte, element
// 2j in the low nibble and element 2j+1 in the high nibble; an odd count leaves the last high
// nibble zero. In memory each element takes one byte, the value in the low nibble and the high
// nibble zero (int4 included: the bytes ml_dtypes holds for the array it builds).
#pragma once

#include <cstddef>
#include <span>

namespace jtree::codec {

/// Packs `src` (one element per byte) into dst (ceil(src.size() / 2) bytes).
void pack4(std::span<const std::byte> src, std::span<std::byte> dst);

/// Unpacks `dst.size()` elements from `src` (ceil(dst.size() / 2) bytes), one per byte with the
/// high nibble zero (int4 is not sign-extended; an odd count's pad nibble is ignored).
void unpack4(std::span<const std::byte> src, std::span<std::byte> dst);

}  // namespace jtree::codec
