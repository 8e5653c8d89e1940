// n-d copies between C-order buffers and strided views: what slices are made of.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "jtree/tree.h"

namespace jtree {

/// Copies a region of shape `region` from a C-order array `src` of shape `src_shape`, starting
/// at `src_start`, into a C-order array `dst` of shape `dst_shape` at `dst_start`. `item` is
/// the element size in bytes. Runs that are contiguous in both are copied with one memcpy.
void copy_region(const std::byte* src, const Shape& src_shape, const Shape& src_start,
                 std::byte* dst, const Shape& dst_shape, const Shape& dst_start,
                 const Shape& region, size_t item);

/// Gathers `box` of a strided array (element [0,...,0] at `base`, byte strides `strides`) into
/// the C-order buffer `dst`. When `swap_unit` is non-zero, every `swap_unit`-byte word is
/// byte-reversed on the way (big-endian input; complex types swap per component).
void gather_strided(const std::byte* base, std::span<const int64_t> strides, const Box& box,
                    size_t item, size_t swap_unit, std::byte* dst);

/// When `region` at `start` forms one contiguous run of a C-order array of shape `outer`,
/// the element offset of its first element; otherwise nullopt.
std::optional<uint64_t> contiguous_offset(const Shape& outer, const Shape& start,
                                          const Shape& region);

/// C-order byte strides of an array of `shape` with element size `item`.
std::vector<int64_t> c_strides(const Shape& shape, size_t item);

}  // namespace jtree
