#include "io/temp_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

#include "jtree/io.h"

namespace jtree::temp_files {
namespace {

bool is_lower_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

constexpr std::string_view kTag = ".tmp-";

int flock_retry(int fd, int op) {
  int rc;
  do {
    rc = ::flock(fd, op);
  } while (rc != 0 && errno == EINTR);
  return rc;
}

// flock() errors that mean "this file system cannot lock", as opposed to "someone holds it".
bool locks_unsupported(int err) { return err == ENOLCK || err == EOPNOTSUPP || err == EINVAL; }

bool same_file(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};

}  // namespace

std::string prefix(std::string_view base) {
  std::string p = ".";
  p += base;
  p += kTag;
  return p;
}

bool is_temp_name(std::string_view name, std::string_view base) {
  // `.<base>.tmp-` followed by exactly 16 lower-case hex digits.
  if (name.size() < 1 + kTag.size() + kSuffixDigits || name[0] != '.') return false;
  const std::string_view digits = name.substr(name.size() - kSuffixDigits);
  for (char c : digits) {
    if (!is_lower_hex(c)) return false;
  }
  const std::string_view head = name.substr(0, name.size() - kSuffixDigits);
  if (head.substr(head.size() - kTag.size()) != kTag) return false;
  const std::string_view target = head.substr(1, head.size() - 1 - kTag.size());
  if (target.empty()) return false;
  return base.empty() || target == base;
}

Result<Claim> claim(int fd, const std::string& path, UniqueFd* lock) {
  bool locked = true;
  if (flock_retry(fd, LOCK_EX | LOCK_NB) != 0) {
    locked = false;
    const int err = errno;
    if (err == EWOULDBLOCK) return Claim::kLost;  // a cleaner holds it: it may remove it
    if (!locks_unsupported(err)) return errno_status(path, "lock", err);
    // No locks here: no cleaner can lock it either, so none removes it.
  } else {
    // Locked: but a cleaner may have locked, removed and unlocked it in between.
    struct stat mine, named;
    if (::fstat(fd, &mine) != 0) return errno_status(path, "stat", errno);
    if (::lstat(path.c_str(), &named) != 0) {
      if (errno == ENOENT) return Claim::kLost;
      return errno_status(path, "stat", errno);
    }
    if (!same_file(mine, named)) return Claim::kLost;
  }
  const int dup = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return errno_status(path, "dup", errno);
  *lock = UniqueFd(dup);
  return locked ? Claim::kLocked : Claim::kUnlockable;
}

Result<uint64_t> remove_stale(const std::string& dir, std::string_view base) {
  std::unique_ptr<DIR, DirCloser> d(::opendir(dir.c_str()));
  if (!d) return errno_status(dir, "list directory", errno);
  const int dfd = ::dirfd(d.get());
  uint64_t removed = 0;
  for (;;) {
    errno = 0;
    const struct dirent* e = ::readdir(d.get());
    if (e == nullptr) break;  // the end, or an error: best effort either way
    const std::string_view name(e->d_name);
    if (!is_temp_name(name, base)) continue;
    // O_NONBLOCK: a FIFO under that name must not block the open; O_NOFOLLOW: never a link's
    // target.
    UniqueFd fd(::openat(dfd, e->d_name,
                         O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    if (!fd.valid()) continue;
    struct stat locked, named;
    if (::fstat(fd.get(), &locked) != 0 || !S_ISREG(locked.st_mode)) continue;
    if (flock_retry(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;  // a live writer (or no locks)
    // The name must still be the file we hold: not renamed to its target since we opened it,
    // not removed and created again.
    if (::fstatat(dfd, e->d_name, &named, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (!same_file(locked, named)) continue;
    if (::unlinkat(dfd, e->d_name, 0) == 0) ++removed;
  }
  return removed;
}

Result<uint64_t> remove_stale_for(std::string local) {
  struct stat st;
  if (::stat(local.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return remove_stale(local, "");
  while (local.size() > 1 && local.back() == '/') local.pop_back();
  const size_t slash = local.rfind('/');
  const std::string base = slash == std::string::npos ? local : local.substr(slash + 1);
  if (base.empty() || base == "." || base == "..") {
    return Status::invalid_argument(local + ": not a file name");
  }
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : local.substr(0, slash));
  return remove_stale(dir, base);
}

}  // namespace jtree::temp_files
