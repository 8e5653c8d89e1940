/* tests/c/test_shard.c — a rank's part of a model (jtree_shard_plan_*): the default rules'
 * boxes, read in one jtree_reader_read_many, match the whole leaves; errors and misuse. */
#include <stdio.h>
#include <stdlib.h>

#include "c_test.h"

#define Q_ROWS 8
#define Q_COLS 6

static float q_data[Q_ROWS * Q_COLS];  /* "l.q_proj.weight": column-parallel (rows) */
static float o_data[Q_COLS * Q_ROWS];  /* "l.o_proj.weight": row-parallel (columns) */
static float norm_data[Q_COLS];        /* "l.norm.weight": replicated */

/* Saves the model with `opts` (NULL: the defaults); returns the save's status. */
static jtree_status_t save_model_with(const char* path, const jtree_write_options_t* opts) {
  for (int i = 0; i < Q_ROWS * Q_COLS; ++i) {
    q_data[i] = (float)i;
    o_data[i] = (float)(1000 + i);
  }
  for (int i = 0; i < Q_COLS; ++i) norm_data[i] = (float)(-i);
  jtree_builder_t* b = jtree_builder_create();
  const uint64_t qdims[2] = {Q_ROWS, Q_COLS}, odims[2] = {Q_COLS, Q_ROWS}, ndims[1] = {Q_COLS};
  CHECK_OK(jtree_builder_begin_dict(b, &jt_err));
  CHECK_OK(jtree_builder_key(b, "l.q_proj.weight", &jt_err));
  CHECK_OK(jtree_builder_array(b, JTREE_DTYPE_FLOAT32, 2, qdims, q_data, sizeof q_data, &jt_err));
  CHECK_OK(jtree_builder_key(b, "l.o_proj.weight", &jt_err));
  CHECK_OK(jtree_builder_array(b, JTREE_DTYPE_FLOAT32, 2, odims, o_data, sizeof o_data, &jt_err));
  CHECK_OK(jtree_builder_key(b, "l.norm.weight", &jt_err));
  CHECK_OK(jtree_builder_array(b, JTREE_DTYPE_FLOAT32, 1, ndims, norm_data, sizeof norm_data,
                               &jt_err));
  CHECK_OK(jtree_builder_end(b, &jt_err));
  const jtree_status_t st = jtree_save(b, path, opts, NULL, &jt_err);
  jtree_builder_free(b);
  return st;
}

static void save_model(const char* path) { CHECK_OK(save_model_with(path, NULL)); }

/* Rank 1 of 2 with the default rules: every part read in one pass, compared with the data. */
static void check_rank(const jtree_reader_t* r) {
  jtree_shard_plan_t* plan = NULL;
  CHECK_OK(jtree_shard_plan_make(r, 1, 2, 0, NULL, 0, &plan, &jt_err));
  CHECK(jtree_shard_plan_count(plan) == 3);
  jtree_read_request_t reqs[3];
  float* bufs[3] = {NULL, NULL, NULL};
  jtree_split_kind_t kinds[3];
  for (size_t i = 0; i < 3; ++i) {
    int load = 0;
    CHECK_OK(jtree_shard_plan_part(plan, i, &kinds[i], &load, &reqs[i], &jt_err));
    CHECK(load == 1);
    bufs[i] = malloc(reqs[i].dst_bytes);
    reqs[i].dst = bufs[i];
  }
  CHECK(kinds[0] == JTREE_SPLIT_COLUMN && kinds[1] == JTREE_SPLIT_ROW &&
        kinds[2] == JTREE_SPLIT_REPLICATED);
  CHECK(reqs[0].rank == 2 && reqs[0].begin[0] == 4 && reqs[0].end[0] == 8);
  CHECK(reqs[1].rank == 2 && reqs[1].begin[1] == 4 && reqs[1].end[1] == 8);
  CHECK(reqs[2].begin == NULL && reqs[2].dst_bytes == sizeof norm_data);
  CHECK_OK(jtree_reader_read_many(r, reqs, 3, &jt_err));
  int rows_ok = 1, cols_ok = 1;
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < Q_COLS; ++j) rows_ok &= bufs[0][i * Q_COLS + j] == q_data[(4 + i) * Q_COLS + j];
  }
  for (int i = 0; i < Q_COLS; ++i) {
    for (int j = 0; j < 4; ++j) cols_ok &= bufs[1][i * 4 + j] == o_data[i * Q_ROWS + 4 + j];
  }
  CHECK(rows_ok);
  CHECK(cols_ok);
  CHECK(memcmp(bufs[2], norm_data, sizeof norm_data) == 0);
  for (size_t i = 0; i < 3; ++i) free(bufs[i]);
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "part 3 of a plan of 3",
             jtree_shard_plan_part(plan, 3, NULL, NULL, NULL, &jt_err));
  jtree_shard_plan_free(plan);
}

