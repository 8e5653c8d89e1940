/* jtree/c.h — the C API of jtree: open, walk and read .jtree files, save and append trees.
 *
 * A C11 interface over the C++ library (jtree/reader.h, jtree/writer.h), for programs and
 * languages that cannot use C++: inference servers written in C, FFI bindings (Rust, Go,
 * Julia, ...). It translates; every decision (validation, chunk planning, what is an error) is
 * the C++ library's, so the C API behaves exactly like the C++ one.
 *
 *   jtree_reader_t* r = NULL;
 *   jtree_error_t* err = NULL;
 *   if (jtree_reader_open("ckpt.jtree", NULL, &r, &err) != JTREE_OK) {
 *     fprintf(stderr, "%s\n", jtree_error_message(err));   // names the file and what failed
 *     jtree_error_free(err);
 *     return 1;
 *   }
 *   uint32_t w;
 *   uint64_t bytes;
 *   jtree_reader_find_leaf(r, "params/w", &w, &err);
 *   jtree_reader_leaf_memory_bytes(r, w, &bytes, &err);
 *   void* buf = malloc(bytes);
 *   jtree_reader_read(r, w, buf, bytes, &err);
 *   jtree_reader_close(r);
 *
 * docs/embedding.md is the guide (concepts, a complete program, linking).
 *
 * ---- Conventions (they hold for every function below unless its comment says otherwise) ----
 *
 * Status and errors. Every fallible function returns a jtree_status_t: JTREE_OK (0) or one of
 * the codes of the C++ jtree::StatusCode, with the same numbers. Its last parameter is a
 * `jtree_error_t** err`, which may be NULL (then only the code is reported). On failure, when
 * `err` is not NULL, `*err` receives a new error object holding the code and the message (the
 * C++ Status message: it names the file or URL, the key path and the chunk at fault, e.g.
 * "/data/ckpt.jtree: leaf params/w: chunk 17: checksum mismatch"). Initialise `*err` to NULL;
 * an error already in `*err` is freed and replaced (so one variable can serve a sequence of
 * calls), and on success `*err` is left as it was. Free error objects with jtree_error_free().
 *
 * Misuse never crashes: a NULL handle, a NULL out-pointer, a node or leaf number out of range,
 * a buffer of the wrong size, a box outside the array or of the wrong rank give
 * JTREE_INVALID_ARGUMENT. (Pointers that are not NULL must point at what the function says:
 * C cannot check the size of a buffer it is given, only compare it with the size you state.)
 * Out-pointers are written only on success (one exception, said there:
 * jtree_reader_node_children() reports the count also when the array is too small).
 *
 * No C++ exception leaves this API: memory exhaustion is reported as
 * JTREE_RESOURCE_EXHAUSTED ("out of memory"), any other exception as JTREE_ABORTED naming it.
 *
 * Ownership. Handles (jtree_reader_t, jtree_builder_t, ...) are created by a function of this
 * API and freed by its matching close/free function, which accepts NULL. Strings and arrays
 * returned through `char**` out-pointers are allocated for the caller; free them with
 * jtree_free(). Pointers returned as `const` (names, keys, metadata) belong to the handle they
 * came from and stay valid until that handle is closed; do not free them.
 *
 * Thread safety. A jtree_reader_t is immutable after it is opened: every jtree_reader_*
 * function may be called on the same reader from many threads at once (reads run in
 * parallel), except jtree_reader_close(), which must not race with other calls on it.
 * Options, builders and reports are not synchronised: use one from one thread at a time (an
 * options handle that no thread modifies may be passed to calls in many threads). Error
 * objects and leaf views are independent values. Different handles never share state
 * that the caller must lock.
 *
 * ABI. Handles are opaque; the few structs (jtree_io_stats_t, jtree_read_request_t,
 * jtree_write_stats_t, jtree_device_stats_t) and the enums' values change only with the
 * major version.
 *
 * Untrusted files. Opening and reading validate every structure of the file against its size
 * and the limits (jtree_open_options_set_limit): a damaged or hostile file gives
 * JTREE_CORRUPTION (or JTREE_NOT_SUPPORTED, JTREE_RESOURCE_EXHAUSTED), never a crash, hang or
 * unbounded allocation; with checksum verification on (the default) never wrong data. What is
 * unsafe with untrusted input is said where it applies: leaf views (SIGBUS if the mapped file
 * is truncated), turning verification off, and raising the limits.
 */
#ifndef JTREE_C_H_
#define JTREE_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the exported functions: they stay visible when the library is built with
 * -fvisibility=hidden. */
#if defined(_WIN32)
#define JTREE_C_API
#else
#define JTREE_C_API __attribute__((visibility("default")))
#endif

/* ============================== version ====================================================== */

#define JTREE_VERSION_MAJOR 0
#define JTREE_VERSION_MINOR 1
#define JTREE_VERSION_PATCH 0
/* major * 10000 + minor * 100 + patch: compare with jtree_version_number() to detect a header
 * and library of different versions. */
#define JTREE_VERSION_NUMBER \
  (JTREE_VERSION_MAJOR * 10000 + JTREE_VERSION_MINOR * 100 + JTREE_VERSION_PATCH)
#define JTREE_VERSION_STRING "0.1.0"

/* The library's version, e.g. "0.1.0": a static string, never NULL. Thread-safe. */
JTREE_C_API const char* jtree_version(void);
/* The library's JTREE_VERSION_NUMBER (of the library linked, not of this header). */
JTREE_C_API unsigned jtree_version_number(void);
/* The file format version this library writes (jtree::kFormatVersion). */
JTREE_C_API unsigned jtree_format_version(void);

/* ============================== status and errors ============================================ */

/* The codes of jtree::StatusCode (jtree/status.h), with the same values. */
typedef enum jtree_status_t {
  JTREE_OK = 0,
  JTREE_CORRUPTION = 1,         /* the file's bytes are inconsistent, damaged or hostile */
  JTREE_IO_ERROR = 2,           /* the storage failed: read, write, network, disk full */
  JTREE_INVALID_ARGUMENT = 3,   /* an impossible request, or a misused argument */
  JTREE_NOT_SUPPORTED = 4,      /* a newer format or a feature this build lacks */
  JTREE_NOT_FOUND = 5,          /* no such file, object or key path */
  JTREE_ALREADY_EXISTS = 6,     /* the target exists and overwriting was not allowed */
  JTREE_PERMISSION_DENIED = 7,  /* the backend refused access (file mode, credentials) */
  JTREE_ABORTED = 8,            /* cancelled, a deadline, an object changed while read */
  JTREE_RESOURCE_EXHAUSTED = 9  /* a limit was hit, or memory ran out */
} jtree_status_t;

/* The name of a code, e.g. "Corruption" (a static string; "Unknown" for other values). */
JTREE_C_API const char* jtree_status_name(jtree_status_t code);

/* An error: a code and a message. Created by failing calls (see Conventions). */
typedef struct jtree_error_t jtree_error_t;

/* The code of an error; JTREE_INVALID_ARGUMENT for NULL. */
JTREE_C_API jtree_status_t jtree_error_code(const jtree_error_t* err);
/* The message of an error, NUL-terminated, owned by the error (valid until it is freed).
 * Names the file or URL and, where it applies, the key path and chunk. "" for NULL. */
JTREE_C_API const char* jtree_error_message(const jtree_error_t* err);
/* Frees an error; NULL is ignored. */
JTREE_C_API void jtree_error_free(jtree_error_t* err);

/* Frees a string or array this API allocated for the caller (the `char**` outputs); NULL is
 * ignored. */
JTREE_C_API void jtree_free(void* p);

/* ============================== element types ================================================ */

