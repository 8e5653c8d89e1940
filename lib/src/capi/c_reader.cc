// capi/c_reader.cc — opening a file and walking its structure through the C API: the
// Reader's accessors, with node and leaf numbers checked (the C++ accessors leave that to the
// caller) so that a wrong number is an InvalidArgument instead of undefined behaviour.
#include <algorithm>
#include <cstring>

#include "capi/c_internal.h"
#include "read/check_request.h"

using jtree::capi::guard;
using jtree::capi::invalid;
using jtree::capi::malloc_string;
using jtree::capi::report;

namespace jtree::capi {

jtree_status_t check_reader(const jtree_reader_t* r, const char* fn, jtree_error_t** err) {
  if (r == nullptr || !r->reader) return invalid(err, fn, "reader is NULL");
  return JTREE_OK;
}

jtree_status_t check_node(const jtree_reader_t* r, uint32_t node, const char* fn,
                          jtree_error_t** err) {
  JTREE_C_CHECK(check_reader(r, fn, err));
  const uint32_t n = r->reader->num_nodes();
  if (node >= n) {
    return invalid(err, fn, r->reader->name() + ": node " + std::to_string(node) +
                                " out of range (" + std::to_string(n) + " nodes)");
  }
  return JTREE_OK;
}

jtree_status_t check_leaf(const jtree_reader_t* r, uint32_t leaf, const char* fn,
                          jtree_error_t** err) {
  JTREE_C_CHECK(check_reader(r, fn, err));
  const uint32_t n = r->reader->num_leaves();
  if (leaf >= n) {
    return invalid(err, fn, r->reader->name() + ": leaf " + std::to_string(leaf) +
                                " out of range (" + std::to_string(n) + " leaves)");
  }
  return JTREE_OK;
}

jtree_status_t box_of(const jtree_reader_t* r, uint32_t leaf, size_t rank, const uint64_t* begin,
                      const uint64_t* end, const char* fn, const std::string& what,
                      jtree::Box* out, jtree_error_t** err) {
  const jtree::Reader& reader = *r->reader;
  *out = {};
  if (leaf >= reader.num_leaves()) return JTREE_OK;
  if (jtree::Status st = jtree::check_box_rank(reader, leaf, rank); !st.ok()) {
    return invalid(err, fn, what + st.message());
  }
  out->begin.assign(begin, begin + rank);
  out->end.assign(end, end + rank);
  return JTREE_OK;
}

}  // namespace jtree::capi

using jtree::capi::check_leaf;
using jtree::capi::check_node;
using jtree::capi::check_reader;

extern "C" {

// ---- open and close --------------------------------------------------------------------------

jtree_status_t jtree_reader_open(const char* path_or_url, const jtree_open_options_t* options,
                                 jtree_reader_t** out, jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_open";
    JTREE_C_REQUIRE(path_or_url, fn, err);
    JTREE_C_REQUIRE(out, fn, err);
    const jtree_open_options_t defaults;
    const jtree_open_options_t& o = options ? *options : defaults;
    auto reader = jtree::Reader::open(path_or_url, o.open);
    if (!reader.ok()) return report(reader.status(), err);
    auto* r = new jtree_reader_t{std::move(*reader), o.read};
    *out = r;
    return JTREE_OK;
  });
}

void jtree_reader_close(jtree_reader_t* reader) { delete reader; }

const char* jtree_reader_name(const jtree_reader_t* reader) {
  return reader && reader->reader ? reader->reader->name().c_str() : "";
}

jtree_status_t jtree_reader_file_size(const jtree_reader_t* reader, uint64_t* out,
                                      jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_file_size";
    JTREE_C_CHECK(check_reader(reader, fn, err));
    JTREE_C_REQUIRE(out, fn, err);
    *out = reader->reader->info().file_size;
    return JTREE_OK;
  });
}

jtree_status_t jtree_reader_generation(const jtree_reader_t* reader, uint64_t* out,
                                       jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_generation";
    JTREE_C_CHECK(check_reader(reader, fn, err));
    JTREE_C_REQUIRE(out, fn, err);
    *out = reader->reader->info().generation;
    return JTREE_OK;
  });
}

