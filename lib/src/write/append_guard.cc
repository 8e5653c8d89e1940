// AppendLock and check_append_base (append_guard.h).
#include "write/append_guard.h"

#include <sys/file.h>
#include <sys/stat.h>

#include "jtree/io.h"

namespace jtree {

Result<AppendLock> AppendLock::acquire(std::string_view target) {
  AppendLock lock;
  std::string local;
  if (!is_local_path(target, &local)) return lock;
  // O_RDONLY is enough for flock(); the sink writes through its own descriptor (flock locks
  // belong to this open file description, so the sink's descriptor is not blocked by it).
  UniqueFd fd(::open(local.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return errno_status(local, "open", errno);
  int rc;
  do {
    rc = ::flock(fd.get(), LOCK_EX);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    // A file system without flock() (some network ones): appends are then only as safe as
    // the generation check makes them.
    if (errno != ENOLCK && errno != EOPNOTSUPP) return errno_status(local, "lock for append", errno);
    return lock;
  }
  lock.path_ = std::move(local);
  lock.fd_ = std::move(fd);
  return lock;
}

Status AppendLock::still_current() const {
  if (!fd_.valid()) return Status::success();
  struct stat held, now;
  if (::fstat(fd_.get(), &held) != 0) return errno_status(path_, "stat", errno);
  if (::stat(path_.c_str(), &now) != 0) return errno_status(path_, "stat", errno);
  if (held.st_dev != now.st_dev || held.st_ino != now.st_ino) {
    return Status::aborted(path_ + ": the file was replaced while the append started (a save "
                                   "or compaction renamed a new file over it); nothing written");
  }
  return Status::success();
}

Status check_append_base(const Reader& reader, const WriteOptions& options,
                         std::string_view target) {
  if (!options.append_base) return Status::success();
  const AppendBase& want = *options.append_base;
  const FileInfo& now = reader.info();
  const std::string etag = reader.source()->etag();
  if (now.generation == want.generation && now.footer_offset == want.footer_offset &&
      (want.etag.empty() || etag.empty() || etag == want.etag)) {
    return Status::success();
  }
  std::string what = "generation " + std::to_string(want.generation) + " (footer at " +
                     std::to_string(want.footer_offset) + "), now generation " +
                     std::to_string(now.generation) + " (footer at " +
                     std::to_string(now.footer_offset) + ")";
  if (!want.etag.empty() && !etag.empty() && etag != want.etag) {
    what += ", ETag " + want.etag + " now " + etag;
  }
  return Status::aborted(std::string(target) + ": the file changed since this append was "
                         "planned (" + what + "): another writer appended or replaced it; "
                         "nothing written (plan again against the new generation)");
}

}  // namespace jtree
