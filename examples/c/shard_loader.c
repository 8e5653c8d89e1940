/* examples/c/shard_loader.c — a tensor-parallel shard loader for an inference server, in C.
 *
 *   shard_loader PATH_OR_URL RANK WORLD_SIZE row|col
 *
 * Loads this rank's shard of every array leaf of a .jtree checkpoint (a local file, an
 * https:// URL or an s3://bucket/key URL) straight into its own malloc'd buffers:
 *   - 2-D weights: a block of rows ("row": the output dimension, as in column-parallel linear
 *     layers) or of columns ("col": the input dimension, as in row-parallel ones);
 *   - 1-D leaves (biases, norms): split like the rows in "row" mode (they follow the output
 *     dimension), whole in "col" mode (every rank adds the same bias after the all-reduce);
 *   - anything else (scalars, 0-d and higher-rank arrays): whole.
 * Splits are contiguous blocks of ceil(n / WORLD_SIZE); the last ranks may get less, or none.
 *
 * All boxes are read with one jtree_reader_read_many(): jtree fetches only the chunks the
 * boxes overlap, coalesces neighbouring ranges and decodes in parallel. At the end it prints
 * what the storage delivered (jtree's io stats) against the file's size: for a row shard of a
 * raw or row-chunked file, about 1/WORLD_SIZE of it.
 *
 * Remote settings come from the environment (AWS_REGION, AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,
 * ...); see docs/remote.md, or set them with jtree_remote_options_* and
 * jtree_open_options_set_remote(). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jtree/c.h>

/* One shard to load: a box of a leaf and the buffer it goes into. */
typedef struct shard {
  uint32_t leaf;
  char* path;
  size_t rank;
  uint64_t shape[8];
  uint64_t begin[8];
  uint64_t end[8];
  int split;  /* the dimension split, or -1 */
  void* data;
  size_t bytes;
} shard;

static int fail(const char* what, jtree_error_t* err) {
  fprintf(stderr, "shard_loader: %s: %s\n", what, jtree_error_message(err));
  jtree_error_free(err);
  return 1;
}

/* [begin, end) of block `rank` of `world` over n elements. */
static void block(uint64_t n, uint64_t rank, uint64_t world, uint64_t* begin, uint64_t* end) {
  const uint64_t per = (n + world - 1) / world;
  *begin = rank * per < n ? rank * per : n;
  *end = *begin + per < n ? *begin + per : n;
}