/* Element types of array leaves; the values are the file's dtype codes (jtree::DType). */
typedef enum jtree_dtype_t {
  JTREE_DTYPE_INVALID = 0,
  JTREE_DTYPE_BOOL = 1,
  JTREE_DTYPE_INT8 = 2,
  JTREE_DTYPE_INT16 = 3,
  JTREE_DTYPE_INT32 = 4,
  JTREE_DTYPE_INT64 = 5,
  JTREE_DTYPE_UINT8 = 6,
  JTREE_DTYPE_UINT16 = 7,
  JTREE_DTYPE_UINT32 = 8,
  JTREE_DTYPE_UINT64 = 9,
  JTREE_DTYPE_FLOAT16 = 10,
  JTREE_DTYPE_BFLOAT16 = 11,
  JTREE_DTYPE_FLOAT32 = 12,
  JTREE_DTYPE_FLOAT64 = 13,
  JTREE_DTYPE_COMPLEX64 = 14,
  JTREE_DTYPE_COMPLEX128 = 15,
  JTREE_DTYPE_FLOAT8_E4M3FN = 16,
  JTREE_DTYPE_FLOAT8_E4M3FNUZ = 17,
  JTREE_DTYPE_FLOAT8_E5M2 = 18,
  JTREE_DTYPE_FLOAT8_E5M2FNUZ = 19,
  JTREE_DTYPE_FLOAT8_E8M0FNU = 20,
  JTREE_DTYPE_FLOAT4_E2M1FN = 21,
  JTREE_DTYPE_INT4 = 22, /* in memory one byte per element, the value in the low nibble */
  JTREE_DTYPE_UINT4 = 23, /* in memory one byte per element, the value in the low nibble */
  /* Format version 2: */
  JTREE_DTYPE_FLOAT8_E4M3B11FNUZ = 24,
  JTREE_DTYPE_FLOAT8_E3M4 = 25,
  JTREE_DTYPE_FLOAT8_E4M3 = 26,
  JTREE_DTYPE_FLOAT6_E2M3FN = 27, /* one byte per element, the value in the low 6 bits */
  JTREE_DTYPE_FLOAT6_E3M2FN = 28  /* one byte per element, the value in the low 6 bits */
} jtree_dtype_t;

/* The NumPy/ml_dtypes name of a dtype ("float32", "bfloat16", "int4"...): a static string;
 * NULL for JTREE_DTYPE_INVALID and unknown values. */
JTREE_C_API const char* jtree_dtype_name(jtree_dtype_t dtype);
/* The dtype called `name`, or JTREE_DTYPE_INVALID (also for NULL). */
JTREE_C_API jtree_dtype_t jtree_dtype_from_name(const char* name);
/* Bytes per element in memory buffers (the buffers of reads and of the builder); 0 for
 * invalid dtypes. */
JTREE_C_API size_t jtree_dtype_item_size(jtree_dtype_t dtype);

/* ============================== the remote backends ========================================== */

/* Settings of the http(s):// and s3:// backends (jtree::RemoteOptions, jtree/remote.h;
 * docs/remote.md). Unset fields take the library's defaults, and empty strings mean "from the
 * environment" (AWS_REGION, AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, CURL_CA_BUNDLE, ...). The
 * handle is copied by jtree_open_options_set_remote()/jtree_write_options_set_remote(), so it
 * may be freed right after. Not thread-safe while modified. */
typedef struct jtree_remote_options_t jtree_remote_options_t;

/* A new handle with the defaults; NULL only when out of memory. Free with
 * jtree_remote_options_free(). */
JTREE_C_API jtree_remote_options_t* jtree_remote_options_create(void);
JTREE_C_API void jtree_remote_options_free(jtree_remote_options_t* opts);

/* Retries of a request after its first attempt (default 8); >= 0. */
JTREE_C_API jtree_status_t jtree_remote_options_set_max_retries(jtree_remote_options_t* opts,
                                                                int retries, jtree_error_t** err);
/* Timeouts in seconds (> 0): the whole of one request with its retries (default 300), the TCP
 * and TLS connection (10), and a transfer receiving nothing (30, then it is retried). */
JTREE_C_API jtree_status_t jtree_remote_options_set_timeouts(jtree_remote_options_t* opts,
                                                             double deadline_seconds,
                                                             double connect_timeout_seconds,
                                                             double stall_timeout_seconds,
                                                             jtree_error_t** err);
/* Requests in flight at once for one object (default 64); >= 1. */
JTREE_C_API jtree_status_t jtree_remote_options_set_max_concurrency(jtree_remote_options_t* opts,
                                                                    int requests,
                                                                    jtree_error_t** err);
/* The S3-compatible endpoint ("http://127.0.0.1:7480") and region ("eu-west-1"); NULL or ""
 * leave a field to the environment. */
JTREE_C_API jtree_status_t jtree_remote_options_set_endpoint(jtree_remote_options_t* opts,
                                                             const char* endpoint,
                                                             jtree_error_t** err);
JTREE_C_API jtree_status_t jtree_remote_options_set_region(jtree_remote_options_t* opts,
                                                           const char* region,
                                                           jtree_error_t** err);
/* The AWS profile of ~/.aws/credentials and ~/.aws/config (NULL or "": AWS_PROFILE, else
 * "default"). */
JTREE_C_API jtree_status_t jtree_remote_options_set_profile(jtree_remote_options_t* opts,
                                                            const char* profile,
                                                            jtree_error_t** err);
/* Static S3 credentials; `session_token` may be NULL. Both keys NULL or "": from the
 * environment or profile (anonymous requests when there are none). The handle keeps copies:
 * clear your own copies of secrets as you see fit; the library keeps them in memory while
 * the handle, or a reader or save using them, lives. */
JTREE_C_API jtree_status_t jtree_remote_options_set_credentials(jtree_remote_options_t* opts,
                                                                const char* access_key_id,
                                                                const char* secret_access_key,
                                                                const char* session_token,
                                                                jtree_error_t** err);
/* TLS: a CA bundle file (NULL or "": AWS_CA_BUNDLE, CURL_CA_BUNDLE, SSL_CERT_FILE, else the
 * system's), and whether the peer's certificate is verified (default 1). Turning verification
 * off makes every byte read from or written to https:// and s3:// open to interception. */
JTREE_C_API jtree_status_t jtree_remote_options_set_ca_file(jtree_remote_options_t* opts,
                                                            const char* ca_file,
                                                            jtree_error_t** err);
JTREE_C_API jtree_status_t jtree_remote_options_set_verify_tls(jtree_remote_options_t* opts,
                                                               int verify, jtree_error_t** err);
/* Adds a request header for http(s):// URLs, e.g. "Authorization: Bearer ..."; it must
 * contain ':' and no line break. */
JTREE_C_API jtree_status_t jtree_remote_options_add_http_header(jtree_remote_options_t* opts,
                                                                const char* header,
                                                                jtree_error_t** err);
/* Servers that ignore HTTP Range (they answer a range request with the whole object): by
 * default (allow 0) a read fails with JTREE_NOT_SUPPORTED, having received none of the body;
 * allow 1 downloads the object once, whole, into an unlinked temporary file ($TMPDIR, else
 * /tmp) and serves every read from it, for objects of at most `max_bytes` (0 keeps the
 * default, 16 GiB; larger ones fail with JTREE_RESOURCE_EXHAUSTED). */
JTREE_C_API jtree_status_t jtree_remote_options_set_allow_full_download(
    jtree_remote_options_t* opts, int allow, uint64_t max_bytes, jtree_error_t** err);

/* ============================== opening ====================================================== */

/* Options for opening a file and for the reads made through the reader (jtree::OpenOptions and
 * jtree::ReadOptions). Copied by jtree_reader_open(): free the handle whenever convenient. */
typedef struct jtree_open_options_t jtree_open_options_t;