jtree_status_t jtree_reader_io_stats(const jtree_reader_t* reader, jtree_io_stats_t* out,
                                     jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_io_stats";
    JTREE_C_CHECK(check_reader(reader, fn, err));
    JTREE_C_REQUIRE(out, fn, err);
    const jtree::IoStats s = reader->reader->io_stats();
    *out = jtree_io_stats_t{s.read_requests, s.bytes_read, s.retries, s.write_requests,
                            s.bytes_written};
    return JTREE_OK;
  });
}

// ---- nodes -----------------------------------------------------------------------------------

jtree_status_t jtree_reader_num_nodes(const jtree_reader_t* reader, uint32_t* out,
                                      jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_num_nodes";
    JTREE_C_CHECK(check_reader(reader, fn, err));
    JTREE_C_REQUIRE(out, fn, err);
    *out = reader->reader->num_nodes();
    return JTREE_OK;
  });
}

jtree_status_t jtree_reader_num_leaves(const jtree_reader_t* reader, uint32_t* out,
                                       jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_num_leaves";
    JTREE_C_CHECK(check_reader(reader, fn, err));
    JTREE_C_REQUIRE(out, fn, err);
    *out = reader->reader->num_leaves();
    return JTREE_OK;
  });
}

jtree_status_t jtree_reader_node_kind(const jtree_reader_t* reader, uint32_t node,
                                      jtree_node_kind_t* out, jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_node_kind";
    JTREE_C_CHECK(check_node(reader, node, fn, err));
    JTREE_C_REQUIRE(out, fn, err);
    *out = static_cast<jtree_node_kind_t>(reader->reader->node(node).kind);
    return JTREE_OK;
  });
}

jtree_status_t jtree_reader_node_key(const jtree_reader_t* reader, uint32_t node,
                                     jtree_key_kind_t* kind, const char** str, size_t* str_len,
                                     int64_t* int_key, jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_node_key";
    JTREE_C_CHECK(check_node(reader, node, fn, err));
    JTREE_C_REQUIRE(kind, fn, err);
    const jtree::KeyView k = reader->reader->node(node).key;  // points into the header
    *kind = static_cast<jtree_key_kind_t>(k.kind);
    if (str) *str = k.kind == jtree::Key::Kind::kStr ? k.str.data() : nullptr;
    if (str_len) *str_len = k.kind == jtree::Key::Kind::kStr ? k.str.size() : 0;
    if (int_key) *int_key = k.kind == jtree::Key::Kind::kInt ? k.i : 0;
    return JTREE_OK;
  });
}

jtree_status_t jtree_reader_node_num_children(const jtree_reader_t* reader, uint32_t node,
                                              uint32_t* out, jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_node_num_children";
    JTREE_C_CHECK(check_node(reader, node, fn, err));
    JTREE_C_REQUIRE(out, fn, err);
    *out = reader->reader->node(node).num_children;
    return JTREE_OK;
  });
}

jtree_status_t jtree_reader_node_child(const jtree_reader_t* reader, uint32_t node,
                                       uint32_t index, uint32_t* out, jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_node_child";
    JTREE_C_CHECK(check_node(reader, node, fn, err));
    JTREE_C_REQUIRE(out, fn, err);
    const jtree::Reader& r = *reader->reader;
    const uint32_t n = r.node(node).num_children;
    if (index >= n) {
      return invalid(err, fn, r.name() + ": node " + r.path(node) + " has " + std::to_string(n) +
                                  " children, no child " + std::to_string(index));
    }
    // Preorder: the first child follows its parent, each next one follows the previous one's
    // subtree (the Reader checked the structure when opening).
    uint32_t child = node + 1;
    for (uint32_t i = 0; i < index; ++i) child = r.subtree_end(child);
    *out = child;
    return JTREE_OK;
  });
}

