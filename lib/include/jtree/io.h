// jtree/io.h — storage backends: random-access Sources and append-only Sinks.
//
// The reader and writer see storage only through these two interfaces, so every backend
// (local files here; HTTP(S) and S3 elsewhere) and every decorator (statistics, retries,
// fault injection) works with all of jtree. A path or URL picks the backend:
// open_source("ckpt.jtree"), open_source("https://host/ckpt.jtree"), ...
//
// Error messages from a backend start with its name (the path or URL).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "jtree/export.h"
#include "jtree/options.h"
#include "jtree/status.h"

namespace jtree {

/// One range to read: `dst.size()` bytes starting at file offset `offset`.
struct JTREE_API ReadRange {
  uint64_t offset = 0;
  std::span<std::byte> dst;
};

/// Counters kept by a backend since it was opened.
struct JTREE_API IoStats {
  uint64_t read_requests = 0;  ///< read calls reaching the storage (one per range or request)
  uint64_t bytes_read = 0;
  uint64_t retries = 0;
  uint64_t write_requests = 0;
  uint64_t bytes_written = 0;
};

/// The first and last bytes of an object, fetched together when opening a file.
struct JTREE_API HeadTail {
  uint64_t size = 0;             ///< the object's total size
  std::vector<std::byte> head;   ///< bytes [0, min(head, size))
  std::vector<std::byte> tail;   ///< bytes [size - min(tail, size), size)
};

/// A whole local file mapped into memory copy-on-write (MAP_PRIVATE): readable and writable,
/// and a write changes only this process's copy of the page it touches, never the file. Pages
/// cost nothing until touched. Unmapped when the last shared_ptr to it goes, whatever became
/// of the Source (arrays viewing it may outlive the Reader).
/// Unsafe if another program truncates or rewrites the file in place while it is mapped:
/// touching a page past the new end raises SIGBUS, and untouched pages show the new bytes
/// (jtree's own saves, appends and compactions never do either: they write a new file and
/// rename it over the old one, or add bytes after the end).
class JTREE_API MappedFile {
 public:
  virtual ~MappedFile() = default;
  /// The file's bytes at the time it was mapped (the mapping's length).
  virtual std::span<std::byte> bytes() const = 0;
};

/// Random-access reads of one immutable object. Implementations are thread-safe: many
/// threads may call read() at once.
class JTREE_API Source {
 public:
  virtual ~Source() = default;

  /// The path or URL, used in every message.
  virtual const std::string& name() const = 0;
  /// The object's size in bytes.
  virtual Result<uint64_t> size() = 0;
  /// Fills every range completely, or returns an error (the ranges' contents are then
  /// unspecified). Ranges past the end of the object are an IOError.
  virtual Status read(std::span<const ReadRange> ranges) = 0;
  /// The head and tail of the object in as few round trips as the backend allows (remote
  /// backends issue both at once, the tail as a suffix range). Default: size() then read().
  virtual Result<HeadTail> read_head_tail(uint64_t head_bytes, uint64_t tail_bytes);
  /// The whole object mapped into memory, when the backend offers that (local files);
  /// empty otherwise. Valid as long as the Source lives.
  virtual std::span<const std::byte> mapping() const { return {}; }
  /// The same mapping as a shared, copy-on-write MappedFile (local files mapped with
  /// OpenOptions::use_mmap); null when the backend has none.
  virtual std::shared_ptr<const MappedFile> mapped_file() const { return nullptr; }
  /// A new copy-on-write mapping of bytes [offset, offset + size) alone (bytes() is exactly
  /// that range), with pages of its own: a write through it is seen by no other mapping, the
  /// shared one above included (Reader::mapped_box hands one out per slice, so that writing
  /// into one slice never changes another, nor what later reads verify). Null when the
  /// backend has no mapping (as mapped_file()), the range is empty or outside the object, or
  /// mmap fails (the address space or the process's mapping count is short): read instead.
  virtual std::shared_ptr<const MappedFile> map_range(uint64_t offset, uint64_t size) const {
    (void)offset;
    (void)size;
    return nullptr;
  }
  /// Counters since opening.
  virtual IoStats stats() const = 0;
  /// How many reads this backend wants in flight at once: 0 means "as many as CPU threads"
  /// (local files); remote backends, whose reads wait on the network, ask for more.
  virtual int preferred_concurrency() const { return 0; }
  /// The largest fetch this backend wants per request when the caller decodes what it fetched
  /// (0: no preference). The Reader caps ReadOptions::max_fetch_bytes with it: remote backends
  /// ask for a few MiB, so that decoding overlaps the transfers instead of waiting for them.
  virtual uint64_t preferred_fetch_bytes() const { return 0; }
  /// The version of the object these reads are pinned to (an HTTP/S3 ETag, as first seen);
  /// empty when the backend has none (local files). Lets a writer that copies the object
  /// (an append to S3) insist on the same version.
  virtual std::string etag() const { return {}; }
};

/// A sequential writer of one object that becomes visible only on commit(). Not thread-safe:
/// one thread at a time (the writer serializes its appends).
class JTREE_API Sink {
 public:
  /// Destroying an uncommitted sink aborts it.
  virtual ~Sink() = default;

