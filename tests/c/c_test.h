/* tests/c/c_test.h — a small assertion harness for the C API tests (C11, no framework).
 *
 * Every CHECK counts as passed or failed; a failure prints its file, line and expression (and,
 * for calls, the code and message of the error) and the run goes on. main() prints
 * "N passed, M failed" and exits non-zero when M > 0. */
#ifndef JTREE_C_TEST_H_
#define JTREE_C_TEST_H_

#include <stdio.h>
#include <string.h>

#include "jtree/c.h"

extern int jt_passed;
extern int jt_failed;
/* The error of the last failing call of a test (each call frees and replaces it). */
extern jtree_error_t* jt_err;

#define CHECK(cond)                                                                 \
  do {                                                                              \
    if (cond) {                                                                     \
      ++jt_passed;                                                                  \
    } else {                                                                        \
      ++jt_failed;                                                                  \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);      \
    }                                                                               \
  } while (0)

/* A call that must succeed. */
#define CHECK_OK(call)                                                              \
  do {                                                                              \
    jtree_status_t jt_s_ = (call);                                                  \
    if (jt_s_ == JTREE_OK) {                                                        \
      ++jt_passed;                                                                  \
    } else {                                                                        \
      ++jt_failed;                                                                  \
      fprintf(stderr, "%s:%d: %s\n  returned %s: %s\n", __FILE__, __LINE__, #call,  \
              jtree_status_name(jt_s_), jtree_error_message(jt_err));               \
    }                                                                               \
  } while (0)

/* A call that must fail with `code`, its error object (through &jt_err) holding that code and
 * a message containing `substring` ("" to skip that check). */
#define CHECK_FAIL(code, substring, call)                                            \
  do {                                                                               \
    jtree_status_t jt_s_ = (call);                                                   \
    if (jt_s_ == (code) && jtree_error_code(jt_err) == (code) &&                     \
        strstr(jtree_error_message(jt_err), (substring)) != NULL) {                  \
      ++jt_passed;                                                                   \
    } else {                                                                         \
      ++jt_failed;                                                                   \
      fprintf(stderr, "%s:%d: %s\n  returned %s (%s), expected %s with \"%s\"\n",    \
              __FILE__, __LINE__, #call, jtree_status_name(jt_s_),                   \
              jt_s_ == JTREE_OK ? "" : jtree_error_message(jt_err),                  \
              jtree_status_name(code), (substring));                                 \
    }                                                                                \
  } while (0)

/* The suites (one per file); `dir` is a scratch directory, `golden` tests/golden. */
void test_basics(void);
void test_roundtrip(const char* dir);
void test_append_verify(const char* dir);
void test_misuse(const char* dir);
void test_golden(const char* golden);
void test_threads(const char* dir);
void test_device(const char* dir);
void test_shard(const char* dir);
void test_promises(const char* dir);

/* "<dir>/<name>" into a static buffer per slot (slot 0..7). */
const char* test_path(const char* dir, const char* name, int slot);
/* Reads / writes a whole file; read_file returns a malloc'd buffer (free it) or NULL. */
unsigned char* read_file(const char* path, size_t* size);
int write_file(const char* path, const unsigned char* data, size_t size);

#endif /* JTREE_C_TEST_H_ */
