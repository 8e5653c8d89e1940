/* tests/c/test_misuse.c — every function with a NULL handle, a NULL out-pointer, a number out
 * of range, a buffer of the wrong size, a bad box, a misused builder or option: each gives
 * its status (InvalidArgument for misuse) and an error naming the function or the file, and
 * nothing crashes. */
#include <math.h>
#include <stdlib.h>

#include "c_test.h"
#include "model.h"

#define INVALID(call) CHECK_FAIL(JTREE_INVALID_ARGUMENT, "", call)

static void null_reader(void) {
  const jtree_reader_t* r = NULL;
  uint32_t u32;
  uint64_t u64;
  size_t sz;
  int64_t i64;
  double f;
  int b;
  char* s;
  const char* cs;
  jtree_node_kind_t nk;
  jtree_key_kind_t kk;
  jtree_leaf_kind_t lk;
  jtree_storage_t st;
  jtree_dtype_t dt;
  jtree_io_stats_t io;
  jtree_leaf_view_t* view = NULL;
  jtree_verify_report_t* rep = NULL;
  char buf[8];
  CHECK(strcmp(jtree_reader_name(NULL), "") == 0);
  jtree_reader_close(NULL);
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "reader is NULL", jtree_reader_num_nodes(r, &u32, &jt_err));
  INVALID(jtree_reader_num_leaves(r, &u32, &jt_err));
  INVALID(jtree_reader_file_size(r, &u64, &jt_err));
  INVALID(jtree_reader_generation(r, &u64, &jt_err));
  INVALID(jtree_reader_io_stats(r, &io, &jt_err));
  INVALID(jtree_reader_node_kind(r, 0, &nk, &jt_err));
  INVALID(jtree_reader_node_key(r, 0, &kk, &cs, &sz, &i64, &jt_err));
  INVALID(jtree_reader_node_num_children(r, 0, &u32, &jt_err));
  INVALID(jtree_reader_node_child(r, 0, 0, &u32, &jt_err));
  INVALID(jtree_reader_node_children(r, 0, &u32, 1, &sz, &jt_err));
  INVALID(jtree_reader_node_parent(r, 0, &u32, &jt_err));
  INVALID(jtree_reader_node_subtree_end(r, 0, &u32, &jt_err));
  INVALID(jtree_reader_node_leaf(r, 0, &u32, &jt_err));
  INVALID(jtree_reader_node_path(r, 0, &s, &jt_err));
  INVALID(jtree_reader_find(r, "a", &u32, &jt_err));
  INVALID(jtree_reader_find_leaf(r, "a", &u32, &jt_err));
  INVALID(jtree_reader_leaf_path(r, 0, &s, &jt_err));
  INVALID(jtree_reader_leaf_kind(r, 0, &lk, &jt_err));
  INVALID(jtree_reader_leaf_storage(r, 0, &st, &jt_err));
  INVALID(jtree_reader_leaf_dtype(r, 0, &dt, &jt_err));
  INVALID(jtree_reader_leaf_rank(r, 0, &sz, &jt_err));
  INVALID(jtree_reader_leaf_shape(r, 0, &u64, 1, &jt_err));
  INVALID(jtree_reader_leaf_memory_bytes(r, 0, &u64, &jt_err));
  INVALID(jtree_reader_leaf_stored_bytes(r, 0, &u64, &jt_err));
  INVALID(jtree_reader_leaf_int(r, 0, &i64, &jt_err));
  INVALID(jtree_reader_leaf_float(r, 0, &f, &jt_err));
  INVALID(jtree_reader_leaf_bool(r, 0, &b, &jt_err));
  INVALID(jtree_reader_metadata_count(r, &sz, &jt_err));
  INVALID(jtree_reader_metadata_entry(r, 0, &cs, &sz, &cs, &sz, &jt_err));
  INVALID(jtree_reader_read(r, 0, buf, sizeof buf, &jt_err));
  INVALID(jtree_reader_read_box(r, 0, 0, NULL, NULL, buf, sizeof buf, &jt_err));
  INVALID(jtree_reader_read_many(r, NULL, 1, &jt_err));
  INVALID(jtree_reader_read_bytes(r, 0, &s, &sz, &jt_err));
  INVALID(jtree_reader_map_leaf(r, 0, &view, &jt_err));
  INVALID(jtree_reader_map_box(r, 0, 0, NULL, NULL, &view, &jt_err));
  INVALID(jtree_reader_map_leaves(r, &u32, 1, &view, &jt_err));
  INVALID(jtree_reader_verify(r, &rep, &jt_err));
  CHECK(view == NULL && rep == NULL);
  CHECK(jtree_leaf_view_data(NULL) == NULL && jtree_leaf_view_size(NULL) == 0);
  jtree_leaf_view_release(NULL);
  CHECK(jtree_verify_report_ok(NULL) == 0 && jtree_verify_report_num_problems(NULL) == 0);
  CHECK(jtree_verify_report_chunks_checked(NULL) == 0);
  CHECK(jtree_verify_report_bytes_checked(NULL) == 0);
  CHECK(jtree_verify_report_problem_code(NULL, 0) == JTREE_INVALID_ARGUMENT);
  CHECK(strcmp(jtree_verify_report_problem_where(NULL, 0), "") == 0);
  CHECK(strcmp(jtree_verify_report_problem_message(NULL, 0), "") == 0);
  jtree_verify_report_free(NULL);
}