/* A new handle with the defaults (all threads, checksums verified, mmap on, default limits);
 * NULL only when out of memory. Free with jtree_open_options_free(). */
JTREE_C_API jtree_open_options_t* jtree_open_options_create(void);
JTREE_C_API void jtree_open_options_free(jtree_open_options_t* opts);

/* Worker threads for fetching and decoding chunks (0, the default: hardware threads). Each
 * decodes into scratch buffers of about a chunk's size while it works; between calls the
 * process keeps at most 64 MiB of them (see jtree_release_scratch_memory). */
JTREE_C_API jtree_status_t jtree_open_options_set_threads(jtree_open_options_t* opts,
                                                          int threads, jtree_error_t** err);
/* Frees the scratch buffers the read and save workers keep between calls (at most 64 MiB of
 * each kind, the most recently used: the next call need not fault fresh memory in) and
 * returns how many bytes that gave back; calls running meanwhile keep theirs. For a process
 * done with its loading (a server after loading its model). Thread-safe.
 * (jtree::release_scratch_memory.) */
JTREE_C_API uint64_t jtree_release_scratch_memory(void);
/* Verify each chunk's checksum before using it (default 1). With 0 reads are faster, but a
 * damaged or hostile file can then give wrong data without an error: keep it on for files
 * you do not trust. */
JTREE_C_API jtree_status_t jtree_open_options_set_verify_checksums(jtree_open_options_t* opts,
                                                                   int verify,
                                                                   jtree_error_t** err);
/* Map local files into memory and read raw chunks from the mapping (default 1). Needed for
 * jtree_reader_map_leaf(). */
JTREE_C_API jtree_status_t jtree_open_options_set_use_mmap(jtree_open_options_t* opts,
                                                           int use_mmap, jtree_error_t** err);

/* The limits a file is checked against (jtree::Limits; spec/FORMAT.md, "Limits"). Lower them
 * for untrusted files in small processes; raising them lets a hostile file make the library
 * allocate more. */
typedef enum jtree_limit_t {
  JTREE_LIMIT_MAX_HEADER_BYTES = 0,
  JTREE_LIMIT_MAX_INDEX_BYTES = 1,
  JTREE_LIMIT_MAX_NODES = 2,
  JTREE_LIMIT_MAX_LEAVES = 3,
  JTREE_LIMIT_MAX_DEPTH = 4,        /* at most 2^32 - 1 */
  JTREE_LIMIT_MAX_RANK = 5,         /* at most 2^32 - 1 */
  JTREE_LIMIT_MAX_CHUNK_BYTES = 6,
  JTREE_LIMIT_MAX_STRING_BYTES = 7,
  JTREE_LIMIT_MAX_LEAF_BYTES = 8,   /* one leaf the library allocates (jtree_reader_read_bytes) */
  JTREE_LIMIT_MAX_TOTAL_BYTES = 9   /* all that one call allocates (per call: MemoryBudget, jtree/options.h) */
} jtree_limit_t;

/* Sets one limit. InvalidArgument for an unknown limit or a value out of its range. */
JTREE_C_API jtree_status_t jtree_open_options_set_limit(jtree_open_options_t* opts,
                                                        jtree_limit_t limit, uint64_t value,
                                                        jtree_error_t** err);
/* The remote settings (copied; NULL restores the defaults). */
JTREE_C_API jtree_status_t jtree_open_options_set_remote(jtree_open_options_t* opts,
                                                         const jtree_remote_options_t* remote,
                                                         jtree_error_t** err);

/* An open file. Thread-safe (see Conventions). */
typedef struct jtree_reader_t jtree_reader_t;

/* Opens a local path, file://, http://, https:// or s3://bucket/key URL, reading its header
 * and index (never chunk data) and validating them. `options` may be NULL (defaults).
 * On success `*out` receives a reader to close with jtree_reader_close().
 * Errors: NotFound (no such file/object), PermissionDenied, IOError, Corruption (not a jtree
 * file, damaged; a file of another format, a safetensors, PyTorch, NumPy or GGUF file, is
 * named as such with the `jtree convert` command that converts it), NotSupported (a newer
 * format; a URL scheme this build lacks, "ftp://" as much as "s3://" in a build without the
 * remote backends), ResourceExhausted (a limit, JTREE_LIMIT_MAX_DEPTH included: a file over
 * a limit may be valid), InvalidArgument (NULL path or out; a directory or another file that
 * is not a regular file: the message says what a directory holds, a Hugging Face or orbax
 * checkpoint to convert, for one). Thread-safe. */
JTREE_C_API jtree_status_t jtree_reader_open(const char* path_or_url,
                                             const jtree_open_options_t* options,
                                             jtree_reader_t** out, jtree_error_t** err);

/* Closes a reader; NULL is ignored. Leaf views made from it stay valid (each keeps the file
 * open) until released. Must not race with other calls on the same reader. */
JTREE_C_API void jtree_reader_close(jtree_reader_t* reader);

/* The path or URL the reader was opened with (owned by the reader); "" for NULL. */
JTREE_C_API const char* jtree_reader_name(const jtree_reader_t* reader);
/* The file's size in bytes. */
JTREE_C_API jtree_status_t jtree_reader_file_size(const jtree_reader_t* reader, uint64_t* out,
                                                  jtree_error_t** err);
/* The file's generation (0, then +1 per append). */
JTREE_C_API jtree_status_t jtree_reader_generation(const jtree_reader_t* reader, uint64_t* out,
                                                   jtree_error_t** err);

/* What the reader's storage backend did since the file was opened (jtree::IoStats): read
 * requests that reached the storage, bytes read, retries. */
typedef struct jtree_io_stats_t {
  uint64_t read_requests;
  uint64_t bytes_read;
  uint64_t retries;
  uint64_t write_requests;
  uint64_t bytes_written;
} jtree_io_stats_t;

/* The backend's counters: what opening and the reads so far cost (compare bytes_read with
 * jtree_reader_file_size()). Counts of concurrent reads are consistent once they returned. */
JTREE_C_API jtree_status_t jtree_reader_io_stats(const jtree_reader_t* reader,
                                                 jtree_io_stats_t* out, jtree_error_t** err);

/* ============================== the tree ===================================================== */

/* The tree is a preorder list of nodes (node 0 is the root; a container's children follow
 * it, each child's subtree complete before the next) whose Leaf nodes refer to leaves (two
 * nodes may share a leaf: tied weights). Numbers: nodes 0 .. num_nodes-1, leaves
 * 0 .. num_leaves-1. All these functions read the header in place: O(1) or O(the answer). */

typedef enum jtree_node_kind_t {
  JTREE_NODE_DICT = 1,
  JTREE_NODE_LIST = 2,
  JTREE_NODE_TUPLE = 3,
  JTREE_NODE_NAMED_TUPLE = 4,
  JTREE_NODE_ORDERED_DICT = 5,
  JTREE_NODE_NONE = 6,
  JTREE_NODE_CUSTOM = 7,
  JTREE_NODE_LEAF = 8
} jtree_node_kind_t;

/* What a node's key in its parent is: a string (dict items), an integer, or none (list and
 * tuple items, the root). */
typedef enum jtree_key_kind_t {
  JTREE_KEY_NONE = 0,
  JTREE_KEY_STR = 1,
  JTREE_KEY_INT = 2
} jtree_key_kind_t;

typedef enum jtree_leaf_kind_t {
  JTREE_LEAF_ARRAY = 1,
  JTREE_LEAF_INT = 2,
  JTREE_LEAF_FLOAT = 3,
  JTREE_LEAF_BOOL = 4,
  JTREE_LEAF_COMPLEX = 5,
  JTREE_LEAF_STR = 6,  /* UTF-8 text, a payload of uint8 */
  JTREE_LEAF_BYTES = 7,
  JTREE_LEAF_BYTE_ARRAY = 8,
  JTREE_LEAF_CUSTOM = 9,
  JTREE_LEAF_PICKLE = 10
} jtree_leaf_kind_t;