jtree_status_t jtree_reader_node_children(const jtree_reader_t* reader, uint32_t node,
                                          uint32_t* out, size_t capacity, size_t* count,
                                          jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_node_children";
    JTREE_C_CHECK(check_node(reader, node, fn, err));
    JTREE_C_REQUIRE(count, fn, err);
    const jtree::Reader& r = *reader->reader;
    const uint32_t n = r.node(node).num_children;
    if (capacity < n) {
      *count = n;  // (also on this error: that is how a caller asks for the size)
      return invalid(err, fn, r.name() + ": node " + r.path(node) + " has " + std::to_string(n) +
                                  " children, room for " + std::to_string(capacity));
    }
    if (n > 0) JTREE_C_REQUIRE(out, fn, err);  // (out may be NULL for none)
    *count = n;
    if (n == 0) return JTREE_OK;
    const std::vector<uint32_t> children = r.children(node);
    std::memcpy(out, children.data(), children.size() * sizeof(uint32_t));
    return JTREE_OK;
  });
}

jtree_status_t jtree_reader_node_parent(const jtree_reader_t* reader, uint32_t node,
                                        uint32_t* out, jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_node_parent";
    JTREE_C_CHECK(check_node(reader, node, fn, err));
    JTREE_C_REQUIRE(out, fn, err);
    *out = node == 0 ? 0 : reader->reader->parent(node);
    return JTREE_OK;
  });
}

jtree_status_t jtree_reader_node_subtree_end(const jtree_reader_t* reader, uint32_t node,
                                             uint32_t* out, jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_node_subtree_end";
    JTREE_C_CHECK(check_node(reader, node, fn, err));
    JTREE_C_REQUIRE(out, fn, err);
    *out = reader->reader->subtree_end(node);
    return JTREE_OK;
  });
}

jtree_status_t jtree_reader_node_leaf(const jtree_reader_t* reader, uint32_t node, uint32_t* out,
                                      jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_node_leaf";
    JTREE_C_CHECK(check_node(reader, node, fn, err));
    JTREE_C_REQUIRE(out, fn, err);
    const jtree::Reader& r = *reader->reader;
    const jtree::NodeView n = r.node(node);
    if (n.kind != jtree::NodeKind::kLeaf) {
      return invalid(err, fn, r.name() + ": node '" + r.path(node) + "' is a " +
                                  std::string(jtree::node_kind_name(n.kind)) + ", not a leaf");
    }
    *out = n.leaf;
    return JTREE_OK;
  });
}

jtree_status_t jtree_reader_node_path(const jtree_reader_t* reader, uint32_t node, char** out,
                                      jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_node_path";
    JTREE_C_CHECK(check_node(reader, node, fn, err));
    JTREE_C_REQUIRE(out, fn, err);
    *out = malloc_string(reader->reader->path(node));
    return JTREE_OK;
  });
}

jtree_status_t jtree_reader_find(const jtree_reader_t* reader, const char* path, uint32_t* node,
                                 jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_find";
    JTREE_C_CHECK(check_reader(reader, fn, err));
    JTREE_C_REQUIRE(path, fn, err);
    JTREE_C_REQUIRE(node, fn, err);
    auto found = reader->reader->find(path);
    if (!found.ok()) return report(found.status(), err);
    *node = *found;
    return JTREE_OK;
  });
}

jtree_status_t jtree_reader_find_leaf(const jtree_reader_t* reader, const char* path,
                                      uint32_t* leaf, jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_find_leaf";
    JTREE_C_CHECK(check_reader(reader, fn, err));
    JTREE_C_REQUIRE(path, fn, err);
    JTREE_C_REQUIRE(leaf, fn, err);
    auto found = reader->reader->find_leaf(path);
    if (!found.ok()) return report(found.status(), err);
    *leaf = *found;
    return JTREE_OK;
  });
}

// ---- leaves ----------------------------------------------------------------------------------

jtree_status_t jtree_reader_leaf_path(const jtree_reader_t* reader, uint32_t leaf, char** out,
                                      jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_leaf_path";
    JTREE_C_CHECK(check_leaf(reader, leaf, fn, err));
    JTREE_C_REQUIRE(out, fn, err);
    *out = malloc_string(reader->reader->leaf_path(leaf));
    return JTREE_OK;
  });
}

