/* tests/c/model.h — the tree the C tests save and read back: arrays of several dtypes and
 * ranks (0-d, empty, 4-bit, complex), nested containers, scalars, text, bytes, None and
 * metadata, with the expected contents of each array. */
#ifndef JTREE_C_TEST_MODEL_H_
#define JTREE_C_TEST_MODEL_H_

#include <stddef.h>
#include <stdint.h>

#include "jtree/c.h"

/* One array leaf of the model: its key path, dtype, shape and expected bytes. */
typedef struct model_array {
  const char* path;
  jtree_dtype_t dtype;
  size_t rank;
  uint64_t dims[3];
  const void* data;
  size_t bytes;
} model_array;

#define MODEL_NUM_ARRAYS 11
#define MODEL_NUM_LEAVES 16 /* the arrays, step, lr, flag, name, blob (None is not a leaf) */
#define MODEL_F32_ROWS 64
#define MODEL_F32_COLS 48

extern const char kModelName[];   /* the "name" text leaf */
extern const unsigned char kModelBlob[8];  /* the "blob" bytes leaf (holds a NUL) */

/* Fills the arrays (idempotent) and returns them. */
const model_array* model_arrays(void);
/* The model's float32 [64, 48] array "f32" (row-major). */
const float* model_f32(void);
/* Adds the whole model to an empty builder. Returns JTREE_OK or the first error. */
jtree_status_t model_build(jtree_builder_t* b, jtree_error_t** err);

#endif /* JTREE_C_TEST_MODEL_H_ */
