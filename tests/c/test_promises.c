/* tests/c/test_promises.c — the outcomes jtree/c.h promises at its edges (issue 49): a URL
 * scheme the build lacks, limits (the depth one included) as ResourceExhausted, the byte limits
 * of jtree_reader_read_bytes on inline payloads, a directory opened or saved into, a box of a
 * text leaf, escapes in key paths, and leaves of a compressed file that can be mapped. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <sys/stat.h>

#include "c_test.h"
#include "model.h"

/* A file of the model (its "name" leaf is inline text) and a reader of it with `oo`. */
static jtree_reader_t* open_model(const char* path, const jtree_open_options_t* oo) {
  jtree_reader_t* r = NULL;
  CHECK_OK(jtree_reader_open(path, oo, &r, &jt_err));
  return r;
}

/* jtree_reader_open: NotSupported for any scheme the build lacks; a directory is
 * InvalidArgument saying so. */
static void schemes_and_directories(const char* dir) {
  jtree_reader_t* r = NULL;
  CHECK_FAIL(JTREE_NOT_SUPPORTED, "ftp://host/x.jtree: unsupported URL scheme \"ftp\"",
             jtree_reader_open("ftp://host/x.jtree", NULL, &r, &jt_err));
  CHECK_FAIL(JTREE_NOT_SUPPORTED, "unsupported URL scheme",
             jtree_reader_open("gs://bucket/x.jtree", NULL, &r, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "a directory, not a jtree file",
             jtree_reader_open(dir, NULL, &r, &jt_err));
  CHECK(r == NULL);

  /* Saving into a directory that does not exist: NotFound (it is not created); saving onto a
   * directory: InvalidArgument; into a scheme the build lacks: NotSupported. */
  jtree_builder_t* b = jtree_builder_create();
  CHECK_OK(jtree_builder_int(b, 1, &jt_err));
  CHECK_FAIL(JTREE_NOT_FOUND, "no_such_dir",
             jtree_save(b, test_path(dir, "no_such_dir/x.jtree", 0), NULL, NULL, &jt_err));
  const char* sub = test_path(dir, "a_directory", 1);
  mkdir(sub, 0755);
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "a_directory", jtree_save(b, sub, NULL, NULL, &jt_err));
  CHECK_FAIL(JTREE_NOT_SUPPORTED, "ftp", jtree_save(b, "ftp://h/x.jtree", NULL, NULL, &jt_err));
  jtree_builder_free(b);
}

/* A limit exceeded by a file that may well be valid is ResourceExhausted: the depth limit as
 * the others. */
static void depth_limit(const char* dir) {
  const char* path = test_path(dir, "deep.jtree", 0);
  jtree_builder_t* b = jtree_builder_create();
  for (int i = 0; i < 5; ++i) CHECK_OK(jtree_builder_begin_list(b, &jt_err));
  CHECK_OK(jtree_builder_int(b, 7, &jt_err));
  for (int i = 0; i < 5; ++i) CHECK_OK(jtree_builder_end(b, &jt_err));
  CHECK_OK(jtree_save(b, path, NULL, NULL, &jt_err));
  jtree_builder_free(b);
  jtree_open_options_t* oo = jtree_open_options_create();
  CHECK_OK(jtree_open_options_set_limit(oo, JTREE_LIMIT_MAX_DEPTH, 4, &jt_err));
  jtree_reader_t* r = NULL;
  CHECK_FAIL(JTREE_RESOURCE_EXHAUSTED, "nesting deeper than 4",
             jtree_reader_open(path, oo, &r, &jt_err));
  CHECK(r == NULL);
  CHECK(strstr(jtree_error_message(jt_err), "deep.jtree") != NULL);
  CHECK_OK(jtree_open_options_set_limit(oo, JTREE_LIMIT_MAX_DEPTH, 5, &jt_err));
  r = open_model(path, oo);  /* the int at depth 5: exactly the limit */
  jtree_reader_close(r);
  jtree_open_options_free(oo);
}

/* jtree_reader_read_bytes of an inline payload is bounded like a chunked one, per leaf and
 * per call; a box of a text leaf is a byte range; key paths take escapes. */