/* Where a leaf's payload is: none (a scalar leaf: int, float, bool, complex), inline in the
 * header (small payloads), or in chunks. Only payload leaves can be read. */
typedef enum jtree_storage_t {
  JTREE_STORAGE_NONE = 0,
  JTREE_STORAGE_INLINE = 1,
  JTREE_STORAGE_CHUNKED = 2
} jtree_storage_t;

/* Numbers of nodes and of leaves. */
JTREE_C_API jtree_status_t jtree_reader_num_nodes(const jtree_reader_t* reader, uint32_t* out,
                                                  jtree_error_t** err);
JTREE_C_API jtree_status_t jtree_reader_num_leaves(const jtree_reader_t* reader, uint32_t* out,
                                                   jtree_error_t** err);

/* Node `node`'s kind. InvalidArgument when out of range (as for every node number below). */
JTREE_C_API jtree_status_t jtree_reader_node_kind(const jtree_reader_t* reader, uint32_t node,
                                                  jtree_node_kind_t* out, jtree_error_t** err);
/* Node `node`'s key in its parent. `kind` receives its kind; for JTREE_KEY_STR `*str` and
 * `*str_len` the bytes (owned by the reader, valid until it is closed, NOT NUL-terminated in
 * general: use the length), for JTREE_KEY_INT `*int_key` the integer. Any of `str`,
 * `str_len` and `int_key` may be NULL when not wanted; `kind` may not. */
JTREE_C_API jtree_status_t jtree_reader_node_key(const jtree_reader_t* reader, uint32_t node,
                                                 jtree_key_kind_t* kind, const char** str,
                                                 size_t* str_len, int64_t* int_key,
                                                 jtree_error_t** err);
/* Number of children of a container (0 for leaves and None). */
JTREE_C_API jtree_status_t jtree_reader_node_num_children(const jtree_reader_t* reader,
                                                          uint32_t node, uint32_t* out,
                                                          jtree_error_t** err);
/* The node number of child `index` (< num_children) of `node`. O(index): to visit all
 * children, use jtree_reader_node_children() or follow jtree_reader_node_subtree_end(). */
JTREE_C_API jtree_status_t jtree_reader_node_child(const jtree_reader_t* reader, uint32_t node,
                                                   uint32_t index, uint32_t* out,
                                                   jtree_error_t** err);
/* All children of `node` into `out[0 .. capacity)`; `*count` receives how many there are.
 * InvalidArgument when `capacity` is smaller (with `*count` set, so a call with capacity 0
 * and out NULL asks for the count). */
JTREE_C_API jtree_status_t jtree_reader_node_children(const jtree_reader_t* reader,
                                                      uint32_t node, uint32_t* out,
                                                      size_t capacity, size_t* count,
                                                      jtree_error_t** err);
/* The parent of `node` (the root's is 0) and one past the last node of its subtree (its next
 * sibling, when it has one). */
JTREE_C_API jtree_status_t jtree_reader_node_parent(const jtree_reader_t* reader, uint32_t node,
                                                    uint32_t* out, jtree_error_t** err);
JTREE_C_API jtree_status_t jtree_reader_node_subtree_end(const jtree_reader_t* reader,
                                                         uint32_t node, uint32_t* out,
                                                         jtree_error_t** err);
/* The leaf a JTREE_NODE_LEAF node refers to; InvalidArgument for other kinds. */
JTREE_C_API jtree_status_t jtree_reader_node_leaf(const jtree_reader_t* reader, uint32_t node,
                                                  uint32_t* out, jtree_error_t** err);
/* The key path of a node, e.g. "params/layers/0/w" ("" for the root; '/' and '\' inside keys
 * escaped by '\'), NUL-terminated, allocated: free it with jtree_free(). */
JTREE_C_API jtree_status_t jtree_reader_node_path(const jtree_reader_t* reader, uint32_t node,
                                                  char** out, jtree_error_t** err);

/* The node at a key path (the syntax of jtree_reader_node_path()). NotFound naming the file,
 * the path and its first missing component. Escapes (jtree/key_path.h): "\e" stands for
 * nothing (the component "\e" is the empty key), '\' before any other character for that
 * character, whether it needed escaping or not ("a\/b" is the key "a/b", "n\ame" finds
 * "name"); a path ending in an unfinished '\' is InvalidArgument. */
JTREE_C_API jtree_status_t jtree_reader_find(const jtree_reader_t* reader, const char* path,
                                             uint32_t* node, jtree_error_t** err);
/* The leaf at a key path: NotFound as above, InvalidArgument when it names a container. */
JTREE_C_API jtree_status_t jtree_reader_find_leaf(const jtree_reader_t* reader, const char* path,
                                                  uint32_t* leaf, jtree_error_t** err);

/* ---- leaves (InvalidArgument when `leaf` is out of range, for each of them) ---------------- */

/* The key path of a leaf's first node; allocated, free it with jtree_free(). */
JTREE_C_API jtree_status_t jtree_reader_leaf_path(const jtree_reader_t* reader, uint32_t leaf,
                                                  char** out, jtree_error_t** err);
JTREE_C_API jtree_status_t jtree_reader_leaf_kind(const jtree_reader_t* reader, uint32_t leaf,
                                                  jtree_leaf_kind_t* out, jtree_error_t** err);
JTREE_C_API jtree_status_t jtree_reader_leaf_storage(const jtree_reader_t* reader, uint32_t leaf,
                                                     jtree_storage_t* out, jtree_error_t** err);
/* The element type of a payload leaf (uint8 for text and bytes; JTREE_DTYPE_INVALID for
 * scalar leaves). Its name: jtree_dtype_name(). */
JTREE_C_API jtree_status_t jtree_reader_leaf_dtype(const jtree_reader_t* reader, uint32_t leaf,
                                                   jtree_dtype_t* out, jtree_error_t** err);
/* Number of dimensions (0 for scalars and 0-d arrays). */
JTREE_C_API jtree_status_t jtree_reader_leaf_rank(const jtree_reader_t* reader, uint32_t leaf,
                                                  size_t* out, jtree_error_t** err);
/* The shape into `dims[0 .. capacity)`; InvalidArgument when capacity < rank (dims may be
 * NULL when the rank is 0). */
JTREE_C_API jtree_status_t jtree_reader_leaf_shape(const jtree_reader_t* reader, uint32_t leaf,
                                                   uint64_t* dims, size_t capacity,
                                                   jtree_error_t** err);
/* Bytes a whole read of the leaf writes (elements x item size; 0 for scalar leaves). */
JTREE_C_API jtree_status_t jtree_reader_leaf_memory_bytes(const jtree_reader_t* reader,
                                                          uint32_t leaf, uint64_t* out,
                                                          jtree_error_t** err);
/* Bytes the leaf's payload takes in the file: the sum of its chunks' stored (compressed)
 * sizes, its inline bytes, or 0. */
JTREE_C_API jtree_status_t jtree_reader_leaf_stored_bytes(const jtree_reader_t* reader,
                                                          uint32_t leaf, uint64_t* out,
                                                          jtree_error_t** err);
/* Values of scalar leaves: int (InvalidArgument for ints beyond int64), float (also the real
 * part of a complex), bool (0 or 1). InvalidArgument for a leaf of another kind. */
JTREE_C_API jtree_status_t jtree_reader_leaf_int(const jtree_reader_t* reader, uint32_t leaf,
                                                 int64_t* out, jtree_error_t** err);
JTREE_C_API jtree_status_t jtree_reader_leaf_float(const jtree_reader_t* reader, uint32_t leaf,
                                                   double* out, jtree_error_t** err);