int main(int argc, char** argv) {
  if (argc != 5 || (strcmp(argv[4], "row") != 0 && strcmp(argv[4], "col") != 0)) {
    fprintf(stderr, "usage: shard_loader PATH_OR_URL RANK WORLD_SIZE row|col\n");
    return 2;
  }
  const char* url = argv[1];
  const uint64_t rank = strtoull(argv[2], NULL, 10), world = strtoull(argv[3], NULL, 10);
  const int by_rows = strcmp(argv[4], "row") == 0;
  if (world == 0 || rank >= world) {
    fprintf(stderr, "shard_loader: RANK must be below WORLD_SIZE\n");
    return 2;
  }

  jtree_error_t* err = NULL;
  jtree_reader_t* reader = NULL;
  if (jtree_reader_open(url, NULL, &reader, &err) != JTREE_OK) return fail("open", err);
  uint32_t num_leaves = 0;
  if (jtree_reader_num_leaves(reader, &num_leaves, &err) != JTREE_OK) return fail(url, err);

  /* Plan: one box per array leaf. */
  shard* shards = calloc(num_leaves ? num_leaves : 1, sizeof *shards);
  jtree_read_request_t* requests = calloc(num_leaves ? num_leaves : 1, sizeof *requests);
  if (shards == NULL || requests == NULL) {
    fprintf(stderr, "shard_loader: out of memory\n");
    return 1;
  }
  size_t count = 0;
  uint64_t total = 0;
  int status = 0;
  for (uint32_t leaf = 0; leaf < num_leaves && status == 0; ++leaf) {
    jtree_leaf_kind_t kind;
    jtree_dtype_t dtype;
    shard* s = &shards[count];
    if (jtree_reader_leaf_kind(reader, leaf, &kind, &err) != JTREE_OK ||
        jtree_reader_leaf_dtype(reader, leaf, &dtype, &err) != JTREE_OK ||
        jtree_reader_leaf_rank(reader, leaf, &s->rank, &err) != JTREE_OK) {
      status = fail(url, err);
      break;
    }
    if (kind != JTREE_LEAF_ARRAY) continue;  /* scalars, text: not tensors */
    if (s->rank > 8) {
      fprintf(stderr, "shard_loader: leaf %u has rank %zu; this loader handles up to 8\n",
              (unsigned)leaf, s->rank);
      status = 1;
      break;
    }
    if (jtree_reader_leaf_shape(reader, leaf, s->shape, 8, &err) != JTREE_OK ||
        jtree_reader_leaf_path(reader, leaf, &s->path, &err) != JTREE_OK) {
      status = fail(url, err);
      break;
    }
    s->leaf = leaf;
    s->split = -1;
    if (s->rank == 2) s->split = by_rows ? 0 : 1;
    if (s->rank == 1 && by_rows) s->split = 0;
    uint64_t elements = 1;
    for (size_t d = 0; d < s->rank; ++d) {
      s->begin[d] = 0;
      s->end[d] = s->shape[d];
      if ((int)d == s->split) block(s->shape[d], rank, world, &s->begin[d], &s->end[d]);
      elements *= s->end[d] - s->begin[d];
    }
    s->bytes = (size_t)(elements * jtree_dtype_item_size(dtype));
    s->data = malloc(s->bytes ? s->bytes : 1);  /* the server's own memory */
    if (s->data == NULL) {
      fprintf(stderr, "shard_loader: out of memory for %s\n", s->path);
      status = 1;
      break;
    }
    requests[count] = (jtree_read_request_t){leaf, s->rank, s->begin, s->end, s->data, s->bytes};
    total += s->bytes;
    ++count;
  }

  /* Load: every box in one pass. */
  if (status == 0 && jtree_reader_read_many(reader, requests, count, &err) != JTREE_OK) {
    status = fail("read", err);
  }

  if (status == 0) {
    for (size_t i = 0; i < count; ++i) {
      const shard* s = &shards[i];
      printf("%s: ", s->path);
      if (s->split < 0) {
        printf("whole");
      } else {
        printf("%s [%" PRIu64 ", %" PRIu64 ")", s->split == 0 ? "rows" : "columns",
               s->begin[s->split], s->end[s->split]);
      }
      printf(" of [");
      for (size_t d = 0; d < s->rank; ++d) printf(d ? ", %" PRIu64 : "%" PRIu64, s->shape[d]);
      printf("] (%zu bytes)\n", s->bytes);
    }
    jtree_io_stats_t io;
    uint64_t file_size = 0;
    if (jtree_reader_io_stats(reader, &io, &err) != JTREE_OK ||
        jtree_reader_file_size(reader, &file_size, &err) != JTREE_OK) {
      status = fail(url, err);
    } else {
      printf("rank %" PRIu64 "/%" PRIu64 " (%s): %zu tensors, %" PRIu64 " bytes loaded\n", rank,
             world, argv[4], count, total);
      printf("read %" PRIu64 " bytes in %" PRIu64 " requests from a file of %" PRIu64
             " bytes (%.1f%%)\n",
             io.bytes_read, io.read_requests, file_size,
             file_size ? 100.0 * (double)io.bytes_read / (double)file_size : 0.0);
    }
  }

  for (size_t i = 0; i < num_leaves; ++i) {  /* (calloc'd: unused entries hold NULL) */
    free(shards[i].data);
    jtree_free(shards[i].path);
  }
  free(shards);
  free(requests);
  jtree_reader_close(reader);
  return status;
}
