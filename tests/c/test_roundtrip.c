/* tests/c/test_roundtrip.c — save the model through the builder (raw and zstd), then read it
 * back every way the C API offers: structure walk, find, leaf specs, whole reads, boxes,
 * read_many, scalars, text and bytes, metadata, mapped views, io stats; then the scratch
 * buffers kept between calls released. */
#include <stdlib.h>

#include "c_test.h"
#include "model.h"

/* Every node's path finds the node again; children, parents and subtrees agree. Returns the
 * number of nodes visited under (and including) `node`. */
static uint32_t walk(const jtree_reader_t* r, uint32_t node) {
  char* path = NULL;
  uint32_t found = 0, n = 0, end = 0;
  jtree_node_kind_t kind;
  CHECK_OK(jtree_reader_node_path(r, node, &path, &jt_err));
  CHECK_OK(jtree_reader_find(r, path ? path : "", &found, &jt_err));
  CHECK(found == node);
  CHECK_OK(jtree_reader_node_kind(r, node, &kind, &jt_err));
  CHECK_OK(jtree_reader_node_num_children(r, node, &n, &jt_err));
  CHECK_OK(jtree_reader_node_subtree_end(r, node, &end, &jt_err));
  if (kind == JTREE_NODE_LEAF) {
    uint32_t leaf = 0;
    char* leaf_path = NULL;
    CHECK_OK(jtree_reader_node_leaf(r, node, &leaf, &jt_err));
    CHECK_OK(jtree_reader_leaf_path(r, leaf, &leaf_path, &jt_err));
    CHECK(leaf_path && path && strcmp(leaf_path, path) == 0);  /* the model has no ties */
    jtree_free(leaf_path);
  }
  uint32_t visited = 1;
  uint32_t children[32];
  size_t count = 0;
  CHECK_OK(jtree_reader_node_children(r, node, children, 32, &count, &jt_err));
  CHECK(count == n);
  for (uint32_t i = 0; i < n && i < 32; ++i) {
    uint32_t child = 0, parent = 0;
    CHECK_OK(jtree_reader_node_child(r, node, i, &child, &jt_err));
    CHECK(child == children[i]);
    CHECK_OK(jtree_reader_node_parent(r, child, &parent, &jt_err));
    CHECK(parent == node);
    visited += walk(r, child);
  }
  CHECK(end == node + visited);
  jtree_free(path);
  return visited;
}

static size_t elements(const model_array* a) {
  size_t n = 1;
  for (size_t d = 0; d < a->rank; ++d) n *= (size_t)a->dims[d];
  return n;
}

/* The bytes of the box [begin, end) of an array, gathered from the expected data. */
static void expected_box(const model_array* a, const uint64_t* begin, const uint64_t* end,
                         unsigned char* out) {
  const size_t item = jtree_dtype_item_size(a->dtype);
  const unsigned char* src = a->data;
  size_t count = 1, pos = 0;
  for (size_t d = 0; d < a->rank; ++d) count *= (size_t)(end[d] - begin[d]);
  for (size_t k = 0; k < count; ++k) {
    /* Index k of the box in C order -> offset in the array. */
    size_t rem = k, offset = 0, stride = 1;
    for (size_t d = a->rank; d-- > 0;) {
      const size_t ext = (size_t)(end[d] - begin[d]);
      offset += ((size_t)begin[d] + rem % ext) * stride;
      rem /= ext;
      stride *= (size_t)a->dims[d];
    }
    memcpy(out + pos, src + offset * item, item);
    pos += item;
  }
}