JTREE_C_API jtree_status_t jtree_reader_leaf_bool(const jtree_reader_t* reader, uint32_t leaf,
                                                  int* out, jtree_error_t** err);

/* ---- user metadata (string pairs saved with the tree) -------------------------------------- */

JTREE_C_API jtree_status_t jtree_reader_metadata_count(const jtree_reader_t* reader, size_t* out,
                                                       jtree_error_t** err);
/* Entry `index`: key and value, owned by the reader (valid until it is closed), each
 * NUL-terminated and with its length (values may hold NUL bytes: use the length). Any of the
 * four out-pointers may be NULL. InvalidArgument when index >= count. */
JTREE_C_API jtree_status_t jtree_reader_metadata_entry(const jtree_reader_t* reader,
                                                       size_t index, const char** key,
                                                       size_t* key_len, const char** value,
                                                       size_t* value_len, jtree_error_t** err);
/* Whether entry `index`'s value is UTF-8 text (*out 1: saved as text, format version 3, and
 * checked when the file was opened) or bytes (0). InvalidArgument when index >= count. */
JTREE_C_API jtree_status_t jtree_reader_metadata_is_text(const jtree_reader_t* reader,
                                                         size_t index, int* out,
                                                         jtree_error_t** err);

/* ============================== reading ====================================================== */

/* Reads go straight into the caller's buffer, in C order and the dtype's memory layout (see
 * jtree_dtype_item_size), fetching only the chunks the request overlaps, decoding them in
 * parallel (the options' threads) and verifying their checksums (unless turned off). The
 * buffer's size must be exactly what the request needs. Errors: InvalidArgument (a leaf out
 * of range or without payload, a box of the wrong rank or outside the array, a buffer of
 * another size), Corruption (naming the leaf's key path and the chunk), IOError and the
 * remote codes, Aborted. On error the buffer's contents are unspecified. */

/* The whole of payload leaf `leaf` into `dst` (`dst_bytes` == jtree_reader_leaf_memory_bytes).
 * Text and bytes leaves read as uint8. */
JTREE_C_API jtree_status_t jtree_reader_read(const jtree_reader_t* reader, uint32_t leaf,
                                             void* dst, size_t dst_bytes, jtree_error_t** err);
/* The box [begin[d], end[d]) per dimension d < rank of a payload leaf into `dst`
 * (`dst_bytes` == product of (end - begin) x item size). `rank` must be the leaf's; begin and
 * end may be NULL when it is 0. Text, bytes, custom and pickle leaves are uint8 arrays of rank
 * 1: a box of one is a byte range [begin[0], end[0]) of the payload (which may cut a UTF-8
 * character of a text leaf in two). */
JTREE_C_API jtree_status_t jtree_reader_read_box(const jtree_reader_t* reader, uint32_t leaf,
                                                 size_t rank, const uint64_t* begin,
                                                 const uint64_t* end, void* dst,
                                                 size_t dst_bytes, jtree_error_t** err);

/* One part of jtree_reader_read_many(): a whole leaf (begin and end NULL) or a box of it. */
typedef struct jtree_read_request_t {
  uint32_t leaf;
  size_t rank;            /* the leaf's rank when begin/end are given, else ignored */
  const uint64_t* begin;  /* NULL (with end NULL): the whole leaf */
  const uint64_t* end;
  void* dst;
  size_t dst_bytes;
} jtree_read_request_t;

/* Reads many leaves or boxes in one pass: their chunk ranges are coalesced, fetched and
 * decoded in parallel (far fewer requests than one read per leaf on remote files). All
 * requests are checked before any is read. Destinations must not overlap. `count` 0 is OK. */
JTREE_C_API jtree_status_t jtree_reader_read_many(const jtree_reader_t* reader,
                                                  const jtree_read_request_t* requests,
                                                  size_t count, jtree_error_t** err);

/* ---- a rank's part of a model (<jtree/shard.h>: the rules, names and kinds) ---- */

/* How a leaf is split over the ranks of a tensor- or expert-parallel server (jtree::SplitKind):
 * REPLICATED whole on every rank; COLUMN an even split of dimension 0 (a torch Linear's output
 * dimension: q/k/v, gate/up); ROW of dimension 1 (o, down); VOCAB dimension 0 in blocks of
 * ceil(n / world) rows (embeddings, lm_head); EXPERTS each rank's block of an MoE layer's
 * experts, whole. */
typedef enum jtree_split_kind_t {
  JTREE_SPLIT_REPLICATED = 0,
  JTREE_SPLIT_COLUMN = 1,
  JTREE_SPLIT_ROW = 2,
  JTREE_SPLIT_VOCAB = 3,
  JTREE_SPLIT_EXPERTS = 4
} jtree_split_kind_t;

/* One rule: leaves whose name matches `pattern` (a dotted suffix such as "q_proj.weight",
 * each component glob-matched; a leaf's name is its key path with '/' and '.' as separators)
 * are split as `kind` along `dim` (-1: the kind's own: 0, or 1 for ROW). */
typedef struct jtree_split_rule_t {
  const char* pattern;
  jtree_split_kind_t kind;
  int dim;
} jtree_split_rule_t;

/* A rank's part of every array leaf of a file (jtree::plan_shard). */
typedef struct jtree_shard_plan_t jtree_shard_plan_t;

/* The part of rank `rank` of `world` of every array leaf of the reader's file, from its
 * structure only. `rules` (first match wins) may be NULL with `num_rules` 0: the common decoder
 * models' names (Llama, Mistral, Qwen, Mixtral; jtree::default_split_rules). `expert_parallel`
 * non-zero: the leaves under an "experts" component are split by expert (each rank its block
 * of ceil(E / world) experts, whole), before any rule. Free *out with jtree_shard_plan_free.
 * Errors: InvalidArgument naming the file and the leaf (rank >= world, world 0, a COLUMN or
 * ROW dimension that does not divide evenly, a rule's dimension the leaf lacks, a NULL or
 * empty pattern, an unknown kind). */
JTREE_C_API jtree_status_t jtree_shard_plan_make(const jtree_reader_t* reader, uint32_t rank,
                                                 uint32_t world, int expert_parallel,
                                                 const jtree_split_rule_t* rules,
                                                 size_t num_rules, jtree_shard_plan_t** out,
                                                 jtree_error_t** err);
/* How many parts the plan has (one per array leaf of the file, in leaf order); 0 for NULL. */
JTREE_C_API size_t jtree_shard_plan_count(const jtree_shard_plan_t* plan);
/* Part `index`: its leaf's kind (`kind` may be NULL), whether this rank loads it (`load`, may
 * be NULL: 0 for another rank's expert), and the read request for the rank's part (`request`,
 * may be NULL): leaf, rank, begin and end (NULL for a whole leaf; arrays owned by the plan,
 * valid until it is freed), dst NULL and dst_bytes the bytes it needs. Set dst and pass the
 * requests of the parts to load to jtree_reader_read_many() or
 * jtree_reader_read_many_to_device(): one pass reads the rank's part of the whole model.
 * InvalidArgument when index >= count. */
JTREE_C_API jtree_status_t jtree_shard_plan_part(const jtree_shard_plan_t* plan, size_t index,
                                                 jtree_split_kind_t* kind, int* load,
                                                 jtree_read_request_t* request,
                                                 jtree_error_t** err);
/* Frees a plan (NULL is a no-op). */
JTREE_C_API void jtree_shard_plan_free(jtree_shard_plan_t* plan);

/* ---- loads into GPU memory (<jtree/device.h>, docs/gpu.md) ---- */

/* Whether a load to a device reads raw chunks with O_DIRECT (jtree::DirectIo): AUTO where the
 * file and its file system allow it and less than half of the file is in the page cache
 * (else buffered, the reason in jtree_device_stats_t), ON whatever the page cache holds, and
 * a file that cannot be read with O_DIRECT at all is NotSupported (naming the file and why)
 * instead of a buffered load, OFF never (everything through the page cache). */
