#include "read/check_request.h"

#include <string>

namespace jtree {

Result<Box> check_request(const Reader& r, uint32_t leaf_index, const std::optional<Box>& box,
                          uint64_t dst_bytes, std::string_view dst_name) {
  if (leaf_index >= r.num_leaves()) {
    return Status::invalid_argument(r.name() + ": leaf number " + std::to_string(leaf_index) +
                                   " out of range (" + std::to_string(r.num_leaves()) +
                                   " leaves)");
  }
  const Leaf& leaf = r.leaf(leaf_index);
  auto where = [&] { return r.name() + ": leaf " + r.leaf_path(leaf_index); };  // errors only
  if (!leaf.is_payload()) {
    return Status::invalid_argument(where() + ": a " + std::string(leaf_kind_name(leaf.kind)) +
                                   " leaf holds no array data");
  }
  Box b = box ? *box : Box::all(leaf.shape);
  JTREE_RETURN_IF_ERROR(check_box_rank(r, leaf_index, b.begin.size()));
  JTREE_RETURN_IF_ERROR(check_box_rank(r, leaf_index, b.end.size()));
  for (size_t d = 0; d < leaf.shape.size(); ++d) {
    if (b.begin[d] > b.end[d] || b.end[d] > leaf.shape[d]) {
      return Status::invalid_argument(where() + ": slice [" + std::to_string(b.begin[d]) + ":" +
                                     std::to_string(b.end[d]) + "] out of bounds for dimension " +
                                     std::to_string(d) + " of extent " +
                                     std::to_string(leaf.shape[d]));
    }
  }
  const uint64_t need = memory_bytes(leaf.dtype, b.num_elements());
  if (dst_bytes != need) {
    return Status::invalid_argument(where() + ": " + std::string(dst_name) + " of " +
                                   std::to_string(dst_bytes) + " bytes; the slice needs " +
                                   std::to_string(need));
  }
  return b;
}

Status check_box_rank(const Reader& r, uint32_t leaf_index, size_t rank) {
  const size_t leaf_rank = r.leaf(leaf_index).shape.size();
  if (rank == leaf_rank) return Status::success();
  return Status::invalid_argument(r.name() + ": leaf " + r.leaf_path(leaf_index) +
                                 ": slice of rank " + std::to_string(rank) +
                                 " for an array of rank " + std::to_string(leaf_rank));
}

Status ReadOptions::check() const {
  const ReadOptions& options = *this;
  if (options.threads < 0) {
    return Status::invalid_argument("threads must be >= 0 (0: the machine's hardware threads), "
                                   "not " + std::to_string(options.threads));
  }
  if (options.max_bytes_in_flight == 0 || options.max_fetch_bytes == 0) {
    return Status::invalid_argument("max_bytes_in_flight and max_fetch_bytes must be positive");
  }
  return Status::success();
}

}  // namespace jtree