  virtual const std::string& name() const = 0;
  /// The file offset the next append() writes at.
  virtual uint64_t position() const = 0;
  virtual Status append(std::span<const std::byte> data) = 0;
  /// Makes everything appended so far durable (fsync). A no-op where commit() does it.
  virtual Status sync() = 0;
  /// Whether patch() is available (in-place appends to local files).
  virtual bool can_patch() const { return false; }
  /// Overwrites bytes already written (only below position()); NotSupported unless
  /// can_patch(). Patches of bytes that existed before the sink was opened (an append sink's
  /// commit slots) are permanent: abort() cannot undo them, so a writer patches only bytes
  /// whose new value is valid whatever happens next.
  virtual Status patch(uint64_t offset, std::span<const std::byte> data);
  /// Appends `size` bytes of another object (a path or URL), starting at `offset`, without
  /// passing them through this process where the backend can copy on its side
  /// (copy_file_range between local files; server-side copies on object stores). Default: read
  /// through this process in pieces.
  virtual Status append_from(std::string_view path_or_url, uint64_t offset, uint64_t size);
  /// Makes the object visible atomically; afterwards the sink accepts nothing more. An error
  /// after the object became visible (the directory's fsync failing after the rename) is still
  /// reported, though the new object has replaced the old one.
  virtual Status commit() = 0;
  /// Discards everything: the previous object (if any) is left as it was. Idempotent.
  virtual void abort() noexcept = 0;
  virtual IoStats stats() const = 0;
};

/// Opens a path or URL for reading. Local paths (and file:// URLs) are supported by every
/// build; other schemes return NotSupported until their backend is compiled in.
JTREE_API Result<std::shared_ptr<Source>> open_source(std::string_view path_or_url,
                                                      const OpenOptions& options = {});

/// Opens a local file for reading; `use_mmap` maps it (falls back to pread if mapping fails).
JTREE_API Result<std::shared_ptr<Source>> open_file_source(const std::string& path,
                                                          bool use_mmap = true);

/// A Source over bytes in memory (tests, embedded files). `name` is used in messages.
JTREE_API std::shared_ptr<Source> memory_source(std::vector<std::byte> bytes,
                                                std::string name = "<memory>");

/// How a new object is created.
struct JTREE_API SinkOptions {
  bool overwrite = true;  ///< replace an existing object; false gives AlreadyExists
  bool sync = true;       ///< fsync the data and the directory on commit
  RemoteOptions remote;   ///< s3:// sinks: credentials, endpoint, part size, retries...
};

/// Creates a sink for a new local file: writes go to a temporary file beside `path`, which
/// commit() fsyncs and renames over `path`; abort() (or a failure) removes it, leaving any
/// previous file untouched.
JTREE_API Result<std::unique_ptr<Sink>> create_file_sink(const std::string& path,
                                                         const SinkOptions& options = {});

/// Opens an existing local file for appending in place: the file is truncated to
/// `keep_bytes` (dropping the remains of an interrupted append) and writes continue there.
/// patch() is available. abort() truncates back to `keep_bytes`.
JTREE_API Result<std::unique_ptr<Sink>> open_file_append_sink(const std::string& path,
                                                              uint64_t keep_bytes,
                                                              bool sync = true);

/// Creates a sink for a path or URL (dispatch by scheme, as open_source).
JTREE_API Result<std::unique_ptr<Sink>> create_sink(std::string_view path_or_url,
                                                    const SinkOptions& options = {});

/// Opens an object for adding bytes after its first `keep_bytes` (an append): a local file is
/// appended to in place (open_file_append_sink: patch() available); an s3:// object, which
/// cannot change in place, gets a new version on commit() whose first `keep_bytes` are copied
/// from the old one on the server side (UploadPartCopy; downloaded and uploaded again when
/// shorter than S3's 5 MiB minimum part), pinned to `expected_etag` when given. abort() leaves
/// the object as it was. Other schemes: NotSupported.
JTREE_API Result<std::unique_ptr<Sink>> open_append_sink(std::string_view path_or_url,
                                                         uint64_t keep_bytes,
                                                         const SinkOptions& options = {},
                                                         std::string_view expected_etag = {});

/// Deletes an object (a local file, or a remote object where the backend allows it), with the
/// remote backends' `options` (unused for local files). NotFound when it does not exist.
JTREE_API Status remove_object(std::string_view path_or_url, const RemoteOptions& options = {});

/// Removes what killed saves of the local file `path` left beside it: temporary files named
/// `.<name>.tmp-<16 hex digits>` that no running save holds (a save holds a lock on its
/// temporary file until it is renamed over the target; the kernel drops the lock when the
/// process dies, so this is safe while other processes save to the same directory). When
/// `path` is a directory, the temporary files of every target in it. Every local save does
/// this for its own target before it starts. Returns how many files were removed; files
/// that cannot be opened or locked (another user's, a file system without flock()) are left.
/// For an s3:// target (builds with the S3 backend): aborts every incomplete multipart upload
/// of the target and of its segments ("<key>.seg-NNNNN-of-NNNNN") -- what killed writers leave
/// there -- and returns how many (a save or commit to the target aborts those older than
/// itself on its own). Only with no writer of that target running: a running one's upload is
/// aborted too, and its save then fails.
/// `options`: the S3 backend's settings (endpoint, credentials...; unused for local files).
/// Errors: NotFound when the directory does not exist; NotSupported for other URLs.
JTREE_API Result<uint64_t> remove_stale_temp_files(std::string_view path,
                                                   const RemoteOptions& options = {});

/// True when `path_or_url` names a local file (no scheme, or file://); `local_path` receives
/// the file system path (file:// URLs percent-decoded, "file://localhost/x" is "/x").
JTREE_API bool is_local_path(std::string_view path_or_url, std::string* local_path = nullptr);

}  // namespace jtree