static void check_arrays(const jtree_reader_t* r) {
  const model_array* arrays = model_arrays();
  for (int i = 0; i < MODEL_NUM_ARRAYS; ++i) {
    const model_array* a = &arrays[i];
    uint32_t leaf = 0;
    jtree_dtype_t dtype = JTREE_DTYPE_INVALID;
    jtree_leaf_kind_t kind = JTREE_LEAF_INT;
    jtree_storage_t storage = JTREE_STORAGE_NONE;
    size_t rank = 99;
    uint64_t dims[3] = {0, 0, 0}, memory = 0, stored = 0;
    CHECK_OK(jtree_reader_find_leaf(r, a->path, &leaf, &jt_err));
    CHECK_OK(jtree_reader_leaf_kind(r, leaf, &kind, &jt_err));
    CHECK(kind == JTREE_LEAF_ARRAY);
    CHECK_OK(jtree_reader_leaf_dtype(r, leaf, &dtype, &jt_err));
    CHECK(dtype == a->dtype);
    CHECK(strcmp(jtree_dtype_name(dtype), jtree_dtype_name(a->dtype)) == 0);
    CHECK_OK(jtree_reader_leaf_rank(r, leaf, &rank, &jt_err));
    CHECK(rank == a->rank);
    CHECK_OK(jtree_reader_leaf_shape(r, leaf, dims, 3, &jt_err));
    CHECK(memcmp(dims, a->dims, a->rank * sizeof(uint64_t)) == 0);
    CHECK_OK(jtree_reader_leaf_memory_bytes(r, leaf, &memory, &jt_err));
    CHECK(memory == a->bytes);
    CHECK(memory == elements(a) * jtree_dtype_item_size(a->dtype));
    CHECK_OK(jtree_reader_leaf_storage(r, leaf, &storage, &jt_err));
    CHECK_OK(jtree_reader_leaf_stored_bytes(r, leaf, &stored, &jt_err));
    CHECK(a->bytes == 0 || storage != JTREE_STORAGE_NONE);
    CHECK(a->bytes == 0 || stored > 0);

    /* The whole leaf. */
    unsigned char* buf = malloc(a->bytes + 1);
    CHECK_OK(jtree_reader_read(r, leaf, a->bytes ? buf : NULL, a->bytes, &jt_err));
    CHECK(a->bytes == 0 || memcmp(buf, a->data, a->bytes) == 0);
    free(buf);
  }
}

static void check_boxes(const jtree_reader_t* r) {
  const model_array* arrays = model_arrays();
  const model_array* f32 = &arrays[0];
  const model_array* u8 = &arrays[2];
  const model_array* f64 = &arrays[3];
  const model_array* w1 = &arrays[10];
  uint32_t lf32, lu8, lf64, li16, lw1;
  CHECK_OK(jtree_reader_find_leaf(r, "f32", &lf32, &jt_err));
  CHECK_OK(jtree_reader_find_leaf(r, "u8", &lu8, &jt_err));
  CHECK_OK(jtree_reader_find_leaf(r, "f64", &lf64, &jt_err));
  CHECK_OK(jtree_reader_find_leaf(r, "i16", &li16, &jt_err));
  CHECK_OK(jtree_reader_find_leaf(r, "layers/1/w", &lw1, &jt_err));

  /* A 2-D box across chunk boundaries (the zstd file has ~1 KiB chunks). */
  const uint64_t b2[2] = {10, 5}, e2[2] = {37, 40};
  float got[27 * 35], want[27 * 35];
  expected_box(f32, b2, e2, (unsigned char*)want);
  CHECK_OK(jtree_reader_read_box(r, lf32, 2, b2, e2, got, sizeof got, &jt_err));
  CHECK(memcmp(got, want, sizeof got) == 0);

  /* A 3-D box, one element wide in the middle. */
  const uint64_t b3[3] = {1, 2, 0}, e3[3] = {4, 3, 6};
  unsigned char got3[3 * 1 * 6], want3[3 * 1 * 6];
  expected_box(u8, b3, e3, want3);
  CHECK_OK(jtree_reader_read_box(r, lu8, 3, b3, e3, got3, sizeof got3, &jt_err));
  CHECK(memcmp(got3, want3, sizeof got3) == 0);

  /* An empty box, and the 0-d array's only box. */
  const uint64_t be[2] = {5, 5};
  CHECK_OK(jtree_reader_read_box(r, lf32, 2, be, be, NULL, 0, &jt_err));
  double scalar = 0;
  CHECK_OK(jtree_reader_read_box(r, lf64, 0, NULL, NULL, &scalar, sizeof scalar, &jt_err));
  CHECK(scalar == *(const double*)f64->data);

  /* Many at once: a whole leaf and two boxes of different leaves. */
  int16_t all16[1000];
  float rows[2 * 8], cols[16 * 2];
  const uint64_t rb[2] = {3, 0}, re[2] = {5, 8}, cb[2] = {0, 6}, ce[2] = {16, 8};
  float want_rows[2 * 8], want_cols[16 * 2];
  expected_box(w1, rb, re, (unsigned char*)want_rows);
  expected_box(w1, cb, ce, (unsigned char*)want_cols);
  jtree_read_request_t reqs[3] = {
      {li16, 0, NULL, NULL, all16, sizeof all16},
      {lw1, 2, rb, re, rows, sizeof rows},
      {lw1, 2, cb, ce, cols, sizeof cols},
  };
  CHECK_OK(jtree_reader_read_many(r, reqs, 3, &jt_err));
  CHECK(memcmp(all16, arrays[1].data, sizeof all16) == 0);
  CHECK(memcmp(rows, want_rows, sizeof rows) == 0);
  CHECK(memcmp(cols, want_cols, sizeof cols) == 0);
  CHECK_OK(jtree_reader_read_many(r, NULL, 0, &jt_err));
}

