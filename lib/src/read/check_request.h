// What every read of array data checks first: Reader::read_many (host memory) and the staging
// pipeline of jtree/device.h (device memory) ask the same of a request.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "jtree/reader.h"

namespace jtree {

/// Checks that leaf number `leaf_index` of `r` exists and holds array data, that `box`
/// (nullopt: the whole array) has the array's rank and lies inside it, and that the
/// destination, `dst_bytes` long, is exactly the box's size in memory layout. Returns the resolved box. InvalidArgument
/// otherwise, naming the file and the leaf (`dst_name` names the destination: "destination",
/// "device destination").
Result<Box> check_request(const Reader& r, uint32_t leaf_index, const std::optional<Box>& box,
                          uint64_t dst_bytes, std::string_view dst_name);

/// InvalidArgument, naming the file and the leaf, unless `rank` is the rank of leaf number
/// `leaf_index` (which must exist): the one check, and message, of a box's rank, for
/// check_request, Reader::mapped_box and the C API (which checks it before reading the
/// caller's `rank` numbers).
Status check_box_rank(const Reader& r, uint32_t leaf_index, size_t rank);

/// ReadOptions::check, the error naming `r`'s file: what every read checks first.
inline Status check_read_options(const Reader& r, const ReadOptions& options) {
  Status st = options.check();
  return st.ok() ? st : st.with_prefix(r.name());
}

}  // namespace jtree