static void inline_payloads_and_paths(const char* path) {
  const size_t name_len = strlen(kModelName);
  jtree_open_options_t* oo = jtree_open_options_create();
  CHECK_OK(jtree_open_options_set_limit(oo, JTREE_LIMIT_MAX_LEAF_BYTES, name_len - 1, &jt_err));
  jtree_reader_t* r = open_model(path, oo);
  uint32_t lname = 0;
  jtree_storage_t storage = JTREE_STORAGE_NONE;
  char* s = NULL;
  size_t sz = 0;
  CHECK_OK(jtree_reader_find_leaf(r, "name", &lname, &jt_err));
  CHECK_OK(jtree_reader_leaf_storage(r, lname, &storage, &jt_err));
  CHECK(storage == JTREE_STORAGE_INLINE);
  CHECK_FAIL(JTREE_RESOURCE_EXHAUSTED, "max_leaf_bytes",
             jtree_reader_read_bytes(r, lname, &s, &sz, &jt_err));
  CHECK(s == NULL && sz == 0);
  CHECK(strstr(jtree_error_message(jt_err), "name") != NULL);
  jtree_reader_close(r);

  /* At the per-leaf limit: read; under it in total for the call: refused. */
  CHECK_OK(jtree_open_options_set_limit(oo, JTREE_LIMIT_MAX_LEAF_BYTES, name_len, &jt_err));
  r = open_model(path, oo);
  CHECK_OK(jtree_reader_read_bytes(r, lname, &s, &sz, &jt_err));
  CHECK(sz == name_len && s != NULL && memcmp(s, kModelName, name_len) == 0 && s[sz] == '\0');
  jtree_free(s);
  s = NULL;
  jtree_reader_close(r);
  CHECK_OK(jtree_open_options_set_limit(oo, JTREE_LIMIT_MAX_TOTAL_BYTES, name_len - 1, &jt_err));
  r = open_model(path, oo);
  CHECK_FAIL(JTREE_RESOURCE_EXHAUSTED, "max_total_bytes",
             jtree_reader_read_bytes(r, lname, &s, &sz, &jt_err));

  /* A text leaf is uint8 of rank 1: a box of it is a byte range. */
  size_t rank = 0;
  CHECK_OK(jtree_reader_leaf_rank(r, lname, &rank, &jt_err));
  CHECK(rank == 1);
  const uint64_t begin[1] = {7}, end[1] = {12};
  char part[5];
  CHECK_OK(jtree_reader_read_box(r, lname, 1, begin, end, part, sizeof part, &jt_err));
  CHECK(memcmp(part, "jtree", 5) == 0);  /* "hello, jtree"[7:12] */

  /* Escapes: '\' before another character is that character; a trailing '\' is refused. */
  uint32_t found = 0;
  CHECK_OK(jtree_reader_find_leaf(r, "n\\ame", &found, &jt_err));
  CHECK(found == lname);
  CHECK_OK(jtree_reader_find_leaf(r, "layers/0/\\w", &found, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "", jtree_reader_find(r, "name\\", &found, &jt_err));
  jtree_reader_close(r);
  jtree_open_options_free(oo);
}

/* A leaf saved with zstd whose chunk zstd could not shrink is stored raw: it maps; a leaf
 * that compressed does not. (One chunk each: the default 4 MiB chunks.) */
static void raw_chunks_of_compressed_files(const char* dir) {
  enum { kN = 1 << 15 };
  uint32_t* noise = malloc(kN * sizeof *noise);
  uint32_t* zeros = calloc(kN, sizeof *zeros);
  CHECK(noise != NULL && zeros != NULL);
  if (noise == NULL || zeros == NULL) return;
  uint64_t x = 88172645463325252ull;
  for (size_t i = 0; i < kN; ++i) {  /* xorshift64: incompressible */
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    noise[i] = (uint32_t)x;
  }
  const uint64_t dims[1] = {kN};
  jtree_builder_t* b = jtree_builder_create();
  CHECK_OK(jtree_builder_begin_dict(b, &jt_err));
  CHECK_OK(jtree_builder_key(b, "noise", &jt_err));
  CHECK_OK(jtree_builder_array(b, JTREE_DTYPE_UINT32, 1, dims, noise, kN * 4, &jt_err));
  CHECK_OK(jtree_builder_key(b, "zeros", &jt_err));
  CHECK_OK(jtree_builder_array(b, JTREE_DTYPE_UINT32, 1, dims, zeros, kN * 4, &jt_err));
  CHECK_OK(jtree_builder_end(b, &jt_err));
  jtree_write_options_t* wo = jtree_write_options_create();
  CHECK_OK(jtree_write_options_set_compression(wo, JTREE_CODEC_ZSTD, 3, &jt_err));
  const char* path = test_path(dir, "zstd.jtree", 0);
  CHECK_OK(jtree_save(b, path, wo, NULL, &jt_err));
  jtree_write_options_free(wo);
  jtree_builder_free(b);

  jtree_reader_t* r = open_model(path, NULL);
  uint32_t lnoise = 0, lzeros = 0;
  CHECK_OK(jtree_reader_find_leaf(r, "noise", &lnoise, &jt_err));
  CHECK_OK(jtree_reader_find_leaf(r, "zeros", &lzeros, &jt_err));
  jtree_leaf_view_t* view = NULL;
  CHECK_OK(jtree_reader_map_leaf(r, lnoise, &view, &jt_err));
  CHECK(jtree_leaf_view_size(view) == kN * 4);
  CHECK(view != NULL && memcmp(jtree_leaf_view_data(view), noise, kN * 4) == 0);
  jtree_leaf_view_release(view);
  view = NULL;
  CHECK_FAIL(JTREE_NOT_SUPPORTED, "zeros", jtree_reader_map_leaf(r, lzeros, &view, &jt_err));
  CHECK(view == NULL);
  jtree_reader_close(r);
  free(noise);
  free(zeros);
}

void test_promises(const char* dir) {
  schemes_and_directories(dir);
  depth_limit(dir);
  const char* path = test_path(dir, "promises.jtree", 2);
  jtree_builder_t* b = jtree_builder_create();
  CHECK_OK(model_build(b, &jt_err));
  CHECK_OK(jtree_save(b, path, NULL, NULL, &jt_err));
  jtree_builder_free(b);
  inline_payloads_and_paths(path);
  raw_chunks_of_compressed_files(dir);
}
