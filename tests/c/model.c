/* tests/c/model.c — the model tree of the C tests (see model.h). */
#include "model.h"

#include <string.h>

const char kModelName[] = "hello, jtree";
const unsigned char kModelBlob[8] = {0x00, 0x01, 0x02, 'b', 'i', 'n', 0xff, 0x00};

static float f32[MODEL_F32_ROWS * MODEL_F32_COLS];
static int16_t i16[1000];
static uint8_t u8[4 * 5 * 6];
static double f64 = 3.25;
static uint16_t bf16[32 * 33];
/* int4 -8, -3, -1, 0, 1, 5, 7 as the library holds them in memory (and ml_dtypes does): the
 * value in the low nibble, not sign-extended, so that reads compare byte for byte. */
static int8_t i4[7] = {0x8, 0xD, 0xF, 0, 1, 5, 7};
static float c64[10];  /* 5 complex64 values: (re, im) pairs */
static uint64_t u64[3] = {0, 0x0123456789abcdefull, 0xffffffffffffffffull};
static float empty[1];  /* a [0, 3] array: no elements */
static float w0[16 * 8], w1[16 * 8];

static model_array arrays[MODEL_NUM_ARRAYS] = {
    {"f32", JTREE_DTYPE_FLOAT32, 2, {MODEL_F32_ROWS, MODEL_F32_COLS, 0}, f32, sizeof f32},
    {"i16", JTREE_DTYPE_INT16, 1, {1000, 0, 0}, i16, sizeof i16},
    {"u8", JTREE_DTYPE_UINT8, 3, {4, 5, 6}, u8, sizeof u8},
    {"f64", JTREE_DTYPE_FLOAT64, 0, {0, 0, 0}, &f64, sizeof f64},
    {"bf16", JTREE_DTYPE_BFLOAT16, 2, {32, 33, 0}, bf16, sizeof bf16},
    {"i4", JTREE_DTYPE_INT4, 1, {7, 0, 0}, i4, sizeof i4},
    {"c64", JTREE_DTYPE_COMPLEX64, 1, {5, 0, 0}, c64, sizeof c64},
    {"u64", JTREE_DTYPE_UINT64, 1, {3, 0, 0}, u64, sizeof u64},
    {"empty", JTREE_DTYPE_FLOAT32, 2, {0, 3, 0}, empty, 0},
    {"layers/0/w", JTREE_DTYPE_FLOAT32, 2, {16, 8, 0}, w0, sizeof w0},
    {"layers/1/w", JTREE_DTYPE_FLOAT32, 2, {16, 8, 0}, w1, sizeof w1},
};

const model_array* model_arrays(void) {
  for (size_t i = 0; i < MODEL_F32_ROWS * MODEL_F32_COLS; ++i) f32[i] = (float)i * 0.25f - 100.f;
  for (size_t i = 0; i < 1000; ++i) i16[i] = (int16_t)((int)i * 37 - 5000);
  for (size_t i = 0; i < sizeof u8; ++i) u8[i] = (uint8_t)(i * 7);
  for (size_t i = 0; i < 32 * 33; ++i) bf16[i] = (uint16_t)(i * 13 + 1);
  for (size_t i = 0; i < 10; ++i) c64[i] = (float)i - 4.5f;
  for (size_t i = 0; i < 16 * 8; ++i) {
    w0[i] = (float)i;
    w1[i] = -(float)i * 2.f;
  }
  return arrays;
}

const float* model_f32(void) {
  model_arrays();
  return f32;
}

/* Stops at the first failing call. */
#define TRY(call)                            \
  do {                                       \
    jtree_status_t s_ = (call);              \
    if (s_ != JTREE_OK) return s_;           \
  } while (0)

static jtree_status_t add_array(jtree_builder_t* b, const model_array* a, jtree_error_t** err) {
  return jtree_builder_array(b, a->dtype, a->rank, a->dims, a->data, a->bytes, err);
}

jtree_status_t model_build(jtree_builder_t* b, jtree_error_t** err) {
  const model_array* a = model_arrays();
  TRY(jtree_builder_begin_dict(b, err));
  for (int i = 0; i < 9; ++i) {  /* the top-level arrays */
    TRY(jtree_builder_key(b, a[i].path, err));
    TRY(add_array(b, &a[i], err));
  }
  TRY(jtree_builder_key(b, "layers", err));
  TRY(jtree_builder_begin_list(b, err));
  for (int i = 9; i < 11; ++i) {
    TRY(jtree_builder_begin_dict(b, err));
    TRY(jtree_builder_key(b, "w", err));
    TRY(add_array(b, &a[i], err));
    TRY(jtree_builder_end(b, err));
  }
  TRY(jtree_builder_end(b, err));
  TRY(jtree_builder_key(b, "step", err));
  TRY(jtree_builder_int(b, 1000, err));
  TRY(jtree_builder_key(b, "lr", err));
  TRY(jtree_builder_float(b, 0.5, err));
  TRY(jtree_builder_key(b, "flag", err));
  TRY(jtree_builder_bool(b, 1, err));
  TRY(jtree_builder_key(b, "name", err));
  TRY(jtree_builder_str(b, kModelName, strlen(kModelName), err));
  TRY(jtree_builder_key(b, "blob", err));
  TRY(jtree_builder_bytes(b, kModelBlob, sizeof kModelBlob, err));
  TRY(jtree_builder_key(b, "nothing", err));
  TRY(jtree_builder_none(b, err));
  TRY(jtree_builder_end(b, err));
  TRY(jtree_builder_metadata(b, "framework", "c-test", err));
  TRY(jtree_builder_text_metadata(b, "note", "saved through jtree/c.h", err));
  return JTREE_OK;
}
