/* examples/c/shard_loader.c — a tensor-parallel shard loader for an inference server, in C.
 *
 *   shard_loader PATH_OR_URL RANK WORLD_SIZE row|col [cuda:N]
 *
 * Loads this rank's shard of every array leaf of a .jtree checkpoint (a local file, an
 * https:// URL or an s3://bucket/key URL) straight into its own malloc'd buffers, or, with
 * cuda:N, straight into memory of GPU N (cudaMalloc'd buffers filled by
 * jtree_reader_read_many_to_device: chunks read and decoded into pinned staging buffers and
 * copied while the next ones are read; raw chunks of a cold local file read with O_DIRECT):
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
 * raw or row-chunked file, about 1/WORLD_SIZE of it, and a digest of the loaded bytes (FNV-1a
 * over every shard in order; from GPU memory, copied back for it): the same with and without
 * cuda:N, which is how tests/c/shard_loader_device.sh checks the GPU load.
 *
 * cuda:N needs a build with CUDA (JTREE_EXAMPLE_CUDA, set by examples/CMakeLists.txt when jtree
 * has CUDA support; the program then links the CUDA runtime for cudaMalloc). Loading onto
 * several GPUs: one call per device, each on a thread of its own, all on one reader.
 *
 * Remote settings come from the environment (AWS_REGION, AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,
 * ...); see docs/remote.md, or set them with jtree_remote_options_* and
 * jtree_open_options_set_remote(). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jtree/c.h>

#ifdef JTREE_EXAMPLE_CUDA
#include <cuda_runtime_api.h>
#endif

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

/* FNV-1a, 64-bit, continued from `h` over `n` bytes. */
static uint64_t fnv1a(uint64_t h, const unsigned char* p, size_t n) {
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

/* Where the shards go: host memory (device < 0) or GPU `device`. */
static void* allocate(int device, size_t bytes) {
  if (bytes == 0) bytes = 1;
#ifdef JTREE_EXAMPLE_CUDA
  if (device >= 0) {
    void* p = NULL;
    return cudaMalloc(&p, bytes) == cudaSuccess ? p : NULL;
  }
#endif
  (void)device;
  return malloc(bytes);
}

static void release(int device, void* p) {
#ifdef JTREE_EXAMPLE_CUDA
  if (device >= 0) {
    if (p != NULL) cudaFree(p);
    return;
  }
#endif
  (void)device;
  free(p);
}

/* The digest of a shard's bytes, continued from `h` (GPU memory copied back first); 0 when
 * that copy fails. */
static uint64_t digest(int device, uint64_t h, const void* data, size_t bytes) {
#ifdef JTREE_EXAMPLE_CUDA
  if (device >= 0) {
    unsigned char* host = malloc(bytes ? bytes : 1);
    if (host == NULL || cudaMemcpy(host, data, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
      free(host);
      return 0;
    }
    h = fnv1a(h, host, bytes);
    free(host);
    return h;
  }
#endif
  (void)device;
  return fnv1a(h, data, bytes);
}

/* [begin, end) of block `rank` of `world` over n elements. */
static void block(uint64_t n, uint64_t rank, uint64_t world, uint64_t* begin, uint64_t* end) {
  const uint64_t per = (n + world - 1) / world;
  *begin = rank * per < n ? rank * per : n;
  *end = *begin + per < n ? *begin + per : n;
}

int main(int argc, char** argv) {
  if (argc < 5 || argc > 6 || (strcmp(argv[4], "row") != 0 && strcmp(argv[4], "col") != 0) ||
      (argc == 6 && strncmp(argv[5], "cuda:", 5) != 0)) {
    fprintf(stderr, "usage: shard_loader PATH_OR_URL RANK WORLD_SIZE row|col [cuda:N]\n");
    return 2;
  }
  int device = -1; /* host memory */
  if (argc == 6) {
    char* end = NULL;
    const long n = strtol(argv[5] + 5, &end, 10);
    if (end == argv[5] + 5 || *end != '\0' || n < 0 || n > 1023) {
      fprintf(stderr, "shard_loader: %s: expected cuda:N with N a device number\n", argv[5]);
      return 2;
    }
    device = (int)n;
#ifndef JTREE_EXAMPLE_CUDA
    fprintf(stderr, "shard_loader: %s: this build has no CUDA support (jtree built without it)\n",
            argv[5]);
    return 1;
#endif
    /* Asked before any cudaMalloc, for a clear message on a machine without the GPU. */
    if (device >= jtree_cuda_device_count()) {
      fprintf(stderr, "shard_loader: %s: no CUDA device %d (jtree sees %d)\n", argv[5], device,
              jtree_cuda_device_count());
      return 1;
    }
#ifdef JTREE_EXAMPLE_CUDA
    if (cudaSetDevice(device) != cudaSuccess) {
      fprintf(stderr, "shard_loader: %s: cudaSetDevice failed\n", argv[5]);
      return 1;
    }
#endif
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
    s->data = allocate(device, s->bytes);  /* the server's own memory */
    if (s->data == NULL) {
      fprintf(stderr, "shard_loader: out of %s memory for %s\n", device < 0 ? "host" : "GPU",
              s->path);
      status = 1;
      break;
    }
    requests[count] = (jtree_read_request_t){leaf, s->rank, s->begin, s->end, s->data, s->bytes};
    total += s->bytes;
    ++count;
  }

  /* Load: every box in one pass. */
  jtree_device_stats_t dstats = {0, 0, NULL};
  if (status == 0 && device < 0 &&
      jtree_reader_read_many(reader, requests, count, &err) != JTREE_OK) {
    status = fail("read", err);
  }
  if (status == 0 && device >= 0) {
    jtree_device_options_t* opts = jtree_device_options_create();
    if (opts == NULL) {
      fprintf(stderr, "shard_loader: out of memory\n");
      status = 1;
    } else if (jtree_device_options_set_device(opts, device, &err) != JTREE_OK ||
               jtree_reader_read_many_to_device(reader, requests, count, opts, &dstats,
                                                &err) != JTREE_OK) {
      status = fail("read to the device", err);
    }
    jtree_device_options_free(opts);
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
      if (device >= 0) {
        printf("into cuda:%d: %" PRIu64 " bytes read with O_DIRECT, %" PRIu64
               " through the page cache%s%s\n",
               device, dstats.direct_bytes, dstats.buffered_bytes,
               dstats.direct_io_note ? ": " : "",
               dstats.direct_io_note ? dstats.direct_io_note : "");
      }
    }
  }
  jtree_free(dstats.direct_io_note);
  if (status == 0) {
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < count && h != 0; ++i) {
      h = digest(device, h, shards[i].data, shards[i].bytes);
    }
    if (h == 0) {
      fprintf(stderr, "shard_loader: copying the shards back from the GPU failed\n");
      status = 1;
    } else {
      printf("digest %016" PRIx64 "\n", h);
    }
  }

  for (size_t i = 0; i < num_leaves; ++i) {  /* (calloc'd: unused entries hold NULL) */
    release(device, shards[i].data);
    jtree_free(shards[i].path);
  }
  free(shards);
  free(requests);
  jtree_reader_close(reader);
  return status;
}
