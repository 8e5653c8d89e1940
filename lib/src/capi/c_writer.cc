// capi/c_writer.cc — the builder (jtree::TreeBuilder over the caller's buffers), save and
// append. The builder's structural checks are TreeBuilder's and are reported by the first
// save; only what C can get wrong on its own (NULL, a buffer whose size disagrees with the
// dtype and shape) is refused at once.
#include <limits>

#include "capi/c_internal.h"

using jtree::capi::guard;
using jtree::capi::invalid;
using jtree::capi::report;

namespace {

// InvalidArgument when the builder is NULL or already saved (frozen).
jtree_status_t check_open(const jtree_builder_t* b, const char* fn, jtree_error_t** err) {
  if (b == nullptr) return invalid(err, fn, "builder is NULL");
  if (b->frozen) {
    return invalid(err, fn, "the builder was saved: it can be saved again but not added to");
  }
  return JTREE_OK;
}

// Finishes the tree on the first save; afterwards every save uses a copy of it.
jtree_status_t finished_tree(jtree_builder_t* b, const char* fn, jtree::Tree* out,
                             jtree_error_t** err) {
  if (b == nullptr) return invalid(err, fn, "builder is NULL");
  if (!b->frozen) {
    // (Frozen only once the outcome is kept: an exception from finish(), out of memory, leaves
    // the builder to be saved again, not frozen with neither a tree nor an error.)
    auto tree = std::move(b->builder).finish();
    if (tree.ok()) b->tree = std::move(*tree);
    else b->finish_error = tree.status();
    b->frozen = true;
  }
  if (!b->tree) return report(b->finish_error, err);
  *out = *b->tree;
  return JTREE_OK;
}

void copy_stats(const jtree::WriteStats& s, jtree_write_stats_t* out) {
  if (out) *out = {s.leaves, s.chunks, s.raw_bytes, s.stored_bytes, s.file_size, s.generation};
}

template <typename Add>
jtree_status_t add(jtree_builder_t* b, const char* fn, jtree_error_t** err, Add&& add_node) {
  return guard(err, [&] {
    JTREE_C_CHECK(check_open(b, fn, err));
    add_node(b->builder);
    return JTREE_OK;
  });
}

}  // namespace

extern "C" {

jtree_builder_t* jtree_builder_create(void) {
  return jtree::capi::create_nothrow<jtree_builder_t>();
}
void jtree_builder_free(jtree_builder_t* builder) { delete builder; }

jtree_status_t jtree_builder_key(jtree_builder_t* builder, const char* key, jtree_error_t** err) {
  return guard(err, [&] {
    if (key == nullptr) return invalid(err, "jtree_builder_key", "key is NULL");
    return add(builder, "jtree_builder_key", err,
               [&](jtree::TreeBuilder& b) { b.key(std::string(key)); });
  });
}

jtree_status_t jtree_builder_key_int(jtree_builder_t* builder, int64_t key, jtree_error_t** err) {
  return add(builder, "jtree_builder_key_int", err, [&](jtree::TreeBuilder& b) { b.key(key); });
}

jtree_status_t jtree_builder_begin_dict(jtree_builder_t* builder, jtree_error_t** err) {
  return add(builder, "jtree_builder_begin_dict", err, [](jtree::TreeBuilder& b) { b.dict(); });
}

jtree_status_t jtree_builder_begin_list(jtree_builder_t* builder, jtree_error_t** err) {
  return add(builder, "jtree_builder_begin_list", err, [](jtree::TreeBuilder& b) { b.list(); });
}

jtree_status_t jtree_builder_end(jtree_builder_t* builder, jtree_error_t** err) {
  return add(builder, "jtree_builder_end", err, [](jtree::TreeBuilder& b) { b.end(); });
}

jtree_status_t jtree_builder_none(jtree_builder_t* builder, jtree_error_t** err) {
  return add(builder, "jtree_builder_none", err, [](jtree::TreeBuilder& b) { b.none(); });
}

jtree_status_t jtree_builder_array(jtree_builder_t* builder, jtree_dtype_t dtype, size_t rank,
                                   const uint64_t* dims, const void* data, size_t data_bytes,
                                   jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_builder_array";
    JTREE_C_CHECK(check_open(builder, fn, err));
    const int code = jtree::capi::enum_int(dtype);
    const size_t item = jtree::capi::item_size_of(code);
    if (item == 0) return invalid(err, fn, "unknown dtype " + std::to_string(code));
    if (rank > 0) JTREE_C_REQUIRE(dims, fn, err);
    // (Before dims is read: it holds `rank` numbers, and a rank no array can have is a mistake
    // to report, not a read past its end.)
    if (const uint32_t most = jtree::Limits{}.max_rank; rank > most) {
      return invalid(err, fn, "rank " + std::to_string(rank) + " over the " +
                                  std::to_string(most) + " dimensions an array can have");
    }
    jtree::Shape shape(dims, dims + rank);
    // The size the shape needs, refusing shapes whose size overflows (the buffer the caller
    // gives cannot be that large).
    uint64_t bytes = item;
    for (uint64_t d : shape) {
      if (d != 0 && bytes > std::numeric_limits<uint64_t>::max() / d) {
        return invalid(err, fn, "the shape's size overflows 64 bits");
      }
      bytes *= d;
    }
    if (bytes != data_bytes) {
      return invalid(err, fn, std::string(jtree::dtype_name(static_cast<jtree::DType>(code))) +
                                  " array of " +
                                  std::to_string(bytes) + " bytes, data_bytes is " +
                                  std::to_string(data_bytes));
    }
    if (data == nullptr && data_bytes != 0) return invalid(err, fn, "data is NULL");
    builder->builder.array(static_cast<jtree::DType>(code), std::move(shape),
                           jtree::ArrayView{data});
    return JTREE_OK;
  });
}

