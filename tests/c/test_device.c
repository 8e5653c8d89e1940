/* tests/c/test_device.c — jtree_reader_read_many_to_device: argument checks, NotSupported
 * where there is no CUDA device, and (with one) the model's f32 array and a box of it through
 * the CUDA staging path into host memory (cudaMemcpyDefault takes any address), bit-exact.
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

  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "jtree_reader_read_many_to_device",
             jtree_reader_read_many_to_device(NULL, req, 2, 0, 0, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "requests is NULL",
             jtree_reader_read_many_to_device(r, NULL, 2, 0, 0, &jt_err));
  CHECK_OK(jtree_reader_read_many_to_device(r, NULL, 0, 0, 0, &jt_err));
  jtree_read_request_t bad = {leaf, 0, NULL, NULL, NULL, bytes};
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "request 0: dst is NULL",
             jtree_reader_read_many_to_device(r, &bad, 1, 0, 0, &jt_err));

  if (jtree_cuda_device_count() == 0) {
    CHECK_FAIL(JTREE_NOT_SUPPORTED, "CUDA",
               jtree_reader_read_many_to_device(r, req, 2, 0, 0, &jt_err));
  } else {
    CHECK_OK(jtree_reader_read_many_to_device(r, req, 2, 0, 1 << 16, &jt_err));
    CHECK(memcmp(whole, model_f32(), bytes) == 0);
    CHECK(memcmp(rows, model_f32() + 5 * MODEL_F32_COLS, 4 * MODEL_F32_COLS * sizeof(float)) ==
          0);
    CHECK_FAIL(JTREE_INVALID_ARGUMENT, "out of range",
               jtree_reader_read_many_to_device(r, req, 2, jtree_cuda_device_count(), 0,
                                                &jt_err));
  }
  free(whole);
  free(rows);
  jtree_reader_close(r);
}