typedef enum jtree_direct_io_t {
  JTREE_DIRECT_IO_AUTO = 0,
  JTREE_DIRECT_IO_ON = 1,
  JTREE_DIRECT_IO_OFF = 2
} jtree_direct_io_t;

/* The mode named "auto", "on" or "off" (exactly these: jtree::parse_direct_io), e.g. from a
 * command line or an environment variable. InvalidArgument naming the value otherwise. */
JTREE_C_API jtree_status_t jtree_direct_io_parse(const char* name, jtree_direct_io_t* out,
                                                 jtree_error_t** err);
/* The name of a mode ("auto", "on", "off"), a static string; NULL for a value that is none. */
JTREE_C_API const char* jtree_direct_io_name(jtree_direct_io_t mode);

/* Options of a load to a device (jtree::DeviceOptions, less the read options, which are the
 * reader's). Not copied: pass the handle to any number of loads, free it whenever convenient
 * after them. */
typedef struct jtree_device_options_t jtree_device_options_t;

/* A new handle with the defaults (device 0, 128 MiB of staging in 8 buffers, direct I/O
 * AUTO); NULL only when out of memory. Free with jtree_device_options_free(). */
JTREE_C_API jtree_device_options_t* jtree_device_options_create(void);
JTREE_C_API void jtree_device_options_free(jtree_device_options_t* opts);

/* The CUDA device ordinal the destinations are on (or reachable from); default 0.
 * InvalidArgument for a negative number (one past the machine's devices is InvalidArgument
 * from the load). */
JTREE_C_API jtree_status_t jtree_device_options_set_device(jtree_device_options_t* opts,
                                                           int device, jtree_error_t** err);
/* The pinned host memory of a load, all buffers together (`staging_bytes`: the most it pins
 * at once; smaller loads pin less), in `staging_buffers` buffers of equal size, each copied on
 * its own stream: 2 overlap reading with copying, more keep the copies busy when reads come
 * in bursts. Defaults 128 MiB and 8. InvalidArgument (nothing changed) unless staging_buffers
 * is 1 to 64, staging_bytes at most 1 TiB and each buffer at least 4096 bytes. */
JTREE_C_API jtree_status_t jtree_device_options_set_staging(jtree_device_options_t* opts,
                                                            uint64_t staging_bytes,
                                                            int staging_buffers,
                                                            jtree_error_t** err);
/* O_DIRECT reads of raw chunks (see jtree_direct_io_t); default AUTO. InvalidArgument for a
 * value that is none of the enum's. */
JTREE_C_API jtree_status_t jtree_device_options_set_direct_io(jtree_device_options_t* opts,
                                                              jtree_direct_io_t mode,
                                                              jtree_error_t** err);

/* What a load to a device did (jtree::DeviceStats): destination bytes read with O_DIRECT
 * into the staging buffers, destination bytes read through the page cache (buffered reads,
 * decoded chunks, inline leaves), and why O_DIRECT was not used (or stopped being used
 * mid-load): a NUL-terminated string allocated for the caller (free it with jtree_free()),
 * NULL when O_DIRECT served every piece that qualifies. */
typedef struct jtree_device_stats_t {
  uint64_t direct_bytes;
  uint64_t buffered_bytes;
  char* direct_io_note;
} jtree_device_stats_t;

/* Loads into GPU memory: jtree_reader_read_many() with each request's `dst` a CUDA device
 * address (cudaMalloc; managed or mapped memory works too) on the options' device. Chunks are
 * read and decoded into pinned host buffers (jtree_device_options_set_staging) and copied with
 * cudaMemcpyAsync while the next ones are read; raw chunks are read from local files with
 * O_DIRECT where allowed (jtree_device_options_set_direct_io). The data is on the device when
 * the call returns. `options` may be NULL (the defaults); the reader's read options apply.
 * `stats` may be NULL; when it is not, it is written however the call ends (an exception to
 * the Conventions: on failure it says what the load did before it stopped; zeros and a NULL
 * note when it did not start): free its direct_io_note before passing it again. Errors name
 * the file and the leaf; after one, nothing stays pinned. InvalidArgument (bad requests),
 * NotSupported in builds without CUDA and on machines without a CUDA device (and, with direct
 * I/O ON, for a file O_DIRECT cannot read). Thread-safe: to load shards onto several GPUs,
 * call it for each device on a thread of its own (one reader serves them all at once; each
 * call pins its own staging memory). */
JTREE_C_API jtree_status_t jtree_reader_read_many_to_device(const jtree_reader_t* reader,
                                                            const jtree_read_request_t* requests,
                                                            size_t count,
                                                            const jtree_device_options_t* options,
                                                            jtree_device_stats_t* stats,
                                                            jtree_error_t** err);
/* CUDA devices this process can use: 0 in builds without CUDA, without a driver or a device. */
JTREE_C_API int jtree_cuda_device_count(void);
/* Frees the pinned host buffers that loads to a device keep for the next load of the process
 * (pinning memory is slow; at most 256 MiB in all, shared by every device) and returns how
 * many bytes that gave back: call it once the loads are done, to hand that memory to others.
 * Loads running meanwhile keep theirs. 0 in builds without CUDA and when nothing is kept.
 * Thread-safe. (jtree::release_pinned_memory.) */
JTREE_C_API uint64_t jtree_release_pinned_memory(void);
/* Starts pinning, on a thread of its own, the staging buffers a large load with `options`
 * (NULL: the defaults) will use, and returns at once: pinning is slow (about 25 ms for the
 * default 128 MiB on an H200 host), so a server that calls this as soon as it knows a load is
 * coming, then allocates its device memory, finds the buffers pinned when it calls
 * jtree_reader_read_many_to_device(). The buffers are kept as the loads' own are (see
 * jtree_release_pinned_memory). NotSupported without CUDA or device; InvalidArgument for a
 * device number out of range. Thread-safe. (jtree::pin_staging_buffers_async.) */
JTREE_C_API jtree_status_t jtree_pin_staging_buffers_async(const jtree_device_options_t* options,
                                                           jtree_error_t** err);

/* The payload of a text, bytes, custom or pickle leaf (or a uint8 array), allocated by the
 * library with a NUL byte after it: `*data` (free with jtree_free()) and `*size`. The
 * allocation is bounded by the limits, whether the payload is inline in the header or in
 * chunks: ResourceExhausted for a payload over JTREE_LIMIT_MAX_LEAF_BYTES or
 * JTREE_LIMIT_MAX_TOTAL_BYTES (each call has a budget of its own). */
JTREE_C_API jtree_status_t jtree_reader_read_bytes(const jtree_reader_t* reader, uint32_t leaf,
                                                   char** data, size_t* size,
                                                   jtree_error_t** err);

/* ---- zero-copy views -------------------------------------------------------------------- */

/* A leaf's bytes read in place from the file's memory mapping, without a copy. */
typedef struct jtree_leaf_view_t jtree_leaf_view_t;