jtree_status_t jtree_builder_int(jtree_builder_t* builder, int64_t value, jtree_error_t** err) {
  return add(builder, "jtree_builder_int", err,
             [&](jtree::TreeBuilder& b) { b.int_value(value); });
}

jtree_status_t jtree_builder_float(jtree_builder_t* builder, double value, jtree_error_t** err) {
  return add(builder, "jtree_builder_float", err,
             [&](jtree::TreeBuilder& b) { b.float_value(value); });
}

jtree_status_t jtree_builder_bool(jtree_builder_t* builder, int value, jtree_error_t** err) {
  return add(builder, "jtree_builder_bool", err,
             [&](jtree::TreeBuilder& b) { b.bool_value(value != 0); });
}

jtree_status_t jtree_builder_str(jtree_builder_t* builder, const char* utf8, size_t size,
                                 jtree_error_t** err) {
  return guard(err, [&] {
    if (utf8 == nullptr && size != 0) return invalid(err, "jtree_builder_str", "utf8 is NULL");
    return add(builder, "jtree_builder_str", err, [&](jtree::TreeBuilder& b) {
      b.str(size ? std::string(utf8, size) : std::string());
    });
  });
}

jtree_status_t jtree_builder_bytes(jtree_builder_t* builder, const void* data, size_t size,
                                   jtree_error_t** err) {
  return guard(err, [&] {
    if (data == nullptr && size != 0) return invalid(err, "jtree_builder_bytes", "data is NULL");
    return add(builder, "jtree_builder_bytes", err, [&](jtree::TreeBuilder& b) {
      b.bytes(size ? std::string(static_cast<const char*>(data), size) : std::string());
    });
  });
}

jtree_status_t jtree_builder_reuse(jtree_builder_t* builder, uint32_t old_leaf,
                                   jtree_error_t** err) {
  return add(builder, "jtree_builder_reuse", err,
             [&](jtree::TreeBuilder& b) { b.leaf(jtree::Leaf::reused(old_leaf)); });
}

jtree_status_t jtree_builder_metadata(jtree_builder_t* builder, const char* key,
                                      const char* value, jtree_error_t** err) {
  return guard(err, [&] {
    if (key == nullptr || value == nullptr) {
      return invalid(err, "jtree_builder_metadata", key ? "value is NULL" : "key is NULL");
    }
    return add(builder, "jtree_builder_metadata", err,
               [&](jtree::TreeBuilder& b) { b.metadata(key, value); });
  });
}

jtree_status_t jtree_builder_text_metadata(jtree_builder_t* builder, const char* key,
                                           const char* value, jtree_error_t** err) {
  return guard(err, [&] {
    if (key == nullptr || value == nullptr) {
      return invalid(err, "jtree_builder_text_metadata", key ? "value is NULL" : "key is NULL");
    }
    return add(builder, "jtree_builder_text_metadata", err,
               [&](jtree::TreeBuilder& b) { b.text_metadata(key, value); });
  });
}

jtree_status_t jtree_save(jtree_builder_t* builder, const char* path_or_url,
                          const jtree_write_options_t* options, jtree_write_stats_t* stats,
                          jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_save";
    JTREE_C_REQUIRE(path_or_url, fn, err);
    jtree::Tree tree;
    JTREE_C_CHECK(finished_tree(builder, fn, &tree, err));
    const jtree_write_options_t defaults;
    auto result = jtree::save(std::move(tree), path_or_url, (options ? *options : defaults).write);
    if (!result.ok()) return report(result.status(), err);
    copy_stats(*result, stats);
    return JTREE_OK;
  });
}

jtree_status_t jtree_append(jtree_builder_t* builder, const char* path,
                            const jtree_write_options_t* options, jtree_write_stats_t* stats,
                            jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_append";
    JTREE_C_REQUIRE(path, fn, err);
    jtree::Tree tree;
    JTREE_C_CHECK(finished_tree(builder, fn, &tree, err));
    const jtree_write_options_t defaults;
    auto result = jtree::append(path, std::move(tree), (options ? *options : defaults).write);
    if (!result.ok()) return report(result.status(), err);
    copy_stats(*result, stats);
    return JTREE_OK;
  });
}

}  // extern "C"