static void check_scalars_and_metadata(const jtree_reader_t* r) {
  uint32_t leaf = 0, node = 0;
  int64_t i = 0;
  double f = 0;
  int b = 0;
  jtree_leaf_kind_t kind;
  jtree_storage_t storage;
  jtree_dtype_t dtype;
  CHECK_OK(jtree_reader_find_leaf(r, "step", &leaf, &jt_err));
  CHECK_OK(jtree_reader_leaf_int(r, leaf, &i, &jt_err));
  CHECK(i == 1000);
  CHECK_OK(jtree_reader_leaf_kind(r, leaf, &kind, &jt_err));
  CHECK(kind == JTREE_LEAF_INT);
  CHECK_OK(jtree_reader_leaf_storage(r, leaf, &storage, &jt_err));
  CHECK(storage == JTREE_STORAGE_NONE);
  CHECK_OK(jtree_reader_leaf_dtype(r, leaf, &dtype, &jt_err));
  CHECK(dtype == JTREE_DTYPE_INVALID);
  CHECK_OK(jtree_reader_find_leaf(r, "lr", &leaf, &jt_err));
  CHECK_OK(jtree_reader_leaf_float(r, leaf, &f, &jt_err));
  CHECK(f == 0.5);
  CHECK_OK(jtree_reader_find_leaf(r, "flag", &leaf, &jt_err));
  CHECK_OK(jtree_reader_leaf_bool(r, leaf, &b, &jt_err));
  CHECK(b == 1);

  char* data = NULL;
  size_t size = 0;
  CHECK_OK(jtree_reader_find_leaf(r, "name", &leaf, &jt_err));
  CHECK_OK(jtree_reader_leaf_kind(r, leaf, &kind, &jt_err));
  CHECK(kind == JTREE_LEAF_STR);
  CHECK_OK(jtree_reader_read_bytes(r, leaf, &data, &size, &jt_err));
  CHECK(data && size == strlen(kModelName) && strcmp(data, kModelName) == 0);
  jtree_free(data);
  data = NULL;
  CHECK_OK(jtree_reader_find_leaf(r, "blob", &leaf, &jt_err));
  CHECK_OK(jtree_reader_read_bytes(r, leaf, &data, &size, &jt_err));
  CHECK(data && size == sizeof kModelBlob && memcmp(data, kModelBlob, size) == 0);
  jtree_free(data);

  /* None is a node, not a leaf. */
  jtree_node_kind_t nk;
  CHECK_OK(jtree_reader_find(r, "nothing", &node, &jt_err));
  CHECK_OK(jtree_reader_node_kind(r, node, &nk, &jt_err));
  CHECK(nk == JTREE_NODE_NONE);

  /* Keys: a dict item's string, a list item's none. */
  jtree_key_kind_t kk;
  const char* key = NULL;
  size_t key_len = 0;
  int64_t ikey = -1;
  CHECK_OK(jtree_reader_find(r, "f32", &node, &jt_err));
  CHECK_OK(jtree_reader_node_key(r, node, &kk, &key, &key_len, &ikey, &jt_err));
  CHECK(kk == JTREE_KEY_STR && key_len == 3 && memcmp(key, "f32", 3) == 0);
  CHECK_OK(jtree_reader_find(r, "layers/1", &node, &jt_err));
  CHECK_OK(jtree_reader_node_key(r, node, &kk, NULL, NULL, NULL, &jt_err));
  CHECK(kk == JTREE_KEY_NONE);
  CHECK_OK(jtree_reader_node_kind(r, node, &nk, &jt_err));
  CHECK(nk == JTREE_NODE_DICT);
  CHECK_OK(jtree_reader_node_key(r, 0, &kk, NULL, NULL, NULL, &jt_err));
  CHECK(kk == JTREE_KEY_NONE);

  size_t count = 0;
  CHECK_OK(jtree_reader_metadata_count(r, &count, &jt_err));
  CHECK(count == 2);
  int seen = 0;
  for (size_t k = 0; k < count; ++k) {
    const char *mk = NULL, *mv = NULL;
    size_t mkl = 0, mvl = 0;
    CHECK_OK(jtree_reader_metadata_entry(r, k, &mk, &mkl, &mv, &mvl, &jt_err));
    int text = -1;
    CHECK_OK(jtree_reader_metadata_is_text(r, k, &text, &jt_err));
    if (mk && strcmp(mk, "framework") == 0) seen += mvl == 6 && strcmp(mv, "c-test") == 0 && !text;
    if (mk && strcmp(mk, "note") == 0) seen += strcmp(mv, "saved through jtree/c.h") == 0 && text;
    CHECK(mk && mkl == strlen(mk));
  }
  CHECK(seen == 2);
  int text = -1;
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "jtree_reader_metadata_is_text",
             jtree_reader_metadata_is_text(r, count, &text, &jt_err));
}

