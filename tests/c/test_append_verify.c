/* tests/c/test_append_verify.c — append a generation that reuses a leaf, verify an intact
 * file, and a damaged copy (one byte of a chunk flipped): reads, views and verify report
 * Corruption naming the leaf's key path. Also writes shard_model.jtree for the shard_loader
 * example's test. */
#include <stdlib.h>

#include "c_test.h"
#include "model.h"

/* Offset of the first occurrence of `needle` in `hay`, or (size_t)-1. */
static size_t find_bytes(const unsigned char* hay, size_t n, const void* needle, size_t m) {
  for (size_t i = 0; i + m <= n; ++i) {
    if (memcmp(hay + i, needle, m) == 0) return i;
  }
  return (size_t)-1;
}

static jtree_write_options_t* raw_options(void) {
  jtree_write_options_t* o = jtree_write_options_create();
  CHECK_OK(jtree_write_options_set_compression(o, JTREE_CODEC_RAW, 0, &jt_err));
  CHECK_OK(jtree_write_options_set_inline_threshold(o, 0, &jt_err));
  CHECK_OK(jtree_write_options_set_sync(o, 0, &jt_err));
  return o;
}

static void test_append(const char* dir, jtree_write_options_t* raw) {
  const char* path = test_path(dir, "append.jtree", 0);
  jtree_builder_t* b = jtree_builder_create();
  CHECK_OK(model_build(b, &jt_err));
  CHECK_OK(jtree_save(b, path, raw, NULL, &jt_err));
  jtree_builder_free(b);

  jtree_reader_t* r = NULL;
  uint32_t old_f32 = 0;
  CHECK_OK(jtree_reader_open(path, NULL, &r, &jt_err));
  CHECK_OK(jtree_reader_find_leaf(r, "f32", &old_f32, &jt_err));

  /* Generation 1: keeps f32 without rewriting it, adds an int32 array, changes step. */
  int32_t extra[10];
  for (int i = 0; i < 10; ++i) extra[i] = i * i - 7;
  const uint64_t dims[1] = {10};
  jtree_builder_t* b2 = jtree_builder_create();
  CHECK_OK(jtree_builder_begin_dict(b2, &jt_err));
  CHECK_OK(jtree_builder_key(b2, "f32", &jt_err));
  CHECK_OK(jtree_builder_reuse(b2, old_f32, &jt_err));
  CHECK_OK(jtree_builder_key(b2, "extra", &jt_err));
  CHECK_OK(jtree_builder_array(b2, JTREE_DTYPE_INT32, 1, dims, extra, sizeof extra, &jt_err));
  CHECK_OK(jtree_builder_key(b2, "step", &jt_err));
  CHECK_OK(jtree_builder_int(b2, 2000, &jt_err));
  CHECK_OK(jtree_builder_end(b2, &jt_err));
  jtree_write_stats_t stats;
  CHECK_OK(jtree_append(b2, path, raw, &stats, &jt_err));
  CHECK(stats.generation == 1 && stats.leaves == 3);
  CHECK(stats.raw_bytes < MODEL_F32_ROWS * MODEL_F32_COLS * sizeof(float));  /* not rewritten */
  jtree_builder_free(b2);

  /* The reader opened before the append still reads generation 0. */
  uint32_t leaves = 0;
  CHECK_OK(jtree_reader_num_leaves(r, &leaves, &jt_err));
  CHECK(leaves == MODEL_NUM_LEAVES);
  jtree_reader_close(r);

  r = NULL;
  CHECK_OK(jtree_reader_open(path, NULL, &r, &jt_err));
  uint64_t generation = 0;
  CHECK_OK(jtree_reader_generation(r, &generation, &jt_err));
  CHECK(generation == 1);
  CHECK_OK(jtree_reader_num_leaves(r, &leaves, &jt_err));
  CHECK(leaves == 3);
  uint32_t lf32 = 0, lextra = 0, lstep = 0;
  CHECK_OK(jtree_reader_find_leaf(r, "f32", &lf32, &jt_err));
  CHECK_OK(jtree_reader_find_leaf(r, "extra", &lextra, &jt_err));
  CHECK_OK(jtree_reader_find_leaf(r, "step", &lstep, &jt_err));
  float* f32 = malloc(MODEL_F32_ROWS * MODEL_F32_COLS * sizeof(float));
  CHECK_OK(jtree_reader_read(r, lf32, f32, MODEL_F32_ROWS * MODEL_F32_COLS * sizeof(float),
                             &jt_err));
  CHECK(memcmp(f32, model_f32(), MODEL_F32_ROWS * MODEL_F32_COLS * sizeof(float)) == 0);
  free(f32);
  int32_t got[10];
  CHECK_OK(jtree_reader_read(r, lextra, got, sizeof got, &jt_err));
  CHECK(memcmp(got, extra, sizeof got) == 0);
  int64_t step = 0;
  CHECK_OK(jtree_reader_leaf_int(r, lstep, &step, &jt_err));
  CHECK(step == 2000);
  CHECK_FAIL(JTREE_NOT_FOUND, "i16", jtree_reader_find_leaf(r, "i16", &lf32, &jt_err));

  /* The appended file verifies (the old generation's bytes are dead, not damage). */
  jtree_verify_report_t* rep = NULL;
  CHECK_OK(jtree_reader_verify(r, &rep, &jt_err));
  CHECK(jtree_verify_report_ok(rep) == 1 && jtree_verify_report_num_problems(rep) == 0);
  jtree_verify_report_free(rep);
  jtree_reader_close(r);

  /* Appending to a missing file. */
  jtree_builder_t* b3 = jtree_builder_create();
  CHECK_OK(jtree_builder_int(b3, 1, &jt_err));
  CHECK_FAIL(JTREE_NOT_FOUND, "no_such.jtree",
             jtree_append(b3, test_path(dir, "no_such.jtree", 1), raw, NULL, &jt_err));
  jtree_builder_free(b3);
}