/* A view of leaf `leaf`'s bytes (its C-order array in memory layout) in the file's
 * copy-on-write mapping, when the file allows it: a local file opened with mmap on
 * (jtree_open_options_set_use_mmap, the default), and a leaf stored as its C-order array
 * (every chunk raw, chunks cutting only along leading dimensions, stored back to back): what
 * jtree writes for array leaves saved with JTREE_CODEC_RAW and not inline. A leaf saved with
 * JTREE_CODEC_ZSTD whose every chunk zstd could not shrink (such chunks are stored raw:
 * random or already compressed data often is) maps too when its chunks lie back to back in
 * order: always for a leaf of one chunk; for more, the parallel writer stores chunks as they
 * are compressed and promises no order. Any other leaf (a compressed chunk, 4-bit, inline in
 * the header, empty, a scalar, a remote file...) gives NotSupported, saying so: read it with
 * jtree_reader_read() instead. With checksum
 * verification on (the open options) every chunk is checked here, which also faults the pages
 * in: Corruption names the leaf and the chunk. InvalidArgument for a leaf out of range.
 * The view keeps the mapping alive until jtree_leaf_view_release(), even after the reader is
 * closed. Thread-safe.
 * Unsafe: if another program truncates the file while it is mapped, touching the lost pages
 * raises SIGBUS (every other read reports an IOError instead). Map only files nobody rewrites
 * in place (jtree's own saves replace files by renaming, which is safe). */
JTREE_C_API jtree_status_t jtree_reader_map_leaf(const jtree_reader_t* reader, uint32_t leaf,
                                                 jtree_leaf_view_t** out, jtree_error_t** err);
/* Views of many leaves at once (jtree::Reader::map_leaves): the checksums of all their chunks
 * are verified in parallel on the options' threads, which also faults the pages in on all of
 * them (faster than mapping leaves one by one and touching them on one thread). `views[i]`
 * receives a view of `leaves[i]`, or NULL where that leaf cannot be mapped (for the reasons
 * of jtree_reader_map_leaf). Release every non-NULL view. On error (InvalidArgument for a leaf
 * out of range, Corruption for a damaged chunk of any of them) no view is made and `views`
 * is left untouched. `count` 0 is OK. Thread-safe; same SIGBUS caveat. */
JTREE_C_API jtree_status_t jtree_reader_map_leaves(const jtree_reader_t* reader,
                                                   const uint32_t* leaves, size_t count,
                                                   jtree_leaf_view_t** views,
                                                   jtree_error_t** err);
/* A view of the box [begin[d], end[d]) per dimension d < rank of a leaf that
 * jtree_reader_map_leaf() would map (jtree::Reader::mapped_box), checking only the chunks the
 * box overlaps: a slice of a large leaf costs what the slice touches. The view's bytes run
 * from the box's first element to one past its last in the leaf's C-order layout, so the
 * box's elements lie at the leaf's strides (item size x the product of the later dimensions)
 * from jtree_leaf_view_data(); the bytes between them that the box does not select are part
 * of the view but neither verified nor paged in. An empty box gives a view of 0 bytes. `rank`
 * must be the leaf's; begin and end may be NULL when it is 0. Each call maps its range anew,
 * copy-on-write: a write into one view changes no other view, and never the file.
 * NotSupported for a leaf that cannot be mapped (see jtree_reader_map_leaf; read the box with
 * jtree_reader_read_box() instead); InvalidArgument for a leaf out of range or a box of the
 * wrong rank or out of bounds; Corruption naming the leaf and chunk. Released, owned and
 * thread-safe as jtree_reader_map_leaf()'s views; same SIGBUS caveat. */
JTREE_C_API jtree_status_t jtree_reader_map_box(const jtree_reader_t* reader, uint32_t leaf,
                                                size_t rank, const uint64_t* begin,
                                                const uint64_t* end, jtree_leaf_view_t** out,
                                                jtree_error_t** err);
/* The view's bytes and their number; NULL / 0 for a NULL view. Valid until the view is
 * released. The memory is a private copy-on-write mapping: writing through a cast pointer
 * changes this process's copy of the page, never the file (and costs a page copy). */
JTREE_C_API const void* jtree_leaf_view_data(const jtree_leaf_view_t* view);
JTREE_C_API size_t jtree_leaf_view_size(const jtree_leaf_view_t* view);
/* Releases a view; NULL is ignored. */
JTREE_C_API void jtree_leaf_view_release(jtree_leaf_view_t* view);

/* ============================== verification ================================================= */

/* The outcome of jtree_reader_verify(). Owned by the caller; free with
 * jtree_verify_report_free(). Strings it returns live as long as it. */
typedef struct jtree_verify_report_t jtree_verify_report_t;

/* Checks every checksum, decodes every chunk and accounts for every byte of the file
 * (jtree::Reader::verify). Returns OK when the check ran, whatever it found: damage is
 * reported in `*out` (ok flag, problems). Errors: IOError and the like when the file could
 * not be read, Aborted. */
JTREE_C_API jtree_status_t jtree_reader_verify(const jtree_reader_t* reader,
                                               jtree_verify_report_t** out,
                                               jtree_error_t** err);
/* 1 when no problem was found (0 for NULL). */
JTREE_C_API int jtree_verify_report_ok(const jtree_verify_report_t* report);
JTREE_C_API size_t jtree_verify_report_num_problems(const jtree_verify_report_t* report);
JTREE_C_API uint64_t jtree_verify_report_chunks_checked(const jtree_verify_report_t* report);
JTREE_C_API uint64_t jtree_verify_report_bytes_checked(const jtree_verify_report_t* report);
/* Problem `index` (< num_problems): its code (JTREE_INVALID_ARGUMENT out of range), where it
 * is ("leaf params/w chunk 3", "header"...) and its message (naming the file and key path);
 * "" out of range. */
JTREE_C_API jtree_status_t jtree_verify_report_problem_code(const jtree_verify_report_t* report,
                                                            size_t index);
JTREE_C_API const char* jtree_verify_report_problem_where(const jtree_verify_report_t* report,
                                                          size_t index);
JTREE_C_API const char* jtree_verify_report_problem_message(const jtree_verify_report_t* report,
                                                            size_t index);
JTREE_C_API void jtree_verify_report_free(jtree_verify_report_t* report);

/* ============================== writing ====================================================== */

/* A tree to save, described in preorder: open a container (begin_dict/begin_list), give each
 * dict item a key (jtree_builder_key / jtree_builder_key_int) before adding it, close
 * containers with jtree_builder_end(). Array leaves point at the caller's memory, which is
 * read only during jtree_save()/jtree_append() and must stay valid and unchanged until they
 * return. Misuse of the structure (a key outside a dict, a missing key, an unclosed
 * container) is reported by the first save as InvalidArgument naming the node's path; NULL
 * arguments and inconsistent sizes are reported at once. After the first save or append the
 * builder is frozen: it can be saved again (to other targets), but adding to it gives
 * InvalidArgument. Not thread-safe. */
typedef struct jtree_builder_t jtree_builder_t;

/* A new, empty builder; NULL only when out of memory. Free with jtree_builder_free(). */
JTREE_C_API jtree_builder_t* jtree_builder_create(void);
JTREE_C_API void jtree_builder_free(jtree_builder_t* builder);

/* The key of the next node in the open dict: a NUL-terminated string, or an integer. */
JTREE_C_API jtree_status_t jtree_builder_key(jtree_builder_t* builder, const char* key,
                                             jtree_error_t** err);
JTREE_C_API jtree_status_t jtree_builder_key_int(jtree_builder_t* builder, int64_t key,
                                                 jtree_error_t** err);
/* Opens a dict / a list; jtree_builder_end() closes the innermost open one. */
JTREE_C_API jtree_status_t jtree_builder_begin_dict(jtree_builder_t* builder,
                                                    jtree_error_t** err);
JTREE_C_API jtree_status_t jtree_builder_begin_list(jtree_builder_t* builder,
                                                    jtree_error_t** err);
JTREE_C_API jtree_status_t jtree_builder_end(jtree_builder_t* builder, jtree_error_t** err);
/* A None node. */
JTREE_C_API jtree_status_t jtree_builder_none(jtree_builder_t* builder, jtree_error_t** err);
/* An array leaf of `dtype` and shape `dims[0 .. rank)` whose elements (C order, memory
 * layout, native byte order) are at `data`. `data_bytes` must equal elements x item size
 * (InvalidArgument otherwise); `data` may be NULL only when that is 0. The memory is NOT
 * copied: it must stay valid and unchanged until the save that writes it returns. */