/* jtree_reader_map_box: a box of a raw leaf in place, its elements at the leaf's strides; the
 * view outlives nothing but itself; compressed leaves and bad boxes are refused. */
static void check_map_box(const jtree_reader_t* r, uint32_t lf32, int raw) {
  const float* f32 = model_f32();
  const uint64_t b[2] = {10, 5}, e[2] = {37, 40};
  jtree_leaf_view_t* view = NULL;
  if (!raw) {
    CHECK_FAIL(JTREE_NOT_SUPPORTED, "jtree_reader_read_box",
               jtree_reader_map_box(r, lf32, 2, b, e, &view, &jt_err));
    CHECK(view == NULL);
    return;
  }
  CHECK_OK(jtree_reader_map_box(r, lf32, 2, b, e, &view, &jt_err));
  CHECK(view != NULL);
  if (view == NULL) return;
  /* From the box's first element to one past its last, at the leaf's row stride. */
  const size_t first = 10 * MODEL_F32_COLS + 5, last = 36 * MODEL_F32_COLS + 39;
  CHECK(jtree_leaf_view_size(view) == (last - first + 1) * sizeof(float));
  const float* data = (const float*)jtree_leaf_view_data(view);
  int same = 1;
  for (uint64_t i = 0; i < 27; ++i) {
    for (uint64_t j = 0; j < 35; ++j) {
      same &= data[i * MODEL_F32_COLS + j] == f32[(10 + i) * MODEL_F32_COLS + 5 + j];
    }
  }
  CHECK(same);
  /* Copy-on-write: a write into this view is in no other view. */
  jtree_leaf_view_t* other = NULL;
  CHECK_OK(jtree_reader_map_box(r, lf32, 2, b, e, &other, &jt_err));
  ((float*)jtree_leaf_view_data(view))[0] = 12345.f;
  CHECK(other != NULL && ((const float*)jtree_leaf_view_data(other))[0] == f32[first]);
  jtree_leaf_view_release(other);
  jtree_leaf_view_release(view);
  /* An empty box: a view of 0 bytes. */
  const uint64_t be[2] = {5, 5};
  view = NULL;
  CHECK_OK(jtree_reader_map_box(r, lf32, 2, be, be, &view, &jt_err));
  CHECK(view != NULL && jtree_leaf_view_size(view) == 0);
  jtree_leaf_view_release(view);
  /* The wrong rank, a box out of bounds, no out-pointer: InvalidArgument, nothing made. */
  view = NULL;
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "f32", jtree_reader_map_box(r, lf32, 1, b, e, &view, &jt_err));
  const uint64_t far[2] = {10, MODEL_F32_COLS + 1};
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "f32",
             jtree_reader_map_box(r, lf32, 2, b, far, &view, &jt_err));
  CHECK(view == NULL);
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "", jtree_reader_map_box(r, lf32, 2, b, e, NULL, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "",
             jtree_reader_map_box(r, lf32, 2, NULL, e, &view, &jt_err));
}