static void test_verify(const char* dir, jtree_write_options_t* raw) {
  const char* path = test_path(dir, "verify.jtree", 0);
  const char* damaged = test_path(dir, "damaged.jtree", 1);
  jtree_builder_t* b = jtree_builder_create();
  CHECK_OK(model_build(b, &jt_err));
  CHECK_OK(jtree_save(b, path, raw, NULL, &jt_err));
  jtree_builder_free(b);

  /* Intact. */
  jtree_reader_t* r = NULL;
  jtree_verify_report_t* rep = NULL;
  CHECK_OK(jtree_reader_open(path, NULL, &r, &jt_err));
  CHECK_OK(jtree_reader_verify(r, &rep, &jt_err));
  CHECK(jtree_verify_report_ok(rep) == 1);
  CHECK(jtree_verify_report_num_problems(rep) == 0);
  CHECK(jtree_verify_report_chunks_checked(rep) > 0);
  CHECK(jtree_verify_report_bytes_checked(rep) >= MODEL_F32_ROWS * MODEL_F32_COLS * 4);
  CHECK(jtree_verify_report_problem_code(rep, 0) == JTREE_INVALID_ARGUMENT);
  CHECK(strcmp(jtree_verify_report_problem_where(rep, 0), "") == 0);
  CHECK(strcmp(jtree_verify_report_problem_message(rep, 0), "") == 0);
  jtree_verify_report_free(rep);
  jtree_reader_close(r);

  /* One byte of f32's chunk flipped (found by its contents: the leaf is stored raw). */
  size_t size = 0;
  unsigned char* bytes = read_file(path, &size);
  CHECK(bytes != NULL);
  if (bytes == NULL) return;
  const size_t at = find_bytes(bytes, size, model_f32(), 64);
  CHECK(at != (size_t)-1);
  if (at == (size_t)-1) {
    free(bytes);
    return;
  }
  bytes[at + 5000] ^= 0x40;
  CHECK(write_file(damaged, bytes, size));
  free(bytes);

  r = NULL;
  CHECK_OK(jtree_reader_open(damaged, NULL, &r, &jt_err));  /* the header is intact */
  uint32_t lf32 = 0, li16 = 0;
  CHECK_OK(jtree_reader_find_leaf(r, "f32", &lf32, &jt_err));
  CHECK_OK(jtree_reader_find_leaf(r, "i16", &li16, &jt_err));
  const size_t n = MODEL_F32_ROWS * MODEL_F32_COLS * sizeof(float);
  float* buf = malloc(n);
  CHECK_FAIL(JTREE_CORRUPTION, "f32", jtree_reader_read(r, lf32, buf, n, &jt_err));
  CHECK(strstr(jtree_error_message(jt_err), "damaged.jtree") != NULL);  /* names the file */
  CHECK(strstr(jtree_error_message(jt_err), "checksum") != NULL);
  const uint64_t b2[2] = {20, 0}, e2[2] = {30, 48};  /* rows holding byte 5000 */
  CHECK_FAIL(JTREE_CORRUPTION, "f32",
             jtree_reader_read_box(r, lf32, 2, b2, e2, buf, 10 * 48 * 4, &jt_err));
  jtree_leaf_view_t* view = NULL;
  CHECK_FAIL(JTREE_CORRUPTION, "f32", jtree_reader_map_leaf(r, lf32, &view, &jt_err));
  CHECK(view == NULL);
  const uint32_t both[2] = {li16, lf32};
  jtree_leaf_view_t* views[2] = {NULL, NULL};
  CHECK_FAIL(JTREE_CORRUPTION, "f32", jtree_reader_map_leaves(r, both, 2, views, &jt_err));
  CHECK(views[0] == NULL && views[1] == NULL);
  int16_t i16[1000];  /* other leaves still read */
  CHECK_OK(jtree_reader_read(r, li16, i16, sizeof i16, &jt_err));

  rep = NULL;
  CHECK_OK(jtree_reader_verify(r, &rep, &jt_err));
  CHECK(jtree_verify_report_ok(rep) == 0);
  CHECK(jtree_verify_report_num_problems(rep) >= 1);
  CHECK(jtree_verify_report_problem_code(rep, 0) == JTREE_CORRUPTION);
  CHECK(strstr(jtree_verify_report_problem_where(rep, 0), "f32") != NULL);
  CHECK(strstr(jtree_verify_report_problem_message(rep, 0), "f32") != NULL);
  jtree_verify_report_free(rep);
  jtree_reader_close(r);

  /* Without checksum verification the damage goes unnoticed: why it is on by default. */
  jtree_open_options_t* o = jtree_open_options_create();
  CHECK_OK(jtree_open_options_set_verify_checksums(o, 0, &jt_err));
  CHECK_OK(jtree_open_options_set_use_mmap(o, 0, &jt_err));
  r = NULL;
  CHECK_OK(jtree_reader_open(damaged, o, &r, &jt_err));
  CHECK_OK(jtree_reader_read(r, lf32, buf, n, &jt_err));
  CHECK(memcmp(buf, model_f32(), n) != 0);
  /* Without mmap nothing maps. */
  CHECK_FAIL(JTREE_NOT_SUPPORTED, "cannot be mapped",
             jtree_reader_map_leaf(r, lf32, &view, &jt_err));
  jtree_reader_close(r);
  jtree_open_options_free(o);
  free(buf);
}