JTREE_C_API jtree_status_t jtree_builder_array(jtree_builder_t* builder, jtree_dtype_t dtype,
                                               size_t rank, const uint64_t* dims,
                                               const void* data, size_t data_bytes,
                                               jtree_error_t** err);
/* Scalar leaves. */
JTREE_C_API jtree_status_t jtree_builder_int(jtree_builder_t* builder, int64_t value,
                                             jtree_error_t** err);
JTREE_C_API jtree_status_t jtree_builder_float(jtree_builder_t* builder, double value,
                                               jtree_error_t** err);
JTREE_C_API jtree_status_t jtree_builder_bool(jtree_builder_t* builder, int value,
                                              jtree_error_t** err);
/* A text leaf (UTF-8, `size` bytes) and a bytes leaf; both are copied. */
JTREE_C_API jtree_status_t jtree_builder_str(jtree_builder_t* builder, const char* utf8,
                                             size_t size, jtree_error_t** err);
JTREE_C_API jtree_status_t jtree_builder_bytes(jtree_builder_t* builder, const void* data,
                                               size_t size, jtree_error_t** err);
/* For jtree_append(): a leaf that keeps leaf `old_leaf` of the file's current generation,
 * its bytes not rewritten. (In a plain save: InvalidArgument at save.) */
JTREE_C_API jtree_status_t jtree_builder_reuse(jtree_builder_t* builder, uint32_t old_leaf,
                                               jtree_error_t** err);
/* A user metadata entry (two NUL-terminated strings, copied). */
JTREE_C_API jtree_status_t jtree_builder_metadata(jtree_builder_t* builder, const char* key,
                                                  const char* value, jtree_error_t** err);
/* The same, its value marked as UTF-8 text (jtree_reader_metadata_is_text; readers with a
 * text type return it as text). A value that is not UTF-8 fails the save (InvalidArgument). */
JTREE_C_API jtree_status_t jtree_builder_text_metadata(jtree_builder_t* builder,
                                                       const char* key, const char* value,
                                                       jtree_error_t** err);

/* Options of jtree_save() and jtree_append() (jtree::WriteOptions). Not thread-safe while
 * modified; read only during the call that uses them. */
typedef struct jtree_write_options_t jtree_write_options_t;

typedef enum jtree_codec_t { JTREE_CODEC_RAW = 0, JTREE_CODEC_ZSTD = 1 } jtree_codec_t;

/* A new handle with the defaults (zstd level 1, 4 MiB chunks, all threads, overwrite a jtree
 * file, fsync); NULL only when out of memory. Free with jtree_write_options_free(). */
JTREE_C_API jtree_write_options_t* jtree_write_options_create(void);
JTREE_C_API void jtree_write_options_free(jtree_write_options_t* opts);

/* Compression: JTREE_CODEC_RAW stores chunks as they are in memory (the fastest saves and
 * loads, and what jtree_reader_map_leaf() can map), JTREE_CODEC_ZSTD at `level` (ignored for
 * raw; zstd's range, negative levels are the fast ones). */
JTREE_C_API jtree_status_t jtree_write_options_set_compression(jtree_write_options_t* opts,
                                                               jtree_codec_t codec, int level,
                                                               jtree_error_t** err);
/* Target raw bytes per chunk (> 0; default 4 MiB): the unit of partial reads and of
 * parallelism. */
JTREE_C_API jtree_status_t jtree_write_options_set_chunk_bytes(jtree_write_options_t* opts,
                                                               uint64_t bytes,
                                                               jtree_error_t** err);
/* A file laid out for tensor-parallel serving on `world` ranks (jtree::WriteOptions::
 * shard_layout): every array leaf the split rules split (`rules` as jtree_shard_plan_make's:
 * NULL with `num_rules` 0 for the common decoder models' names) gets a chunk grid cut at the
 * edges of every rank's part, so that a rank of that world or of any divisor of it reads whole
 * chunks only. `world` 0 with no rules: no layout (the default). A leaf the rules split that
 * cannot be split over `world` (a COLUMN or ROW dimension that does not divide) fails the save
 * with InvalidArgument naming it. */
JTREE_C_API jtree_status_t jtree_write_options_set_shard_layout(jtree_write_options_t* opts,
                                                                uint32_t world,
                                                                int expert_parallel,
                                                                const jtree_split_rule_t* rules,
                                                                size_t num_rules,
                                                                jtree_error_t** err);
/* Payloads up to this many stored bytes go into the header instead of chunks (default 512;
 * 0 puts every array payload in chunks). */
JTREE_C_API jtree_status_t jtree_write_options_set_inline_threshold(jtree_write_options_t* opts,
                                                                    uint64_t bytes,
                                                                    jtree_error_t** err);
/* Compression threads (0, the default: hardware threads). */
JTREE_C_API jtree_status_t jtree_write_options_set_threads(jtree_write_options_t* opts,
                                                           int threads, jtree_error_t** err);
/* Replace an existing jtree file at the target (default 1; 0: AlreadyExists). A file that is
 * not a jtree file is never replaced. */
JTREE_C_API jtree_status_t jtree_write_options_set_overwrite(jtree_write_options_t* opts,
                                                             int overwrite, jtree_error_t** err);
/* fsync before the commit (default 1; 0 is faster and not durable across power loss). */
JTREE_C_API jtree_status_t jtree_write_options_set_sync(jtree_write_options_t* opts, int sync,
                                                        jtree_error_t** err);
/* The remote settings for s3:// targets (copied; NULL restores the defaults). */
JTREE_C_API jtree_status_t jtree_write_options_set_remote(jtree_write_options_t* opts,
                                                          const jtree_remote_options_t* remote,
                                                          jtree_error_t** err);

/* What a save or append did (jtree::WriteStats). */
typedef struct jtree_write_stats_t {
  uint64_t leaves;
  uint64_t chunks;        /* chunks written by this call */
  uint64_t raw_bytes;     /* payload bytes written, before encoding */
  uint64_t stored_bytes;  /* chunk bytes written, after encoding */
  uint64_t file_size;     /* the committed file's size */
  uint64_t generation;
} jtree_write_stats_t;

/* Saves the builder's tree as a new file at a local path or s3:// URL, atomically: on any
 * failure nothing is committed and a previous file at the target is left intact. `options`
 * and `stats` may be NULL. Reads the arrays' memory during the call. Errors: InvalidArgument
 * (the structure, naming the node's path; reuse leaves; a target that is a directory),
 * AlreadyExists (overwrite off, or a foreign file at the target), NotFound (the target's
 * directory does not exist: it is not created), IOError, PermissionDenied, NotSupported (a
 * URL scheme this build cannot write). Thread-safe for different builders; saving one builder
 * from two threads at once is not. */
JTREE_C_API jtree_status_t jtree_save(jtree_builder_t* builder, const char* path_or_url,
                                      const jtree_write_options_t* options,
                                      jtree_write_stats_t* stats, jtree_error_t** err);

/* Adds a generation to the existing file at `path` (local or s3://): the builder's tree is
 * the complete new tree, its reuse leaves keep the old generation's data, the others are
 * written after the file's end. An interrupted append leaves the previous generation
 * readable. Readers already open keep reading the generation they opened. Appends to one
 * file must not run concurrently. Errors: as jtree_save(), plus NotFound and Corruption
 * (of the existing file), InvalidArgument (a reuse leaf out of range). */
JTREE_C_API jtree_status_t jtree_append(jtree_builder_t* builder, const char* path,
                                        const jtree_write_options_t* options,
                                        jtree_write_stats_t* stats, jtree_error_t** err);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* JTREE_C_H_ */