static void check_file(const char* path, int raw) {
  jtree_open_options_t* o = jtree_open_options_create();
  CHECK(o != NULL);
  CHECK_OK(jtree_open_options_set_threads(o, 2, &jt_err));
  jtree_reader_t* r = NULL;
  CHECK_OK(jtree_reader_open(path, o, &r, &jt_err));
  jtree_open_options_free(o);  /* copied by the open */
  if (r == NULL) return;
  CHECK(strcmp(jtree_reader_name(r), path) == 0);

  uint32_t nodes = 0, leaves = 0;
  uint64_t size = 0, generation = 9;
  CHECK_OK(jtree_reader_num_nodes(r, &nodes, &jt_err));
  CHECK_OK(jtree_reader_num_leaves(r, &leaves, &jt_err));
  CHECK(leaves == MODEL_NUM_LEAVES);
  CHECK(walk(r, 0) == nodes);
  CHECK_OK(jtree_reader_file_size(r, &size, &jt_err));
  CHECK_OK(jtree_reader_generation(r, &generation, &jt_err));
  CHECK(generation == 0);

  check_arrays(r);
  check_boxes(r);
  check_scalars_and_metadata(r);

  jtree_io_stats_t io;
  CHECK_OK(jtree_reader_io_stats(r, &io, &jt_err));
  CHECK(io.read_requests > 0 && io.bytes_read > 0 && io.bytes_written == 0);

  /* The zero-copy view: a raw chunked leaf maps, and outlives the reader's handle. */
  uint32_t lf32 = 0, li16 = 0;
  CHECK_OK(jtree_reader_find_leaf(r, "f32", &lf32, &jt_err));
  CHECK_OK(jtree_reader_find_leaf(r, "i16", &li16, &jt_err));
  jtree_leaf_view_t* view = NULL;
  if (raw) {
    CHECK_OK(jtree_reader_map_leaf(r, lf32, &view, &jt_err));
  } else {
    /* Compressed (or, at the default threshold, inline) leaves cannot be mapped. */
    CHECK_FAIL(JTREE_NOT_SUPPORTED, "cannot be mapped",
               jtree_reader_map_leaf(r, lf32, &view, &jt_err));
    CHECK_FAIL(JTREE_NOT_SUPPORTED, "i16", jtree_reader_map_leaf(r, li16, &view, &jt_err));
    CHECK(view == NULL);
  }
  check_map_box(r, lf32, raw);
  /* Many at once: raw array leaves map (all but the empty one and the 4-bit one), the
   * others come back NULL. */
  const model_array* arrays = model_arrays();
  uint32_t ids[MODEL_NUM_ARRAYS + 1];
  jtree_leaf_view_t* views[MODEL_NUM_ARRAYS + 1];
  for (int i = 0; i < MODEL_NUM_ARRAYS; ++i) {
    CHECK_OK(jtree_reader_find_leaf(r, arrays[i].path, &ids[i], &jt_err));
  }
  CHECK_OK(jtree_reader_find_leaf(r, "step", &ids[MODEL_NUM_ARRAYS], &jt_err));
  CHECK_OK(jtree_reader_map_leaves(r, ids, MODEL_NUM_ARRAYS + 1, views, &jt_err));
  for (int i = 0; i < MODEL_NUM_ARRAYS + 1; ++i) {
    const int mappable = raw && i < MODEL_NUM_ARRAYS && arrays[i].bytes > 0 &&
                         arrays[i].dtype != JTREE_DTYPE_INT4;
    CHECK((views[i] != NULL) == mappable);
    if (views[i] != NULL && i < MODEL_NUM_ARRAYS) {
      CHECK(jtree_leaf_view_size(views[i]) == arrays[i].bytes);
      CHECK(memcmp(jtree_leaf_view_data(views[i]), arrays[i].data, arrays[i].bytes) == 0);
    }
    jtree_leaf_view_release(views[i]);
  }
  CHECK_OK(jtree_reader_map_leaves(r, NULL, 0, NULL, &jt_err));

  jtree_reader_close(r);
  if (raw) {
    CHECK(jtree_leaf_view_size(view) == MODEL_F32_ROWS * MODEL_F32_COLS * sizeof(float));
    CHECK(jtree_leaf_view_data(view) != NULL &&
          memcmp(jtree_leaf_view_data(view), model_f32(), jtree_leaf_view_size(view)) == 0);
  }
  jtree_leaf_view_release(view);
}

