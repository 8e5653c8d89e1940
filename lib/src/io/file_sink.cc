// Local-file Sinks: a new file written beside its target and renamed over it on commit, and
// an existing file appended to in place.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "io/committing_sink.h"
#include "io/posix_file.h"
#include "io/temp_files.h"
#include "jtree/io.h"

namespace jtree {
namespace {

// Appends smaller than this are gathered into one write(); larger ones are written directly.
constexpr size_t kBufferBytes = size_t{1} << 20;
// Attempts at an unused temporary name (64 random bits: a collision means something odd).
constexpr int kTempNameAttempts = 16;

int open_retry(const char* path, int flags, mode_t mode = 0) {
  int fd;
  do {
    fd = ::open(path, flags, mode);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

int fsync_retry(int fd) {
  int rc;
  do {
    rc = ::fsync(fd);
  } while (rc != 0 && errno == EINTR);
  return rc;
}

int ftruncate_retry(int fd, uint64_t size) {
  int rc;
  do {
    rc = ::ftruncate(fd, static_cast<off_t>(size));
  } while (rc != 0 && errno == EINTR);
  return rc;
}

// Writes all of `data` at `offset`, through short writes and interrupted calls.
int pwrite_all(int fd, uint64_t offset, std::span<const std::byte> data) {
  uint64_t done = 0;
  while (done < data.size()) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(data.size() - done, kMaxIoBytes));
    const ssize_t n = ::pwrite(fd, data.data() + done, want, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;  // no progress and no error: do not spin
    done += static_cast<uint64_t>(n);
  }
  return 0;
}

Status sink_closed(const std::string& path) {
  return Status::invalid_argument(path + ": sink is closed");
}

// What both file sinks share: the append buffer, the write position, the statistics, and the
// first write error, which sticks (after a failed write the file has a hole, so nothing
// further may be written or committed).
class BufferedFileSink : public io::CommittingSink {
 public:
  const std::string& name() const override { return path_; }
  uint64_t position() const override { return flushed_ + buffer_.size(); }

  Status append(std::span<const std::byte> data) override {
    JTREE_RETURN_IF_ERROR(check_open());
    if (data.size() >= kBufferBytes) {
      // Large appends skip the copy: the buffer exists only to batch small ones.
      JTREE_RETURN_IF_ERROR(flush());
      JTREE_RETURN_IF_ERROR(write_at(flushed_, data));
      flushed_ += data.size();
      return Status::success();
    }
    if (buffer_.size() + data.size() > kBufferBytes) JTREE_RETURN_IF_ERROR(flush());
    buffer_.insert(buffer_.end(), data.begin(), data.end());
    return Status::success();
  }

  // Between local files, copy_file_range: the kernel copies (or shares extents, on file
  // systems that can), and the bytes never enter this process.
  Status append_from(std::string_view path_or_url, uint64_t offset, uint64_t size) override {
    JTREE_RETURN_IF_ERROR(check_open());
    std::string src_path;
    if (!is_local_path(path_or_url, &src_path)) return Sink::append_from(path_or_url, offset, size);
    JTREE_RETURN_IF_ERROR(flush());
    UniqueFd src(open_retry(src_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!src.valid()) return errno_status(src_path, "open", errno);
    loff_t in_off = static_cast<loff_t>(offset);
    loff_t out_off = static_cast<loff_t>(flushed_);
    uint64_t done = 0;
    while (done < size) {
      const size_t want = static_cast<size_t>(std::min<uint64_t>(size - done, kMaxIoBytes));
      const ssize_t n = ::copy_file_range(src.get(), &in_off, fd_.get(), &out_off, want, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP)) {
        // Not possible between these file systems: copy through this process.
        flushed_ += done;
        return Sink::append_from(path_or_url, offset + done, size - done);
      }
      if (n < 0) return fail(errno_status(path_, "copy_file_range from " + src_path, errno));
      if (n == 0) {
        return fail(Status::io_error(src_path + ": unexpected end of file at offset " +
                                    std::to_string(offset + done)));
      }
      done += static_cast<uint64_t>(n);
      write_requests_.fetch_add(1, std::memory_order_relaxed);
      bytes_written_.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
    }
    flushed_ += size;
    return Status::success();
  }

  IoStats stats() const override {
    IoStats s;
    s.write_requests = write_requests_.load(std::memory_order_relaxed);
    s.bytes_written = bytes_written_.load(std::memory_order_relaxed);
    return s;
  }

 protected:
  BufferedFileSink(std::string path, UniqueFd fd, uint64_t start, bool sync)
      : path_(std::move(path)), fd_(std::move(fd)), sync_(sync), flushed_(start) {
    buffer_.reserve(kBufferBytes);
  }

  // OK while the sink accepts writes; otherwise why not.
  Status check_open() const {
    if (closed_) return sink_closed(path_);
    return error_;
  }

  Status write_error() override { return error_; }

  // Writes out the buffered appends.
  Status flush() {
    if (buffer_.empty()) return Status::success();
    JTREE_RETURN_IF_ERROR(write_at(flushed_, buffer_));
    flushed_ += buffer_.size();
    buffer_.clear();
    return Status::success();
  }

  Status write_at(uint64_t offset, std::span<const std::byte> data) {
    if (data.empty()) return Status::success();
    write_requests_.fetch_add(1, std::memory_order_relaxed);
    const int err = pwrite_all(fd_.get(), offset, data);
    if (err != 0) return fail(errno_status(path_, "write", err));
    bytes_written_.fetch_add(data.size(), std::memory_order_relaxed);
    return Status::success();
  }

  // fsync when the sink was asked for durability.
  Status sync_data() {
    if (sync_ && fsync_retry(fd_.get()) != 0) return fail(errno_status(path_, "fsync", errno));
    return Status::success();
  }

  Status fail(Status st) {
    if (error_.ok()) error_ = st;
    return st;
  }

  // Drops buffered appends (on abort).
  void discard_buffer() { buffer_.clear(); }

  const std::string path_;
  UniqueFd fd_;
  const bool sync_;

 private:
  Status error_;
  std::vector<std::byte> buffer_;
  uint64_t flushed_;  // file offset where buffer_ starts
  std::atomic<uint64_t> write_requests_{0};
  std::atomic<uint64_t> bytes_written_{0};
};

// A new file, written under a temporary name in the target's directory (so that the final
// rename stays within one file system and is atomic).
class NewFileSink final : public BufferedFileSink {
 public:
  NewFileSink(std::string path, std::string temp_path, std::string dir, UniqueFd fd,
              UniqueFd lock, const SinkOptions& options)
      : BufferedFileSink(std::move(path), std::move(fd), 0, options.sync),
        lock_(std::move(lock)),
        temp_path_(std::move(temp_path)),
        dir_(std::move(dir)),
        overwrite_(options.overwrite) {}
  ~NewFileSink() override { abort(); }

  Status sync() override {
    JTREE_RETURN_IF_ERROR(check_open());
    JTREE_RETURN_IF_ERROR(flush());
    return sync_data();
  }

  void abort() noexcept override {
    if (closed_) return;
    closed_ = true;
    fd_.reset();
    if (!published_) ::unlink(temp_path_.c_str());
    lock_.reset();  // only once the name is gone (temp_files.h)
  }

 private:
  // Flush, fsync, close, rename over the target, fsync the directory.
  Status finish() override {
    JTREE_RETURN_IF_ERROR(flush());
    JTREE_RETURN_IF_ERROR(sync_data());
    if (const int err = fd_.close(); err != 0) return errno_status(path_, "close", err);
    // Opened before the rename, so that failing to open it leaves the target untouched.
    UniqueFd dir;
    if (sync_) {
      dir = UniqueFd(open_retry(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      if (!dir.valid()) return errno_status(path_, "open directory " + dir_, errno);
    }
    JTREE_RETURN_IF_ERROR(publish());
    published_ = true;
    lock_.reset();  // the temporary name is gone: nothing left for a cleaner to judge
    // The rename is durable only once the directory is. Failing here cannot be undone: the
    // new file is already in place.
    if (sync_ && fsync_retry(dir.get()) != 0) {
      return errno_status(path_, "fsync directory " + dir_, errno);
    }
    return Status::success();
  }

  // Moves the temporary file to its final name.
  Status publish() {
    if (overwrite_) {
      if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
        return errno_status(path_, "rename", errno);
      }
      return Status::success();
    }
    // The target may have appeared since the sink was created: never replace it.
    if (::renameat2(AT_FDCWD, temp_path_.c_str(), AT_FDCWD, path_.c_str(), RENAME_NOREPLACE) ==
        0) {
      return Status::success();
    }
    if (errno != EINVAL && errno != ENOSYS) return errno_status(path_, "rename", errno);
    // A file system without RENAME_NOREPLACE: link() refuses to replace an existing name too.
    if (::link(temp_path_.c_str(), path_.c_str()) != 0) return errno_status(path_, "link", errno);
    // The target is complete; failing to remove the second name only leaves a stray file.
    ::unlink(temp_path_.c_str());
    return Status::success();
  }

  // Holds the temporary file's lock (temp_files.h) until its name is renamed or removed: fd_
  // closes earlier, in finish(), to see close()'s errors before the rename.
  UniqueFd lock_;
  const std::string temp_path_;
  const std::string dir_;
  const bool overwrite_;
  bool published_ = false;  // the temporary file now has the target's name
};

// An existing file, appended to in place from `keep_bytes` on.
class AppendFileSink final : public BufferedFileSink {
 public:
  AppendFileSink(std::string path, UniqueFd fd, uint64_t keep_bytes, bool sync)
      : BufferedFileSink(std::move(path), std::move(fd), keep_bytes, sync),
        keep_bytes_(keep_bytes) {}
  ~AppendFileSink() override { abort(); }

  bool can_patch() const override { return true; }

  Status patch(uint64_t offset, std::span<const std::byte> data) override {
    JTREE_RETURN_IF_ERROR(check_open());
    // Patched bytes may still sit in the buffer; after the flush all of them are in the file.
    JTREE_RETURN_IF_ERROR(flush());
    const uint64_t end = position();
    if (offset > end || data.size() > end - offset) {
      return Status::invalid_argument(path_ + ": patch of " + std::to_string(data.size()) +
                                     " bytes at offset " + std::to_string(offset) +
                                     " goes beyond the written size " + std::to_string(end));
    }
    return write_at(offset, data);
  }

  Status sync() override {
    JTREE_RETURN_IF_ERROR(check_open());
    JTREE_RETURN_IF_ERROR(flush());
    return sync_data();
  }

  // The bytes are already in place: flush, fsync, close.
  Status finish() override {
    JTREE_RETURN_IF_ERROR(flush());
    JTREE_RETURN_IF_ERROR(sync_data());
    if (const int err = fd_.close(); err != 0) return errno_status(path_, "close", err);
    return Status::success();
  }

  // Best effort (nothing can be reported): cut the file back to its committed size.
  void abort() noexcept override {
    if (closed_) return;
    closed_ = true;
    discard_buffer();
    if (fd_.valid()) {
      (void)ftruncate_retry(fd_.get(), keep_bytes_);
      if (sync_) (void)fsync_retry(fd_.get());
      fd_.reset();
    } else {
      // commit() failed in close(): the descriptor is gone, the path still names the file.
      (void)::truncate(path_.c_str(), static_cast<off_t>(keep_bytes_));
    }
  }

 private:
  const uint64_t keep_bytes_;
};

// 16 random hex digits for a temporary name.
std::string random_hex16() {
  std::random_device rd;
  const uint64_t v = (static_cast<uint64_t>(rd()) << 32) | static_cast<uint64_t>(rd());
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

struct TempFile {
  std::string path;
  UniqueFd fd;
  UniqueFd lock;  // holds its lock (temp_files.h)
};

// Creates `.<basename>.tmp-<16 hex>` beside the target, and locks it so that no cleaner of
// stale temporary files removes it while it is written. O_EXCL: never reuse someone's file.
Result<TempFile> create_temp_file(const std::string& path, size_t base_start) {
  const std::string prefix = path.substr(0, base_start) + temp_files::prefix(path.substr(base_start));
  for (int attempt = 0;; ++attempt) {
    TempFile temp;
    temp.path = prefix + random_hex16();
    temp.fd = UniqueFd(
        open_retry(temp.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666));
    if (temp.fd.valid()) {
      auto claimed = temp_files::claim(temp.fd.get(), temp.path, &temp.lock);
      if (!claimed.ok()) {
        temp.fd.reset();
        ::unlink(temp.path.c_str());
        return claimed.status();
      }
      // Lost to a cleaner that took it for a dead writer's file (between our open and our
      // lock): it removes the file; we try another name.
      if (*claimed != temp_files::Claim::kLost) return temp;
      if (attempt + 1 == kTempNameAttempts) {
        return Status::io_error(path + ": create temporary file: lost " +
                               std::to_string(kTempNameAttempts) +
                               " names in a row to cleaners of stale temporary files");
      }
      continue;
    }
    if (errno != EEXIST || attempt + 1 == kTempNameAttempts) {
      return errno_status(path, "create temporary file " + temp.path, errno);
    }
  }
}

}  // namespace

Result<std::unique_ptr<Sink>> create_file_sink(const std::string& path,
                                               const SinkOptions& options) {
  const size_t slash = path.rfind('/');
  const size_t base_start = slash == std::string::npos ? 0 : slash + 1;
  const std::string base = path.substr(base_start);
  if (base.empty() || base == "." || base == "..") {
    return Status::invalid_argument(path + ": not a file name");
  }
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));

  struct stat st;
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (!exists && errno != ENOENT) return errno_status(path, "stat", errno);
  if (exists && !S_ISREG(st.st_mode)) {
    return Status::invalid_argument(path + ": not a regular file");
  }
  if (exists && !options.overwrite) return errno_status(path, "create", EEXIST);

  // What killed writers of this target left (best effort: a failure here is not this save's).
  (void)temp_files::remove_stale(dir, base);
  // A missing directory fails here, with NotFound.
  JTREE_ASSIGN_OR_RETURN(TempFile temp, create_temp_file(path, base_start));
  // The replacement keeps the permissions of the file it replaces (not umask's defaults).
  if (exists && ::fchmod(temp.fd.get(), st.st_mode & 0777) != 0) {
    Status st_err = errno_status(path, "chmod " + temp.path, errno);
    temp.fd.reset();
    ::unlink(temp.path.c_str());
    return st_err;
  }
  return std::unique_ptr<Sink>(
      new NewFileSink(path, std::move(temp.path), dir, std::move(temp.fd), std::move(temp.lock),
                      options));
}

Result<std::unique_ptr<Sink>> open_file_append_sink(const std::string& path,
                                                    uint64_t keep_bytes, bool sync) {
  UniqueFd fd(open_retry(path.c_str(), O_RDWR | O_CLOEXEC));
  if (!fd.valid()) return errno_status(path, "open", errno);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return errno_status(path, "stat", errno);
  if (!S_ISREG(st.st_mode)) return Status::invalid_argument(path + ": not a regular file");
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < keep_bytes) {
    return Status::corruption(path + ": file is shorter than its committed size (" +
                              std::to_string(size) + " < " + std::to_string(keep_bytes) + ")");
  }
  // Bytes past keep_bytes are the remains of an interrupted append.
  if (size > keep_bytes && ftruncate_retry(fd.get(), keep_bytes) != 0) {
    return errno_status(path, "truncate", errno);
  }
  return std::unique_ptr<Sink>(new AppendFileSink(path, std::move(fd), keep_bytes, sync));
}

}  // namespace jtree
