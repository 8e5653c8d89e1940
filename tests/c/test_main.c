/* tests/c/test_main.c — runs the C API suites: test_c_api GOLDEN_DIR SCRATCH_DIR. */
#include <stdlib.h>

#include "c_test.h"

int jt_passed = 0;
int jt_failed = 0;
jtree_error_t* jt_err = NULL;

const char* test_path(const char* dir, const char* name, int slot) {
  static char buf[8][4096];
  snprintf(buf[slot], sizeof buf[slot], "%s/%s", dir, name);
  return buf[slot];
}

unsigned char* read_file(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) return NULL;
  unsigned char* data = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n == cap) {
      cap = cap ? cap * 2 : 1 << 16;
      unsigned char* p = realloc(data, cap);
      if (p == NULL) break;
      data = p;
    }
    size_t got = fread(data + n, 1, cap - n, f);
    n += got;
    if (got == 0) break;
  }
  fclose(f);
  *size = n;
  return data;
}

int write_file(const char* path, const unsigned char* data, size_t size) {
  FILE* f = fopen(path, "wb");
  if (f == NULL) return 0;
  int ok = fwrite(data, 1, size, f) == size;
  return fclose(f) == 0 && ok;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s GOLDEN_DIR SCRATCH_DIR\n", argv[0]);
    return 2;
  }
  test_basics();
  test_roundtrip(argv[2]);
  test_append_verify(argv[2]);
  test_misuse(argv[2]);
  test_golden(argv[1]);
  test_threads(argv[2]);
  test_device(argv[2]);
  test_shard(argv[2]);
  test_promises(argv[2]);
  jtree_error_free(jt_err);
  printf("%d passed, %d failed\n", jt_passed, jt_failed);
  return jt_failed == 0 ? 0 : 1;
}