static void check_errors(const jtree_reader_t* r) {
  jtree_shard_plan_t* plan = NULL;
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "below the world size",
             jtree_shard_plan_make(r, 2, 2, 0, NULL, 0, &plan, &jt_err));
  /* 8 rows over 3 ranks: not an even column split. */
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "l.q_proj.weight",
             jtree_shard_plan_make(r, 0, 3, 0, NULL, 0, &plan, &jt_err));
  const jtree_split_rule_t row_norm = {"norm.weight", JTREE_SPLIT_ROW, -1};
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "rank 1",
             jtree_shard_plan_make(r, 0, 2, 0, &row_norm, 1, &plan, &jt_err));
  const jtree_split_rule_t null_pattern = {NULL, JTREE_SPLIT_ROW, -1};
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "pattern is NULL",
             jtree_shard_plan_make(r, 0, 2, 0, &null_pattern, 1, &plan, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "rules is NULL",
             jtree_shard_plan_make(r, 0, 2, 0, NULL, 1, &plan, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "out is NULL",
             jtree_shard_plan_make(r, 0, 2, 0, NULL, 0, NULL, &jt_err));
  /* A custom rule: the norm replicated explicitly, q_proj by its columns (dim 1). */
  const jtree_split_rule_t custom[2] = {{"q_proj.weight", JTREE_SPLIT_COLUMN, 1},
                                        {"*.weight", JTREE_SPLIT_REPLICATED, -1}};
  CHECK_OK(jtree_shard_plan_make(r, 0, 2, 0, custom, 2, &plan, &jt_err));
  jtree_read_request_t req;
  CHECK_OK(jtree_shard_plan_part(plan, 0, NULL, NULL, &req, &jt_err));
  CHECK(req.begin[1] == 0 && req.end[1] == 3 && req.end[0] == Q_ROWS);
  CHECK(req.dst_bytes == Q_ROWS * 3 * sizeof(float));
  CHECK_OK(jtree_shard_plan_part(plan, 1, NULL, NULL, &req, &jt_err));
  CHECK(req.begin == NULL);  /* o_proj: replicated by the second rule */
  jtree_shard_plan_free(plan);
  jtree_shard_plan_free(NULL);
  CHECK(jtree_shard_plan_count(NULL) == 0);
}

/* jtree_write_options_set_shard_layout: a file laid out for 2 ranks reads as any other; a
 * layout a leaf cannot take fails the save naming it; misuse. */
static void check_layout(const char* dir) {
  jtree_write_options_t* opts = jtree_write_options_create();
  CHECK_OK(jtree_write_options_set_inline_threshold(opts, 0, &jt_err));
  CHECK_OK(jtree_write_options_set_shard_layout(opts, 2, 0, NULL, 0, &jt_err));
  const char* path = test_path(dir, "shard_layout.jtree", 0);
  CHECK_OK(save_model_with(path, opts));
  jtree_reader_t* r = NULL;
  CHECK_OK(jtree_reader_open(path, NULL, &r, &jt_err));
  if (r != NULL) check_rank(r);
  jtree_reader_close(r);
  /* 8 rows of q_proj over 3 ranks: refused, naming the leaf; nothing written. */
  CHECK_OK(jtree_write_options_set_shard_layout(opts, 3, 0, NULL, 0, &jt_err));
  const char* uneven = test_path(dir, "shard_layout_3.jtree", 1);
  remove(uneven); /* (a previous run's, below) */
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "l.q_proj.weight", save_model_with(uneven, opts));
  FILE* none = fopen(uneven, "rb");
  CHECK(none == NULL);
  if (none != NULL) fclose(none);
  /* world 0 without rules: no layout (the uneven save now succeeds). */
  CHECK_OK(jtree_write_options_set_shard_layout(opts, 0, 0, NULL, 0, &jt_err));
  CHECK_OK(save_model_with(uneven, opts));
  const jtree_split_rule_t row = {"o_proj.weight", JTREE_SPLIT_ROW, -1};
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "world size must be >= 1",
             jtree_write_options_set_shard_layout(opts, 0, 0, &row, 1, &jt_err));
  const jtree_split_rule_t empty = {"", JTREE_SPLIT_ROW, -1};
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "empty pattern",
             jtree_write_options_set_shard_layout(opts, 2, 0, &empty, 1, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "rules is NULL",
             jtree_write_options_set_shard_layout(opts, 2, 0, NULL, 1, &jt_err));
  CHECK_FAIL(JTREE_INVALID_ARGUMENT, "opts is NULL",
             jtree_write_options_set_shard_layout(NULL, 2, 0, NULL, 0, &jt_err));
  jtree_write_options_free(opts);
}

void test_shard(const char* dir) {
  const char* path = test_path(dir, "shard_plan.jtree", 0);
  save_model(path);
  jtree_reader_t* r = NULL;
  CHECK_OK(jtree_reader_open(path, NULL, &r, &jt_err));
  if (r == NULL) return;
  check_rank(r);
  check_errors(r);
  jtree_reader_close(r);
  check_layout(dir);
}
