// Packing of 4-bit dtypes (int4, uint4, float4_e2m1fn): two elements per stored byte, element
// 2j in the low nibble and element 2j+1 in the high nibble; an odd count leaves the last high
// nibble zero. In memory each element takes one byte (value in the low nibble; int4
// sign-extended to the whole byte, as ml_dtypes holds it).
#pragma once

#include <cstddef>
#include <span>

namespace jtree::codec {

/// Packs `src` (one element per byte) into dst (ceil(src.size() / 2) bytes).
void pack4(std::span<const std::byte> src, std::span<std::byte> dst);

/// Unpacks `dst.size()` elements from `src` (ceil(dst.size() / 2) bytes). When
/// `sign_extend`, each value's bit 3 is copied into bits 4-7 (int4); otherwise they are zero.
void unpack4(std::span<const std::byte> src, std::span<std::byte> dst, bool sign_extend);

}  // namespace jtree::codec