/* A valid reader with NULL out-pointers and numbers out of range. */
static void bad_arguments(const jtree_reader_t* r) {
  uint32_t nodes = 0, leaves = 0, u32 = 77;
  uint64_t u64;
  size_t sz;
  int64_t i64;
  double f;
  int b;
  char* s = NULL;
  jtree_node_kind_t nk;
  jtree_key_kind_t kk;
  jtree_leaf_kind_t lk;
  jtree_storage_t st;
  jtree_dtype_t dt;
  jtree_leaf_view_t* view = NULL;
  CHECK_OK(jtree_reader_num_nodes(r, &nodes, &jt_err));
  CHECK_OK(jtree_reader_num_leaves(r, &leaves, &jt_err));

  /* NULL out-pointers. */
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "out is NULL", jtree_reader_num_nodes(r, NULL, &jt_err));
  INVALID(jtree_reader_num_leaves(r, NULL, &jt_err));
  INVALID(jtree_reader_file_size(r, NULL, &jt_err));
  INVALID(jtree_reader_generation(r, NULL, &jt_err));
  INVALID(jtree_reader_io_stats(r, NULL, &jt_err));
  INVALID(jtree_reader_node_kind(r, 0, NULL, &jt_err));
  INVALID(jtree_reader_node_key(r, 0, NULL, NULL, NULL, NULL, &jt_err));
  INVALID(jtree_reader_node_num_children(r, 0, NULL, &jt_err));
  INVALID(jtree_reader_node_child(r, 0, 0, NULL, &jt_err));
  INVALID(jtree_reader_node_children(r, 0, NULL, 0, NULL, &jt_err));
  INVALID(jtree_reader_node_parent(r, 0, NULL, &jt_err));
  INVALID(jtree_reader_node_subtree_end(r, 0, NULL, &jt_err));
  INVALID(jtree_reader_node_leaf(r, 0, NULL, &jt_err));
  INVALID(jtree_reader_node_path(r, 0, NULL, &jt_err));
  INVALID(jtree_reader_find(r, NULL, &u32, &jt_err));
  INVALID(jtree_reader_find(r, "f32", NULL, &jt_err));
  INVALID(jtree_reader_find_leaf(r, NULL, &u32, &jt_err));
  INVALID(jtree_reader_find_leaf(r, "f32", NULL, &jt_err));
  INVALID(jtree_reader_leaf_path(r, 0, NULL, &jt_err));
  INVALID(jtree_reader_leaf_kind(r, 0, NULL, &jt_err));
  INVALID(jtree_reader_leaf_storage(r, 0, NULL, &jt_err));
  INVALID(jtree_reader_leaf_dtype(r, 0, NULL, &jt_err));
  INVALID(jtree_reader_leaf_rank(r, 0, NULL, &jt_err));
  INVALID(jtree_reader_leaf_memory_bytes(r, 0, NULL, &jt_err));
  INVALID(jtree_reader_leaf_stored_bytes(r, 0, NULL, &jt_err));
  INVALID(jtree_reader_leaf_int(r, 0, NULL, &jt_err));
  INVALID(jtree_reader_leaf_float(r, 0, NULL, &jt_err));
  INVALID(jtree_reader_leaf_bool(r, 0, NULL, &jt_err));
  INVALID(jtree_reader_metadata_count(r, NULL, &jt_err));
  INVALID(jtree_reader_read_bytes(r, 0, NULL, &sz, &jt_err));
  INVALID(jtree_reader_read_bytes(r, 0, &s, NULL, &jt_err));
  INVALID(jtree_reader_map_leaf(r, 0, NULL, &jt_err));
  INVALID(jtree_reader_verify(r, NULL, &jt_err));
  CHECK(u32 == 77);  /* out-pointers untouched on failure */

  /* Numbers out of range name the file and the range. */
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "out of range",
             jtree_reader_node_kind(r, nodes, &nk, &jt_err));
  CHECK(strstr(jtree_error_message(jt_err), "misuse.jtree") != NULL);
  INVALID(jtree_reader_node_key(r, nodes, &kk, NULL, NULL, NULL, &jt_err));
  INVALID(jtree_reader_node_num_children(r, 0xffffffffu, &u32, &jt_err));
  INVALID(jtree_reader_node_child(r, nodes, 0, &u32, &jt_err));
  INVALID(jtree_reader_node_parent(r, nodes, &u32, &jt_err));
  INVALID(jtree_reader_node_subtree_end(r, nodes, &u32, &jt_err));
  INVALID(jtree_reader_node_leaf(r, nodes, &u32, &jt_err));
  INVALID(jtree_reader_node_path(r, nodes, &s, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "out of range",
             jtree_reader_leaf_kind(r, leaves, &lk, &jt_err));
  INVALID(jtree_reader_leaf_path(r, leaves, &s, &jt_err));
  INVALID(jtree_reader_leaf_storage(r, leaves, &st, &jt_err));
  INVALID(jtree_reader_leaf_dtype(r, leaves, &dt, &jt_err));
  INVALID(jtree_reader_leaf_rank(r, leaves, &sz, &jt_err));
  INVALID(jtree_reader_leaf_shape(r, leaves, &u64, 1, &jt_err));
  INVALID(jtree_reader_leaf_memory_bytes(r, leaves, &u64, &jt_err));
  INVALID(jtree_reader_leaf_stored_bytes(r, leaves, &u64, &jt_err));
  INVALID(jtree_reader_leaf_int(r, leaves, &i64, &jt_err));
  INVALID(jtree_reader_leaf_float(r, leaves, &f, &jt_err));
  INVALID(jtree_reader_leaf_bool(r, leaves, &b, &jt_err));
  INVALID(jtree_reader_read_bytes(r, leaves, &s, &sz, &jt_err));
  INVALID(jtree_reader_map_leaf(r, leaves, &view, &jt_err));
  const uint32_t some[2] = {0, leaves};
  jtree_leaf_view_t* two[2] = {NULL, NULL};
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "out of range",
             jtree_reader_map_leaves(r, some, 2, two, &jt_err));
  CHECK(two[0] == NULL && two[1] == NULL);
  INVALID(jtree_reader_map_leaves(r, NULL, 2, two, &jt_err));
  INVALID(jtree_reader_map_leaves(r, some, 2, NULL, &jt_err));
  size_t count = 0;
  CHECK_OK(jtree_reader_metadata_count(r, &count, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "metadata entry",
             jtree_reader_metadata_entry(r, count, NULL, NULL, NULL, NULL, &jt_err));

  /* Children: an index past the last, too small an array (the count still comes back). */
  uint32_t children[2];
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "children",
             jtree_reader_node_child(r, 0, 1000, &u32, &jt_err));
  sz = 0;
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "room for 2",
             jtree_reader_node_children(r, 0, children, 2, &sz, &jt_err));
  CHECK(sz == 16);  /* the model's top-level dict */
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "", jtree_reader_node_children(r, 0, NULL, 0, &sz, &jt_err));
  CHECK(sz == 16);
  /* Room enough but no array: refused, and the count left as it was (c.h writes it on a
   * failure only when the array is too small). */
  sz = 12345;
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "out is NULL",
             jtree_reader_node_children(r, 0, NULL, 16, &sz, &jt_err));
  CHECK(sz == 12345);

  /* Kinds that do not fit the question. */
  uint32_t lf32 = 0, lstep = 0, lname = 0, lf64 = 0;
  CHECK_OK(jtree_reader_find_leaf(r, "f32", &lf32, &jt_err));
  CHECK_OK(jtree_reader_find_leaf(r, "step", &lstep, &jt_err));
  CHECK_OK(jtree_reader_find_leaf(r, "name", &lname, &jt_err));
  CHECK_OK(jtree_reader_find_leaf(r, "f64", &lf64, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "not a leaf", jtree_reader_node_leaf(r, 0, &u32, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "f32", jtree_reader_leaf_int(r, lf32, &i64, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "step", jtree_reader_leaf_float(r, lstep, &f, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "step", jtree_reader_leaf_bool(r, lstep, &b, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "f32", jtree_reader_read_bytes(r, lf32, &s, &sz, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "layers", jtree_reader_find_leaf(r, "layers", &u32, &jt_err));
  CHECK_FAIL(JTREE_NOT_SUPPORTED, "step", jtree_reader_map_leaf(r, lstep, &view, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "rank 2, room for 1",
             jtree_reader_leaf_shape(r, lf32, &u64, 1, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "", jtree_reader_leaf_shape(r, lf32, NULL, 2, &jt_err));
  CHECK_OK(jtree_reader_leaf_shape(r, lf64, NULL, 0, &jt_err));  /* rank 0 */

  /* Find: NotFound names the file and the path. */
  CHECK_FAIL(JTREE_NOT_FOUND, "layers/7", jtree_reader_find(r, "layers/7/w", &u32, &jt_err));
  CHECK(strstr(jtree_error_message(jt_err), "misuse.jtree") != NULL);
  CHECK_FAIL(JTREE_NOT_FOUND, "nope", jtree_reader_find_leaf(r, "nope", &u32, &jt_err));

  /* Reads: wrong sizes, NULL buffers, bad boxes, leaves without payload. */
  const size_t n = MODEL_F32_ROWS * MODEL_F32_COLS * sizeof(float);
  float* buf = malloc(n + 4);
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "destination of",
             jtree_reader_read(r, lf32, buf, n + 4, &jt_err));
  CHECK(strstr(jtree_error_message(jt_err), "f32") != NULL);
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "destination of",
             jtree_reader_read(r, lf32, buf, n - 4, &jt_err));
  INVALID(jtree_reader_read(r, lf32, NULL, n, &jt_err));
  INVALID(jtree_reader_read(r, leaves, buf, n, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "no array data", jtree_reader_read(r, lstep, buf, 8, &jt_err));
  const uint64_t begin[2] = {0, 0}, end_ok[2] = {2, 2}, end_far[2] = {65, 2},
                 begin_after[2] = {3, 0}, end_before[2] = {2, 2};
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "out of bounds",
             jtree_reader_read_box(r, lf32, 2, begin, end_far, buf, 65 * 2 * 4, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "out of bounds",
             jtree_reader_read_box(r, lf32, 2, begin_after, end_before, buf, 0, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "rank",
             jtree_reader_read_box(r, lf32, 1, begin, end_ok, buf, 2 * 4, &jt_err));
  /* A rank no array has, with arrays of two: refused before begin and end are read past
   * their end (the box, the mapped box, a request of a batch). */
  const size_t absurd = (size_t)-1 / 4;
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "slice of rank",
             jtree_reader_read_box(r, lf32, absurd, begin, end_ok, buf, 4 * 4, &jt_err));
  jtree_leaf_view_t* box_view = NULL;
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "for an array of rank 2",
             jtree_reader_map_box(r, lf32, absurd, begin, end_ok, &box_view, &jt_err));
  CHECK(box_view == NULL);
  jtree_read_request_t absurd_req = {lf32, absurd, begin, end_ok, buf, 4 * 4};
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "request 0: ",
             jtree_reader_read_many(r, &absurd_req, 1, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "destination of",
             jtree_reader_read_box(r, lf32, 2, begin, end_ok, buf, 5 * 4, &jt_err));
  INVALID(jtree_reader_read_box(r, lf32, 2, NULL, end_ok, buf, 4 * 4, &jt_err));
  INVALID(jtree_reader_read_box(r, lf32, 2, begin, NULL, buf, 4 * 4, &jt_err));
  INVALID(jtree_reader_read_box(r, lf32, 2, begin, end_ok, NULL, 4 * 4, &jt_err));
  jtree_read_request_t reqs[2] = {
      {lf32, 2, begin, end_ok, buf, 4 * 4},
      {lf32, 2, begin, NULL, buf, 4 * 4},  /* end missing */
  };
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "request 1", jtree_reader_read_many(r, reqs, 2, &jt_err));
  reqs[1].end = end_far;
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "out of bounds", jtree_reader_read_many(r, reqs, 2, &jt_err));
  reqs[1] = (jtree_read_request_t){leaves, 0, NULL, NULL, buf, 4};
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "out of range", jtree_reader_read_many(r, reqs, 2, &jt_err));
  reqs[1] = (jtree_read_request_t){lf32, 0, NULL, NULL, NULL, n};
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "dst is NULL", jtree_reader_read_many(r, reqs, 2, &jt_err));
  free(buf);
}

static void bad_builders_and_options(const char* dir) {
  jtree_error_t* none = NULL;
  const uint64_t dims[2] = {2, 3};
  const float data[6] = {1, 2, 3, 4, 5, 6};
  const char* path = test_path(dir, "builder.jtree", 0);

  /* NULL builders. */
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "builder is NULL", jtree_builder_begin_dict(NULL, &jt_err));
  INVALID(jtree_builder_key(NULL, "k", &jt_err));
  INVALID(jtree_builder_key_int(NULL, 1, &jt_err));
  INVALID(jtree_builder_begin_list(NULL, &jt_err));
  INVALID(jtree_builder_end(NULL, &jt_err));
  INVALID(jtree_builder_none(NULL, &jt_err));
  INVALID(jtree_builder_array(NULL, JTREE_DTYPE_FLOAT32, 2, dims, data, sizeof data, &jt_err));
  INVALID(jtree_builder_int(NULL, 1, &jt_err));
  INVALID(jtree_builder_float(NULL, 1, &jt_err));
  INVALID(jtree_builder_bool(NULL, 1, &jt_err));
  INVALID(jtree_builder_str(NULL, "x", 1, &jt_err));
  INVALID(jtree_builder_bytes(NULL, "x", 1, &jt_err));
  INVALID(jtree_builder_reuse(NULL, 0, &jt_err));
  INVALID(jtree_builder_metadata(NULL, "k", "v", &jt_err));
  INVALID(jtree_save(NULL, path, NULL, NULL, &jt_err));
  INVALID(jtree_append(NULL, path, NULL, NULL, &jt_err));
  jtree_builder_free(NULL);

  /* Arguments refused at once. */
  jtree_builder_t* b = jtree_builder_create();
  CHECK_OK(jtree_builder_begin_dict(b, &jt_err));
  INVALID(jtree_builder_key(b, NULL, &jt_err));
  CHECK_OK(jtree_builder_key(b, "w", &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "24 bytes, data_bytes is 20",
             jtree_builder_array(b, JTREE_DTYPE_FLOAT32, 2, dims, data, 20, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "unknown dtype",
             jtree_builder_array(b, JTREE_DTYPE_INVALID, 2, dims, data, 24, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "unknown dtype",
             jtree_builder_array(b, (jtree_dtype_t)200, 2, dims, data, 24, &jt_err));
  INVALID(jtree_builder_array(b, JTREE_DTYPE_FLOAT32, 2, NULL, data, 24, &jt_err));
  INVALID(jtree_builder_array(b, JTREE_DTYPE_FLOAT32, 2, dims, NULL, 24, &jt_err));
  const uint64_t huge[3] = {1ull << 40, 1ull << 40, 16};
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "overflows",
             jtree_builder_array(b, JTREE_DTYPE_FLOAT32, 3, huge, data, 24, &jt_err));
  /* A rank no array can have: refused before dims (two numbers here) is read past its end. */
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "over the 64 dimensions",
             jtree_builder_array(b, JTREE_DTYPE_FLOAT32, (size_t)-1 / 4, dims, data, 24, &jt_err));
  INVALID(jtree_builder_str(b, NULL, 3, &jt_err));
  INVALID(jtree_builder_bytes(b, NULL, 3, &jt_err));
  INVALID(jtree_builder_metadata(b, NULL, "v", &jt_err));
  INVALID(jtree_builder_metadata(b, "k", NULL, &jt_err));
  CHECK_OK(jtree_builder_array(b, JTREE_DTYPE_FLOAT32, 2, dims, data, sizeof data, &jt_err));
  CHECK_OK(jtree_builder_end(b, &jt_err));
  INVALID(jtree_save(b, NULL, NULL, NULL, &jt_err));
  CHECK_OK(jtree_save(b, path, NULL, NULL, &jt_err));
  /* Frozen after the first save: more saves are fine, more nodes are not. */
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "was saved", jtree_builder_int(b, 1, &jt_err));
  CHECK_OK(jtree_save(b, path, NULL, NULL, &jt_err));
  /* Overwriting refused: AlreadyExists. */
  jtree_write_options_t* wo = jtree_write_options_create();
  CHECK_OK(jtree_write_options_set_overwrite(wo, 0, &jt_err));
  CHECK_FAIL(JTREE_ALREADY_EXISTS, "builder.jtree", jtree_save(b, path, wo, NULL, &jt_err));
  jtree_builder_free(b);

  /* Structural misuse is TreeBuilder's to find, reported by the save, naming the place. */
  b = jtree_builder_create();
  CHECK_OK(jtree_builder_begin_list(b, &jt_err));
  CHECK_OK(jtree_builder_key(b, "k", &jt_err));  /* a key inside a list */
  CHECK_OK(jtree_builder_int(b, 1, &jt_err));
  CHECK_OK(jtree_builder_end(b, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "", jtree_save(b, path, NULL, NULL, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "", jtree_save(b, path, NULL, NULL, &jt_err));  /* again */
  jtree_builder_free(b);
  b = jtree_builder_create();
  CHECK_OK(jtree_builder_begin_dict(b, &jt_err));
  CHECK_OK(jtree_builder_int(b, 1, &jt_err));  /* a dict item without a key */
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "", jtree_save(b, path, NULL, NULL, &jt_err));
  jtree_builder_free(b);
  b = jtree_builder_create();
  CHECK_OK(jtree_builder_end(b, &jt_err));  /* nothing open */
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "", jtree_save(b, path, NULL, NULL, &jt_err));
  jtree_builder_free(b);
  b = jtree_builder_create();  /* empty: no root */
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "", jtree_save(b, path, NULL, NULL, &jt_err));
  jtree_builder_free(b);
  b = jtree_builder_create();  /* a reused leaf outside an append */
  CHECK_OK(jtree_builder_reuse(b, 0, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "only an append", jtree_save(b, path, NULL, NULL, &jt_err));
  jtree_builder_free(b);
  b = jtree_builder_create();  /* a reused leaf out of range (of a valid file) */
  CHECK_OK(jtree_builder_int(b, 1, &jt_err));
  CHECK_OK(jtree_save(b, path, NULL, NULL, &jt_err));
  jtree_builder_free(b);
  b = jtree_builder_create();
  CHECK_OK(jtree_builder_begin_dict(b, &jt_err));
  CHECK_OK(jtree_builder_key(b, "x", &jt_err));
  CHECK_OK(jtree_builder_reuse(b, 12345, &jt_err));
  CHECK_OK(jtree_builder_end(b, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "12345", jtree_append(b, path, NULL, NULL, &jt_err));
  INVALID(jtree_append(b, NULL, NULL, NULL, &jt_err));
  jtree_builder_free(b);
  /* A scalar root with integer keys elsewhere; and no error pointer at all. */
  b = jtree_builder_create();
  CHECK(jtree_builder_begin_dict(b, NULL) == JTREE_OK);
  CHECK(jtree_builder_key_int(b, 5, NULL) == JTREE_OK);
  CHECK(jtree_builder_float(b, 2.5, NULL) == JTREE_OK);
  CHECK(jtree_builder_end(b, NULL) == JTREE_OK);
  CHECK(jtree_builder_int(b, 1, NULL) == JTREE_OK);  /* a second root: refused at save */
  CHECK(jtree_save(b, path, NULL, NULL, &none) == JTREE_INVALID_ARGUMENT);
  CHECK(none != NULL);
  jtree_error_free(none);
  jtree_builder_free(b);

  /* Options: NULL handles and values out of range. */
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "opts is NULL",
             jtree_write_options_set_compression(NULL, JTREE_CODEC_RAW, 0, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "unknown codec",
             jtree_write_options_set_compression(wo, (jtree_codec_t)7, 0, &jt_err));
  /* A level zstd does not have is refused, not clamped (the library's own check). */
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "level 99 is not a zstd level",
             jtree_write_options_set_compression(wo, JTREE_CODEC_ZSTD, 99, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "level -200 is not a zstd level",
             jtree_write_options_set_compression(wo, JTREE_CODEC_ZSTD, -200, &jt_err));
  CHECK_OK(jtree_write_options_set_compression(wo, JTREE_CODEC_ZSTD, 22, &jt_err));
  INVALID(jtree_write_options_set_chunk_bytes(NULL, 1, &jt_err));
  INVALID(jtree_write_options_set_chunk_bytes(wo, 0, &jt_err));
  INVALID(jtree_write_options_set_inline_threshold(NULL, 1, &jt_err));
  INVALID(jtree_write_options_set_threads(NULL, 1, &jt_err));
  INVALID(jtree_write_options_set_threads(wo, -1, &jt_err));
  INVALID(jtree_write_options_set_overwrite(NULL, 1, &jt_err));
  INVALID(jtree_write_options_set_sync(NULL, 1, &jt_err));
  INVALID(jtree_write_options_set_remote(NULL, NULL, &jt_err));
  CHECK_OK(jtree_write_options_set_remote(wo, NULL, &jt_err));
  jtree_write_options_free(wo);
  jtree_write_options_free(NULL);

  jtree_open_options_t* oo = jtree_open_options_create();
  INVALID(jtree_open_options_set_threads(NULL, 1, &jt_err));
  INVALID(jtree_open_options_set_threads(oo, -2, &jt_err));
  INVALID(jtree_open_options_set_verify_checksums(NULL, 1, &jt_err));
  INVALID(jtree_open_options_set_use_mmap(NULL, 1, &jt_err));
  INVALID(jtree_open_options_set_limit(NULL, JTREE_LIMIT_MAX_NODES, 1, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "unknown limit",
             jtree_open_options_set_limit(oo, (jtree_limit_t)99, 1, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "2^32",
             jtree_open_options_set_limit(oo, JTREE_LIMIT_MAX_DEPTH, 1ull << 32, &jt_err));
  INVALID(jtree_open_options_set_limit(oo, JTREE_LIMIT_MAX_RANK, 1ull << 33, &jt_err));
  INVALID(jtree_open_options_set_remote(NULL, NULL, &jt_err));
  jtree_open_options_free(oo);
  jtree_open_options_free(NULL);

  jtree_remote_options_t* ro = jtree_remote_options_create();
  INVALID(jtree_remote_options_set_max_retries(NULL, 1, &jt_err));
  INVALID(jtree_remote_options_set_max_retries(ro, -1, &jt_err));
  INVALID(jtree_remote_options_set_timeouts(NULL, 1, 1, 1, &jt_err));
  INVALID(jtree_remote_options_set_timeouts(ro, 0, 1, 1, &jt_err));
  INVALID(jtree_remote_options_set_timeouts(ro, 1, -1, 1, &jt_err));
  INVALID(jtree_remote_options_set_timeouts(ro, 1, 1, INFINITY, &jt_err));
  INVALID(jtree_remote_options_set_max_concurrency(NULL, 1, &jt_err));
  INVALID(jtree_remote_options_set_max_concurrency(ro, 0, &jt_err));
  INVALID(jtree_remote_options_set_endpoint(NULL, "x", &jt_err));
  INVALID(jtree_remote_options_set_region(NULL, "x", &jt_err));
  INVALID(jtree_remote_options_set_profile(NULL, "x", &jt_err));
  INVALID(jtree_remote_options_set_credentials(NULL, "a", "b", NULL, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "both",
             jtree_remote_options_set_credentials(ro, "a", NULL, NULL, &jt_err));
  INVALID(jtree_remote_options_set_ca_file(NULL, "x", &jt_err));
  INVALID(jtree_remote_options_set_verify_tls(NULL, 1, &jt_err));
  INVALID(jtree_remote_options_add_http_header(NULL, "A: b", &jt_err));
  INVALID(jtree_remote_options_add_http_header(ro, NULL, &jt_err));
  INVALID(jtree_remote_options_add_http_header(ro, "no colon", &jt_err));
  INVALID(jtree_remote_options_set_allow_full_download(NULL, 1, 0, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "one line",
             jtree_remote_options_add_http_header(ro, "A: b\r\nX-Injected: 1", &jt_err));
  jtree_remote_options_free(ro);
  jtree_remote_options_free(NULL);
}

/* Every setter with a valid value, and a reader opened through them (local file: the remote
 * settings are accepted and unused). */
static void good_options(const char* path) {
  jtree_remote_options_t* ro = jtree_remote_options_create();
  CHECK(ro != NULL);
  CHECK_OK(jtree_remote_options_set_max_retries(ro, 3, &jt_err));
  CHECK_OK(jtree_remote_options_set_timeouts(ro, 60, 5, 10, &jt_err));
  CHECK_OK(jtree_remote_options_set_max_concurrency(ro, 8, &jt_err));
  CHECK_OK(jtree_remote_options_set_endpoint(ro, "http://127.0.0.1:9", &jt_err));
  CHECK_OK(jtree_remote_options_set_endpoint(ro, NULL, &jt_err));
  CHECK_OK(jtree_remote_options_set_region(ro, "eu-west-1", &jt_err));
  CHECK_OK(jtree_remote_options_set_profile(ro, "default", &jt_err));
  CHECK_OK(jtree_remote_options_set_credentials(ro, "AKIDEXAMPLE", "secret", NULL, &jt_err));
  CHECK_OK(jtree_remote_options_set_credentials(ro, NULL, NULL, NULL, &jt_err));
  CHECK_OK(jtree_remote_options_set_ca_file(ro, "/etc/ssl/certs/ca-certificates.crt", &jt_err));
  CHECK_OK(jtree_remote_options_set_verify_tls(ro, 1, &jt_err));
  CHECK_OK(jtree_remote_options_add_http_header(ro, "Authorization: Bearer x", &jt_err));
  CHECK_OK(jtree_remote_options_set_allow_full_download(ro, 1, 1u << 30, &jt_err));
  jtree_open_options_t* oo = jtree_open_options_create();
  CHECK_OK(jtree_open_options_set_remote(oo, ro, &jt_err));
  jtree_remote_options_free(ro);  /* copied */
  CHECK_OK(jtree_open_options_set_threads(oo, 1, &jt_err));
  CHECK_OK(jtree_open_options_set_verify_checksums(oo, 1, &jt_err));
  CHECK_OK(jtree_open_options_set_use_mmap(oo, 1, &jt_err));
  for (int l = JTREE_LIMIT_MAX_HEADER_BYTES; l <= JTREE_LIMIT_MAX_TOTAL_BYTES; ++l) {
    CHECK_OK(jtree_open_options_set_limit(oo, (jtree_limit_t)l, 1u << 20, &jt_err));
  }
  jtree_reader_t* r = NULL;
  CHECK_OK(jtree_reader_open(path, oo, &r, &jt_err));
  jtree_reader_close(r);

  /* The remote settings reach the backends: nothing listens on port 9, so with no retries an
   * http:// or s3:// open fails at once (IOError; NotSupported in builds without the remote
   * backends), naming the URL. */
  jtree_remote_options_t* fast = jtree_remote_options_create();
  CHECK_OK(jtree_remote_options_set_max_retries(fast, 0, &jt_err));
  CHECK_OK(jtree_remote_options_set_timeouts(fast, 5, 2, 2, &jt_err));
  CHECK_OK(jtree_remote_options_set_endpoint(fast, "http://127.0.0.1:9", &jt_err));
  CHECK_OK(jtree_remote_options_set_region(fast, "us-east-1", &jt_err));
  CHECK_OK(jtree_remote_options_set_credentials(fast, "AKIDEXAMPLE", "secret", "token", &jt_err));
  jtree_open_options_t* remote = jtree_open_options_create();
  CHECK_OK(jtree_open_options_set_remote(remote, fast, &jt_err));
  jtree_remote_options_free(fast);
  r = NULL;
  jtree_status_t st = jtree_reader_open("http://127.0.0.1:9/model.jtree", remote, &r, &jt_err);
  CHECK((st == JTREE_IO_ERROR || st == JTREE_NOT_SUPPORTED) && r == NULL);
  CHECK(strstr(jtree_error_message(jt_err), "127.0.0.1:9/model.jtree") != NULL);
  st = jtree_reader_open("s3://bucket/model.jtree", remote, &r, &jt_err);
  CHECK((st == JTREE_IO_ERROR || st == JTREE_NOT_SUPPORTED) && r == NULL);
  CHECK(strstr(jtree_error_message(jt_err), "s3://bucket/model.jtree") != NULL);
  CHECK_OK(jtree_open_options_set_remote(remote, NULL, &jt_err));  /* back to the defaults */
  jtree_open_options_free(remote);

  /* Limits are enforced: a file with more leaves than allowed is refused. */
  CHECK_OK(jtree_open_options_set_limit(oo, JTREE_LIMIT_MAX_LEAVES, 2, &jt_err));
  r = NULL;
  st = jtree_reader_open(path, oo, &r, &jt_err);
  CHECK(st != JTREE_OK && r == NULL);
  CHECK(strstr(jtree_error_message(jt_err), "misuse.jtree") != NULL);
  /* And the allocation of a text leaf is bounded. */
  CHECK_OK(jtree_open_options_set_limit(oo, JTREE_LIMIT_MAX_LEAVES, 1u << 20, &jt_err));
  CHECK_OK(jtree_open_options_set_limit(oo, JTREE_LIMIT_MAX_LEAF_BYTES, 4, &jt_err));
  CHECK_OK(jtree_reader_open(path, oo, &r, &jt_err));
  uint32_t lname = 0;
  char* s = NULL;
  size_t sz = 0;
  CHECK_OK(jtree_reader_find_leaf(r, "name", &lname, &jt_err));
  /* (Inline as it is: the limits bound what a call hands out; test_promises.c has more.) */
  CHECK_FAIL(JTREE_RESOURCE_EXHAUSTED, "name", jtree_reader_read_bytes(r, lname, &s, &sz, &jt_err));
  CHECK(s == NULL);
  jtree_reader_close(r);
  jtree_open_options_free(oo);
}

/* The device options (jtree_device_options_t): NULL handles, values out of range refused at
 * once with the library's message (DeviceOptions::check), the handle left as it was; the
 * DirectIo names parsed by the library (jtree::parse_direct_io). */
static void bad_device_options(void) {
  jtree_device_options_t* d = jtree_device_options_create();
  CHECK(d != NULL);
  if (d == NULL) return;
  INVALID(jtree_device_options_set_device(NULL, 0, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "device is -1",
             jtree_device_options_set_device(d, -1, &jt_err));
  CHECK_OK(jtree_device_options_set_device(d, 3, &jt_err));
  INVALID(jtree_device_options_set_staging(NULL, 1 << 20, 2, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "staging_buffers is 0; it must be from 1 to 64",
             jtree_device_options_set_staging(d, 1 << 20, 0, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "staging_buffers is 65",
             jtree_device_options_set_staging(d, 1 << 20, 65, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "staging_buffers is -1",
             jtree_device_options_set_staging(d, 1 << 20, -1, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "below the minimum of 4096 bytes per buffer",
             jtree_device_options_set_staging(d, 8192, 4, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "below the minimum",
             jtree_device_options_set_staging(d, 0, 4, &jt_err));
  /* A wrapped-around negative size (a C caller's (uint64_t)-1) is refused, not pinned. */
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "staging_bytes is 18446744073709551615",
             jtree_device_options_set_staging(d, UINT64_MAX, 4, &jt_err));
  CHECK_OK(jtree_device_options_set_staging(d, 4096 * 64, 64, &jt_err));
  CHECK_OK(jtree_device_options_set_staging(d, 4096, 1, &jt_err));
  INVALID(jtree_device_options_set_direct_io(NULL, JTREE_DIRECT_IO_ON, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "direct_io is 7",
             jtree_device_options_set_direct_io(d, (jtree_direct_io_t)7, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "direct_io is -1",
             jtree_device_options_set_direct_io(d, (jtree_direct_io_t)-1, &jt_err));
  CHECK_OK(jtree_device_options_set_direct_io(d, JTREE_DIRECT_IO_OFF, &jt_err));
  jtree_device_options_free(d);
  jtree_device_options_free(NULL);

  jtree_direct_io_t mode = JTREE_DIRECT_IO_AUTO;
  CHECK_OK(jtree_direct_io_parse("on", &mode, &jt_err));
  CHECK(mode == JTREE_DIRECT_IO_ON);
  CHECK_OK(jtree_direct_io_parse("off", &mode, &jt_err));
  CHECK(mode == JTREE_DIRECT_IO_OFF);
  CHECK_OK(jtree_direct_io_parse("auto", &mode, &jt_err));
  CHECK(mode == JTREE_DIRECT_IO_AUTO);
  CHECK_FAIL(JTREE_INVALID_ARGUMENT,
             "direct_io must be \"auto\", \"on\" or \"off\", not \"sometimes\"",
             jtree_direct_io_parse("sometimes", &mode, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "not \"ON\"", jtree_direct_io_parse("ON", &mode, &jt_err));
  CHECK(mode == JTREE_DIRECT_IO_AUTO); /* (left as it was) */
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "name is NULL", jtree_direct_io_parse(NULL, &mode, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "out is NULL", jtree_direct_io_parse("on", NULL, &jt_err));
  CHECK(strcmp(jtree_direct_io_name(JTREE_DIRECT_IO_AUTO), "auto") == 0);
  CHECK(strcmp(jtree_direct_io_name(JTREE_DIRECT_IO_ON), "on") == 0);
  CHECK(strcmp(jtree_direct_io_name(JTREE_DIRECT_IO_OFF), "off") == 0);
  CHECK(jtree_direct_io_name((jtree_direct_io_t)3) == NULL);
}

void test_misuse(const char* dir) {
  null_reader();
  bad_device_options();

  jtree_reader_t* r = NULL;
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "path_or_url is NULL",
             jtree_reader_open(NULL, NULL, &r, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "out is NULL",
             jtree_reader_open("x.jtree", NULL, NULL, &jt_err));
  CHECK_FAIL(JTREE_NOT_FOUND, "does_not_exist.jtree",
             jtree_reader_open(test_path(dir, "does_not_exist.jtree", 0), NULL, &r, &jt_err));
  CHECK(r == NULL);
  CHECK_FAIL(JTREE_CORRUPTION, "not_a_jtree.bin",  /* a file that is not a jtree file */
             (write_file(test_path(dir, "not_a_jtree.bin", 0),
                         (const unsigned char*)"hello, this is not a jtree file at all....", 42),
              jtree_reader_open(test_path(dir, "not_a_jtree.bin", 0), NULL, &r, &jt_err)));

  const char* path = test_path(dir, "misuse.jtree", 1);
  jtree_builder_t* b = jtree_builder_create();
  CHECK_OK(model_build(b, &jt_err));
  CHECK_OK(jtree_save(b, path, NULL, NULL, &jt_err));
  jtree_builder_free(b);
  CHECK_OK(jtree_reader_open(path, NULL, &r, &jt_err));
  if (r != NULL) bad_arguments(r);
  jtree_reader_close(r);
  good_options(path);
  bad_builders_and_options(dir);
}
