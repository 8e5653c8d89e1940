/* tests/c/test_basics.c — version, status names, errors, dtypes: the functions that need no
 * file. */
#include "c_test.h"

void test_basics(void) {
  CHECK(strcmp(jtree_version(), JTREE_VERSION_STRING) == 0);  /* header and library agree */
  CHECK(jtree_version_number() == JTREE_VERSION_NUMBER);
  CHECK(jtree_format_version() == 3);

  CHECK(strcmp(jtree_status_name(JTREE_OK), "OK") == 0);
  CHECK(strcmp(jtree_status_name(JTREE_CORRUPTION), "Corruption") == 0);
  CHECK(strcmp(jtree_status_name(JTREE_INVALID_ARGUMENT), "InvalidArgument") == 0);
  CHECK(strcmp(jtree_status_name(JTREE_RESOURCE_EXHAUSTED), "ResourceExhausted") == 0);
  CHECK(strcmp(jtree_status_name((jtree_status_t)42), "Unknown") == 0);

  /* NULL errors are harmless. */
  CHECK(jtree_error_code(NULL) == JTREE_INVALID_ARGUMENT);
  CHECK(strcmp(jtree_error_message(NULL), "") == 0);
  jtree_error_free(NULL);
  jtree_free(NULL);

  /* An error object: made by a failing call, replaced by the next failure, freed once. */
  jtree_error_t* err = NULL;
  CHECK(jtree_reader_open(NULL, NULL, NULL, &err) == JTREE_INVALID_ARGUMENT);
  CHECK(err != NULL && jtree_error_code(err) == JTREE_INVALID_ARGUMENT);
  CHECK(strstr(jtree_error_message(err), "jtree_reader_open") != NULL);
  CHECK(jtree_reader_num_nodes(NULL, NULL, &err) == JTREE_INVALID_ARGUMENT);  /* replaced */
  CHECK(strstr(jtree_error_message(err), "jtree_reader_num_nodes") != NULL);
  jtree_error_t* kept = err;
  CHECK(jtree_dtype_item_size(JTREE_DTYPE_FLOAT32) == 4);  /* success leaves it alone */
  CHECK(err == kept);
  jtree_error_free(err);
  /* Without an error pointer only the code comes back. */
  CHECK(jtree_reader_open(NULL, NULL, NULL, NULL) == JTREE_INVALID_ARGUMENT);

  /* dtypes */
  CHECK(strcmp(jtree_dtype_name(JTREE_DTYPE_BFLOAT16), "bfloat16") == 0);
  CHECK(strcmp(jtree_dtype_name(JTREE_DTYPE_FLOAT8_E4M3FN), "float8_e4m3fn") == 0);
  CHECK(strcmp(jtree_dtype_name(JTREE_DTYPE_INT4), "int4") == 0);
  /* format version 2's dtypes: 6-bit types one byte per element */
  CHECK(strcmp(jtree_dtype_name(JTREE_DTYPE_FLOAT8_E4M3B11FNUZ), "float8_e4m3b11fnuz") == 0);
  CHECK(strcmp(jtree_dtype_name(JTREE_DTYPE_FLOAT6_E3M2FN), "float6_e3m2fn") == 0);
  CHECK(jtree_dtype_from_name("float8_e3m4") == JTREE_DTYPE_FLOAT8_E3M4);
  CHECK(jtree_dtype_from_name("float8_e4m3") == JTREE_DTYPE_FLOAT8_E4M3);
  CHECK(jtree_dtype_item_size(JTREE_DTYPE_FLOAT6_E2M3FN) == 1);
  CHECK(jtree_dtype_name(JTREE_DTYPE_INVALID) == NULL);
  CHECK(jtree_dtype_name((jtree_dtype_t)99) == NULL);
  CHECK(jtree_dtype_from_name("float32") == JTREE_DTYPE_FLOAT32);
  CHECK(jtree_dtype_from_name("complex128") == JTREE_DTYPE_COMPLEX128);
  CHECK(jtree_dtype_from_name("no such type") == JTREE_DTYPE_INVALID);
  CHECK(jtree_dtype_from_name(NULL) == JTREE_DTYPE_INVALID);
  CHECK(jtree_dtype_item_size(JTREE_DTYPE_COMPLEX128) == 16);
  CHECK(jtree_dtype_item_size(JTREE_DTYPE_UINT4) == 1);  /* one byte per element in memory */
  CHECK(jtree_dtype_item_size(JTREE_DTYPE_INVALID) == 0);
  CHECK(jtree_dtype_item_size((jtree_dtype_t)-3) == 0);
  for (int d = 1; d <= JTREE_DTYPE_UINT4; ++d) {
    const char* name = jtree_dtype_name((jtree_dtype_t)d);
    CHECK(name != NULL && jtree_dtype_from_name(name) == (jtree_dtype_t)d);
  }
}