jtree_status_t jtree_reader_leaf_kind(const jtree_reader_t* reader, uint32_t leaf,
                                      jtree_leaf_kind_t* out, jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_leaf_kind";
    JTREE_C_CHECK(check_leaf(reader, leaf, fn, err));
    JTREE_C_REQUIRE(out, fn, err);
    *out = static_cast<jtree_leaf_kind_t>(reader->reader->leaf(leaf).kind);
    return JTREE_OK;
  });
}

jtree_status_t jtree_reader_leaf_storage(const jtree_reader_t* reader, uint32_t leaf,
                                         jtree_storage_t* out, jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_leaf_storage";
    JTREE_C_CHECK(check_leaf(reader, leaf, fn, err));
    JTREE_C_REQUIRE(out, fn, err);
    *out = static_cast<jtree_storage_t>(reader->reader->leaf(leaf).storage);
    return JTREE_OK;
  });
}

jtree_status_t jtree_reader_leaf_dtype(const jtree_reader_t* reader, uint32_t leaf,
                                       jtree_dtype_t* out, jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_leaf_dtype";
    JTREE_C_CHECK(check_leaf(reader, leaf, fn, err));
    JTREE_C_REQUIRE(out, fn, err);
    *out = static_cast<jtree_dtype_t>(reader->reader->leaf(leaf).dtype);
    return JTREE_OK;
  });
}

jtree_status_t jtree_reader_leaf_rank(const jtree_reader_t* reader, uint32_t leaf, size_t* out,
                                      jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_leaf_rank";
    JTREE_C_CHECK(check_leaf(reader, leaf, fn, err));
    JTREE_C_REQUIRE(out, fn, err);
    *out = reader->reader->leaf(leaf).shape.size();
    return JTREE_OK;
  });
}

jtree_status_t jtree_reader_leaf_shape(const jtree_reader_t* reader, uint32_t leaf,
                                       uint64_t* dims, size_t capacity, jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_leaf_shape";
    JTREE_C_CHECK(check_leaf(reader, leaf, fn, err));
    const jtree::Shape& shape = reader->reader->leaf(leaf).shape;
    if (capacity < shape.size()) {
      return invalid(err, fn, reader->reader->name() + ": leaf " +
                                  reader->reader->leaf_path(leaf) + " has rank " +
                                  std::to_string(shape.size()) + ", room for " +
                                  std::to_string(capacity) + " dimensions");
    }
    if (!shape.empty()) JTREE_C_REQUIRE(dims, fn, err);
    for (size_t d = 0; d < shape.size(); ++d) dims[d] = shape[d];
    return JTREE_OK;
  });
}

jtree_status_t jtree_reader_leaf_memory_bytes(const jtree_reader_t* reader, uint32_t leaf,
                                              uint64_t* out, jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_leaf_memory_bytes";
    JTREE_C_CHECK(check_leaf(reader, leaf, fn, err));
    JTREE_C_REQUIRE(out, fn, err);
    const jtree::Leaf& l = reader->reader->leaf(leaf);
    *out = l.is_payload() ? l.memory_bytes() : 0;
    return JTREE_OK;
  });
}

jtree_status_t jtree_reader_leaf_stored_bytes(const jtree_reader_t* reader, uint32_t leaf,
                                              uint64_t* out, jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_leaf_stored_bytes";
    JTREE_C_CHECK(check_leaf(reader, leaf, fn, err));
    JTREE_C_REQUIRE(out, fn, err);
    const jtree::Reader& r = *reader->reader;
    const jtree::Leaf& l = r.leaf(leaf);
    uint64_t bytes = 0;
    if (l.storage == jtree::Storage::kInline) {
      bytes = l.inline_data.size();
    } else if (l.storage == jtree::Storage::kChunked) {
      const uint64_t n = jtree::Tree::chunk_count(l);
      for (uint64_t c = 0; c < n; ++c) bytes += r.chunk(l.first_chunk + c).stored_size;
    }
    *out = bytes;
    return JTREE_OK;
  });
}

namespace {

jtree_status_t wrong_scalar(const jtree_reader_t* reader, uint32_t leaf, const char* fn,
                            const char* wanted, jtree_error_t** err) {
  const jtree::Leaf& l = reader->reader->leaf(leaf);
  return invalid(err, fn, reader->reader->name() + ": leaf " + reader->reader->leaf_path(leaf) +
                              " is a " + std::string(jtree::leaf_kind_name(l.kind)) +
                              " leaf, not " + wanted);
}

}  // namespace

