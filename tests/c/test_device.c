/* tests/c/test_device.c — jtree_reader_read_many_to_device: argument checks, NotSupported
 * where there is no CUDA device, and (with one) the model's f32 array and a box of it through
 * the CUDA staging path into host memory (cudaMemcpyDefault takes any address), bit-exact,
 * with device options (staging, direct I/O) and the stats out; then
 * jtree_pin_staging_buffers_async (NotSupported without a device), jtree_release_pinned_memory,
 * twice. (The options' own misuse is test_misuse.c's.)
 * Runs after test_roundtrip, which wrote model_zstd.jtree. */
#include <stdlib.h>

#include "c_test.h"
#include "model.h"

void test_device(const char* dir) {
  jtree_reader_t* r = NULL;
  CHECK_OK(jtree_reader_open(test_path(dir, "model_zstd.jtree", 0), NULL, &r, &jt_err));
  if (r == NULL) return;
  const model_array* arrays = model_arrays();
  const char* f32_path = NULL;
  for (int i = 0; i < MODEL_NUM_ARRAYS; ++i) {
    if (arrays[i].data == (const void*)model_f32()) f32_path = arrays[i].path;
  }
  CHECK(f32_path != NULL);
  uint32_t leaf = 0;
  CHECK_OK(jtree_reader_find_leaf(r, f32_path ? f32_path : "", &leaf, &jt_err));
  const size_t bytes = MODEL_F32_ROWS * MODEL_F32_COLS * sizeof(float);
  float* whole = malloc(bytes);
  float* rows = malloc(bytes);
  CHECK(whole != NULL && rows != NULL);
  if (whole == NULL || rows == NULL) return;
  const uint64_t begin[2] = {5, 0}, end[2] = {9, MODEL_F32_COLS};
  jtree_read_request_t req[2] = {
      {leaf, 0, NULL, NULL, whole, bytes},
      {leaf, 2, begin, end, rows, 4 * MODEL_F32_COLS * sizeof(float)},
  };

  jtree_device_options_t* opts = jtree_device_options_create();
  CHECK(opts != NULL);
  CHECK_OK(jtree_device_options_set_staging(opts, 1 << 16, 2, &jt_err));
  CHECK_OK(jtree_device_options_set_direct_io(opts, JTREE_DIRECT_IO_AUTO, &jt_err));
  jtree_device_stats_t stats = {7, 7, NULL};

  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "jtree_reader_read_many_to_device",
             jtree_reader_read_many_to_device(NULL, req, 2, opts, &stats, &jt_err));
  /* (stats written however the call ends: here it never started.) */
  CHECK(stats.direct_bytes == 0 && stats.buffered_bytes == 0 && stats.direct_io_note == NULL);
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "requests is NULL",
             jtree_reader_read_many_to_device(r, NULL, 2, NULL, NULL, &jt_err));
  CHECK_OK(jtree_reader_read_many_to_device(r, NULL, 0, NULL, NULL, &jt_err));
  jtree_read_request_t bad = {leaf, 0, NULL, NULL, NULL, bytes};
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "request 0: dst is NULL",
             jtree_reader_read_many_to_device(r, &bad, 1, opts, NULL, &jt_err));
  /* A rank no array has, with arrays of two: refused before they are read past their end. */
  jtree_read_request_t absurd = {leaf, (size_t)-1 / 4, begin, end, rows, 16};
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "request 0: ",
             jtree_reader_read_many_to_device(r, &absurd, 1, opts, &stats, &jt_err));
  CHECK(strstr(jtree_error_message(jt_err), "slice of rank") != NULL);

  if (jtree_cuda_device_count() == 0) {
    /* No device (or no CUDA in this build): NotSupported, cleanly, with or without options. */
    CHECK_FAIL(JTREE_NOT_SUPPORTED, "CUDA",
               jtree_reader_read_many_to_device(r, req, 2, NULL, NULL, &jt_err));
    CHECK_FAIL(JTREE_NOT_SUPPORTED, "CUDA",
               jtree_reader_read_many_to_device(r, req, 2, opts, &stats, &jt_err));
    CHECK(stats.direct_bytes == 0 && stats.buffered_bytes == 0 && stats.direct_io_note == NULL);
    CHECK_FAIL(JTREE_NOT_SUPPORTED, "CUDA", jtree_pin_staging_buffers_async(opts, &jt_err));
    CHECK_FAIL(JTREE_NOT_SUPPORTED, "CUDA", jtree_pin_staging_buffers_async(NULL, &jt_err));
  } else {
    /* Pinned ahead (2 x 32 KiB): the loads below may take them instead of pinning their own. */
    CHECK_OK(jtree_pin_staging_buffers_async(opts, &jt_err));
    CHECK_OK(jtree_reader_read_many_to_device(r, req, 2, opts, &stats, &jt_err));
    CHECK(memcmp(whole, model_f32(), bytes) == 0);
    CHECK(memcmp(rows, model_f32() + 5 * MODEL_F32_COLS, 4 * MODEL_F32_COLS * sizeof(float)) ==
          0);
    /* Every destination byte counted once, by the path that read it. */
    CHECK(stats.direct_bytes + stats.buffered_bytes == bytes + 4 * MODEL_F32_COLS * sizeof(float));
    jtree_free(stats.direct_io_note);
    stats.direct_io_note = NULL;
    /* The raw file (test_roundtrip's): its whole f32 leaf is whole raw chunks, read with
     * O_DIRECT where the scratch directory's file system allows it, else buffered with the
     * reason in the note; the bytes are the same either way. */
    jtree_reader_t* raw = NULL;
    CHECK_OK(jtree_reader_open(test_path(dir, "model_raw.jtree", 0), NULL, &raw, &jt_err));
    uint32_t raw_leaf = 0;
    if (raw != NULL) {
      CHECK_OK(jtree_reader_find_leaf(raw, f32_path ? f32_path : "", &raw_leaf, &jt_err));
      jtree_read_request_t raw_req = {raw_leaf, 0, NULL, NULL, whole, bytes};
      memset(whole, 0, bytes);
      /* (Buffers large enough for O_DIRECT's alignment slack.) */
      CHECK_OK(jtree_device_options_set_staging(opts, 4 << 20, 2, &jt_err));
      CHECK_OK(jtree_reader_read_many_to_device(raw, &raw_req, 1, opts, &stats, &jt_err));
      CHECK(memcmp(whole, model_f32(), bytes) == 0);
      CHECK(stats.direct_bytes + stats.buffered_bytes == bytes);
      CHECK(stats.direct_bytes > 0 || stats.direct_io_note != NULL);
      jtree_free(stats.direct_io_note);
      stats.direct_io_note = NULL;
      jtree_reader_close(raw);
    }
    jtree_device_options_t* far = jtree_device_options_create();
    CHECK_OK(jtree_device_options_set_device(far, jtree_cuda_device_count(), &jt_err));
    CHECK_FAIL(JTREE_INVALID_ARGUMENT, "out of range",
               jtree_reader_read_many_to_device(r, req, 2, far, NULL, &jt_err));
    jtree_device_options_free(far);
  }
  /* The pinned buffers the loads above kept: none without a device (nor in builds without
   * CUDA), and none left once released. */
  const uint64_t released = jtree_release_pinned_memory();
  if (jtree_cuda_device_count() == 0) CHECK(released == 0);
  CHECK(jtree_release_pinned_memory() == 0);
  jtree_device_options_free(opts);
  free(whole);
  free(rows);
  jtree_reader_close(r);
}
