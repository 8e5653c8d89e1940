/* tests/c/test_golden.c — the committed golden files through the C API: every valid file
 * opens, reads and verifies; every hostile file of tests/golden/broken is refused with exactly
 * the code and message of tests/golden/manifest.txt (on open, on reading a leaf, or by
 * verify), never a crash; the manifest's valid vectors (code OK) read and verify clean. */
#include <stdlib.h>

#include "c_test.h"

/* Opens, reads every payload leaf (whole, and the first half of dimension 0 as a box), and
 * verifies. Returns the first failure's code and copies its message into `message` (a verify
 * problem's message when verify found damage), or JTREE_OK. */
static jtree_status_t read_everything(const char* path, char* message, size_t cap) {
  jtree_reader_t* r = NULL;
  message[0] = '\0';
  jtree_status_t st = jtree_reader_open(path, NULL, &r, &jt_err);
  uint32_t leaves = 0;
  if (st == JTREE_OK) st = jtree_reader_num_leaves(r, &leaves, &jt_err);
  for (uint32_t l = 0; st == JTREE_OK && l < leaves; ++l) {
    jtree_storage_t storage;
    uint64_t bytes = 0;
    size_t rank = 0;
    st = jtree_reader_leaf_storage(r, l, &storage, &jt_err);
    if (st != JTREE_OK || storage == JTREE_STORAGE_NONE) continue;
    st = jtree_reader_leaf_memory_bytes(r, l, &bytes, &jt_err);
    if (st != JTREE_OK) break;
    void* buf = malloc(bytes ? (size_t)bytes : 1);
    CHECK(buf != NULL);
    if (buf == NULL) break;
    st = jtree_reader_read(r, l, buf, (size_t)bytes, &jt_err);
    if (st == JTREE_OK) st = jtree_reader_leaf_rank(r, l, &rank, &jt_err);
    if (st == JTREE_OK && rank > 0 && rank <= 8) {
      uint64_t dims[8], begin[8] = {0}, end[8];
      st = jtree_reader_leaf_shape(r, l, dims, 8, &jt_err);
      memcpy(end, dims, sizeof dims);
      end[0] = dims[0] / 2;
      const size_t box_bytes = dims[0] ? (size_t)(bytes / dims[0] * end[0]) : 0;
      if (st == JTREE_OK) {
        st = jtree_reader_read_box(r, l, rank, begin, end, buf, box_bytes, &jt_err);
      }
    }
    free(buf);
  }
  if (st != JTREE_OK) {
    snprintf(message, cap, "%s", jtree_error_message(jt_err));
  } else {
    jtree_verify_report_t* rep = NULL;
    st = jtree_reader_verify(r, &rep, &jt_err);
    if (st != JTREE_OK) {
      snprintf(message, cap, "%s", jtree_error_message(jt_err));
    } else if (!jtree_verify_report_ok(rep)) {
      st = jtree_verify_report_problem_code(rep, 0);
      snprintf(message, cap, "%s", jtree_verify_report_problem_message(rep, 0));
    }
    jtree_verify_report_free(rep);
  }
  jtree_reader_close(r);
  return st;
}

static void test_valid(const char* golden) {
  static const char* const files[] = {"basic.jtree",    "basic_raw.jtree",
                                      "basic_aligned_level19.jtree", "appended.jtree",
                                      "torn_append.jtree", "compacted.jtree",
                                      "scalar_root.jtree", "many_leaves.jtree"};
  char path[4096];
  for (size_t i = 0; i < sizeof files / sizeof files[0]; ++i) {
    snprintf(path, sizeof path, "%s/valid/%s", golden, files[i]);
    char message[4096];
    const jtree_status_t st = read_everything(path, message, sizeof message);
    CHECK(st == JTREE_OK);
    if (st != JTREE_OK) fprintf(stderr, "  %s: %s\n", path, message);
  }
}

static void test_broken(const char* golden) {
  char manifest_path[4096];
  snprintf(manifest_path, sizeof manifest_path, "%s/manifest.txt", golden);
  FILE* manifest = fopen(manifest_path, "r");
  CHECK(manifest != NULL);
  if (manifest == NULL) return;
  char line[1024];
  int checked = 0;
  while (fgets(line, sizeof line, manifest)) {
    line[strcspn(line, "\r\n")] = '\0';
    if (line[0] == '\0' || line[0] == '#') continue;
    /* path|code|substring|sections; code OK: a valid vector, read and verified clean */
    char* code = strchr(line, '|');
    char* substring = code ? strchr(code + 1, '|') : NULL;
    CHECK(code != NULL && substring != NULL);
    if (code == NULL || substring == NULL) continue;
    *code++ = '\0';
    *substring++ = '\0';
    char* sections = strchr(substring, '|');
    if (sections != NULL) *sections = '\0';
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", golden, line);

    char message[4096];
    const jtree_status_t st = read_everything(path, message, sizeof message);
    if (strcmp(code, "OK") == 0) {
      CHECK(st == JTREE_OK);
      if (st != JTREE_OK) fprintf(stderr, "  %s: %s\n", path, message);
      continue;
    }
    const char* file = strrchr(line, '/') ? strrchr(line, '/') + 1 : line;
    const int ok = st != JTREE_OK && strcmp(jtree_status_name(st), code) == 0 &&
                   strstr(message, substring) != NULL &&
                   strstr(message, file) != NULL;  /* names the file */
    CHECK(ok);
    if (!ok) {
      fprintf(stderr, "  %s: got %s \"%s\", expected %s \"%s\"\n", line, jtree_status_name(st),
              message, code, substring);
    }
    ++checked;
  }
  fclose(manifest);
  CHECK(checked >= 25);
}

void test_golden(const char* golden) {
  test_valid(golden);
  test_broken(golden);
}