void test_roundtrip(const char* dir) {
  jtree_builder_t* b = jtree_builder_create();
  CHECK(b != NULL);
  CHECK_OK(model_build(b, &jt_err));

  /* Raw, nothing inline, one chunk per leaf: every array leaf can be mapped. */
  jtree_write_options_t* raw = jtree_write_options_create();
  CHECK_OK(jtree_write_options_set_compression(raw, JTREE_CODEC_RAW, 0, &jt_err));
  CHECK_OK(jtree_write_options_set_inline_threshold(raw, 0, &jt_err));
  CHECK_OK(jtree_write_options_set_chunk_bytes(raw, 1 << 20, &jt_err));
  CHECK_OK(jtree_write_options_set_threads(raw, 2, &jt_err));
  CHECK_OK(jtree_write_options_set_sync(raw, 0, &jt_err));
  jtree_write_stats_t stats;
  memset(&stats, 0xff, sizeof stats);
  const char* raw_path = test_path(dir, "model_raw.jtree", 0);
  CHECK_OK(jtree_save(b, raw_path, raw, &stats, &jt_err));
  CHECK(stats.leaves == MODEL_NUM_LEAVES && stats.generation == 0 && stats.file_size > 0);
  CHECK(stats.raw_bytes >= MODEL_F32_ROWS * MODEL_F32_COLS * sizeof(float));

  /* The same (frozen) builder again: zstd with ~1 KiB chunks, default inline threshold. */
  jtree_write_options_t* zstd = jtree_write_options_create();
  CHECK_OK(jtree_write_options_set_compression(zstd, JTREE_CODEC_ZSTD, 3, &jt_err));
  CHECK_OK(jtree_write_options_set_chunk_bytes(zstd, 1000, &jt_err));
  CHECK_OK(jtree_write_options_set_sync(zstd, 0, &jt_err));
  const char* zstd_path = test_path(dir, "model_zstd.jtree", 1);
  CHECK_OK(jtree_save(b, zstd_path, zstd, NULL, &jt_err));
  /* And with default options. */
  CHECK_OK(jtree_save(b, test_path(dir, "model_default.jtree", 2), NULL, NULL, &jt_err));

  check_file(raw_path, 1);
  check_file(zstd_path, 0);
  check_file(test_path(dir, "model_default.jtree", 2), 0);
  /* The compressed files' reads and the saves kept their workers' scratch buffers for the
   * next call: released, they are given back, and nothing is left to release. */
  CHECK(jtree_release_scratch_memory() > 0);
  CHECK(jtree_release_scratch_memory() == 0);

  jtree_write_options_free(raw);
  jtree_write_options_free(zstd);
  jtree_builder_free(b);
}