jtree_status_t jtree_reader_leaf_int(const jtree_reader_t* reader, uint32_t leaf, int64_t* out,
                                     jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_leaf_int";
    JTREE_C_CHECK(check_leaf(reader, leaf, fn, err));
    JTREE_C_REQUIRE(out, fn, err);
    const jtree::Leaf& l = reader->reader->leaf(leaf);
    if (l.kind != jtree::LeafKind::kInt) return wrong_scalar(reader, leaf, fn, "an int", err);
    if (!l.big_int.empty()) {
      return invalid(err, fn, reader->reader->name() + ": leaf " +
                                  reader->reader->leaf_path(leaf) +
                                  " is an integer beyond int64");
    }
    *out = l.int_value;
    return JTREE_OK;
  });
}

jtree_status_t jtree_reader_leaf_float(const jtree_reader_t* reader, uint32_t leaf, double* out,
                                       jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_leaf_float";
    JTREE_C_CHECK(check_leaf(reader, leaf, fn, err));
    JTREE_C_REQUIRE(out, fn, err);
    const jtree::Leaf& l = reader->reader->leaf(leaf);
    if (l.kind != jtree::LeafKind::kFloat && l.kind != jtree::LeafKind::kComplex) {
      return wrong_scalar(reader, leaf, fn, "a float", err);
    }
    *out = l.real;
    return JTREE_OK;
  });
}

jtree_status_t jtree_reader_leaf_bool(const jtree_reader_t* reader, uint32_t leaf, int* out,
                                      jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_leaf_bool";
    JTREE_C_CHECK(check_leaf(reader, leaf, fn, err));
    JTREE_C_REQUIRE(out, fn, err);
    const jtree::Leaf& l = reader->reader->leaf(leaf);
    if (l.kind != jtree::LeafKind::kBool) return wrong_scalar(reader, leaf, fn, "a bool", err);
    *out = l.bool_value ? 1 : 0;
    return JTREE_OK;
  });
}

// ---- metadata --------------------------------------------------------------------------------

jtree_status_t jtree_reader_metadata_count(const jtree_reader_t* reader, size_t* out,
                                           jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_metadata_count";
    JTREE_C_CHECK(check_reader(reader, fn, err));
    JTREE_C_REQUIRE(out, fn, err);
    *out = reader->reader->metadata().size();
    return JTREE_OK;
  });
}

jtree_status_t jtree_reader_metadata_entry(const jtree_reader_t* reader, size_t index,
                                           const char** key, size_t* key_len, const char** value,
                                           size_t* value_len, jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_metadata_entry";
    JTREE_C_CHECK(check_reader(reader, fn, err));
    const auto& md = reader->reader->metadata();
    if (index >= md.size()) {
      return invalid(err, fn, reader->reader->name() + ": metadata entry " +
                                  std::to_string(index) + " out of range (" +
                                  std::to_string(md.size()) + " entries)");
    }
    const auto& [k, v] = md[index];
    if (key) *key = k.c_str();
    if (key_len) *key_len = k.size();
    if (value) *value = v.c_str();
    if (value_len) *value_len = v.size();
    return JTREE_OK;
  });
}

jtree_status_t jtree_reader_metadata_is_text(const jtree_reader_t* reader, size_t index,
                                             int* out, jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_metadata_is_text";
    JTREE_C_CHECK(check_reader(reader, fn, err));
    JTREE_C_REQUIRE(out, fn, err);
    const auto& md = reader->reader->metadata();
    if (index >= md.size()) {
      return invalid(err, fn, reader->reader->name() + ": metadata entry " +
                                  std::to_string(index) + " out of range (" +
                                  std::to_string(md.size()) + " entries)");
    }
    const auto& text = reader->reader->metadata_text_keys();
    *out = std::find(text.begin(), text.end(), md[index].first) != text.end() ? 1 : 0;
    return JTREE_OK;
  });
}

}  // extern "C"
