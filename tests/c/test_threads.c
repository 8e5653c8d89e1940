/* tests/c/test_threads.c — one reader shared by several threads (the thread-safety promise of
 * jtree/c.h): each thread reads its own boxes, walks the structure and maps a leaf at once. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>

#include "c_test.h"
#include "model.h"

enum { kThreads = 4, kRounds = 50 };

typedef struct worker {
  const jtree_reader_t* reader;
  uint32_t leaf;
  int index;
  int failures;  /* counted here, added to the harness's totals by the main thread */
} worker;

static void* work(void* arg) {
  worker* w = arg;
  jtree_error_t* err = NULL;  /* one per thread: error objects are not shared */
  const float* f32 = model_f32();
  float rows[4 * MODEL_F32_COLS];
  for (int round = 0; round < kRounds; ++round) {
    const uint64_t first = (uint64_t)((w->index * 7 + round) % (MODEL_F32_ROWS - 4));
    const uint64_t begin[2] = {first, 0}, end[2] = {first + 4, MODEL_F32_COLS};
    if (jtree_reader_read_box(w->reader, w->leaf, 2, begin, end, rows, sizeof rows, &err) !=
            JTREE_OK ||
        memcmp(rows, f32 + first * MODEL_F32_COLS, sizeof rows) != 0) {
      ++w->failures;
    }
    char* path = NULL;
    if (jtree_reader_leaf_path(w->reader, w->leaf, &path, &err) != JTREE_OK ||
        strcmp(path, "f32") != 0) {
      ++w->failures;
    }
    jtree_free(path);
    jtree_leaf_view_t* view = NULL;
    if (jtree_reader_map_leaf(w->reader, w->leaf, &view, &err) != JTREE_OK ||
        memcmp(jtree_leaf_view_data(view), f32, jtree_leaf_view_size(view)) != 0) {
      ++w->failures;
    }
    jtree_leaf_view_release(view);
  }
  jtree_error_free(err);
  return NULL;
}

void test_threads(const char* dir) {
  /* A raw file, so that the view can be mapped too. */
  const char* path = test_path(dir, "threads.jtree", 0);
  jtree_builder_t* b = jtree_builder_create();
  jtree_write_options_t* o = jtree_write_options_create();
  CHECK_OK(jtree_write_options_set_compression(o, JTREE_CODEC_RAW, 0, &jt_err));
  CHECK_OK(jtree_write_options_set_inline_threshold(o, 0, &jt_err));
  CHECK_OK(jtree_write_options_set_sync(o, 0, &jt_err));
  CHECK_OK(model_build(b, &jt_err));
  CHECK_OK(jtree_save(b, path, o, NULL, &jt_err));
  jtree_write_options_free(o);
  jtree_builder_free(b);

  jtree_reader_t* r = NULL;
  CHECK_OK(jtree_reader_open(path, NULL, &r, &jt_err));
  if (r == NULL) return;
  uint32_t leaf = 0;
  CHECK_OK(jtree_reader_find_leaf(r, "f32", &leaf, &jt_err));
  worker workers[kThreads];
  pthread_t threads[kThreads];
  for (int i = 0; i < kThreads; ++i) {
    workers[i] = (worker){r, leaf, i, 0};
    CHECK(pthread_create(&threads[i], NULL, work, &workers[i]) == 0);
  }
  for (int i = 0; i < kThreads; ++i) {
    CHECK(pthread_join(threads[i], NULL) == 0);
    CHECK(workers[i].failures == 0);
  }
  jtree_reader_close(r);
}