/* The file the shard_loader test reads: two layers of 2-D weights [1024, 256] and 1-D biases,
 * in row chunks of 64 KiB, so that a row shard touches only its own chunks. */
static void write_shard_model(const char* dir, jtree_write_options_t* raw) {
  enum { kRows = 1024, kCols = 256 };
  static float w[2][kRows * kCols], bias[2][kRows];
  for (int l = 0; l < 2; ++l) {
    for (int i = 0; i < kRows * kCols; ++i) w[l][i] = (float)(l * 1000000 + i);
    for (int i = 0; i < kRows; ++i) bias[l][i] = (float)(-i - l);
  }
  const uint64_t wd[2] = {kRows, kCols}, bd[1] = {kRows};
  jtree_builder_t* b = jtree_builder_create();
  CHECK_OK(jtree_builder_begin_dict(b, &jt_err));
  CHECK_OK(jtree_builder_key(b, "layers", &jt_err));
  CHECK_OK(jtree_builder_begin_list(b, &jt_err));
  for (int l = 0; l < 2; ++l) {
    CHECK_OK(jtree_builder_begin_dict(b, &jt_err));
    CHECK_OK(jtree_builder_key(b, "w", &jt_err));
    CHECK_OK(jtree_builder_array(b, JTREE_DTYPE_FLOAT32, 2, wd, w[l], sizeof w[l], &jt_err));
    CHECK_OK(jtree_builder_key(b, "b", &jt_err));
    CHECK_OK(jtree_builder_array(b, JTREE_DTYPE_FLOAT32, 1, bd, bias[l], sizeof bias[l],
                                 &jt_err));
    CHECK_OK(jtree_builder_end(b, &jt_err));
  }
  CHECK_OK(jtree_builder_end(b, &jt_err));
  CHECK_OK(jtree_builder_key(b, "step", &jt_err));
  CHECK_OK(jtree_builder_int(b, 7, &jt_err));
  CHECK_OK(jtree_builder_end(b, &jt_err));
  CHECK_OK(jtree_write_options_set_chunk_bytes(raw, 64 << 10, &jt_err));
  CHECK_OK(jtree_save(b, test_path(dir, "shard_model.jtree", 0), raw, NULL, &jt_err));
  jtree_builder_free(b);
}

void test_append_verify(const char* dir) {
  jtree_write_options_t* raw = raw_options();
  test_append(dir, raw);
  test_verify(dir, raw);
  write_shard_model(dir, raw);
  jtree_write_options_free(raw);
}
