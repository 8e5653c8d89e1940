// POSIX file helpers shared by the local-file Source and Sinks: errno -> Status, an owning
// file descriptor, and the I/O size cap.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "jtree/status.h"

namespace jtree {

/// Linux transfers at most 0x7ffff000 bytes per call; asking for less keeps loops simple.
inline constexpr uint64_t kMaxIoBytes = uint64_t{1} << 30;

namespace posix_detail {
// Whichever strerror_r flavour the C library declares: GNU returns the text, XSI fills buf.
[[maybe_unused]] inline const char* strerror_text(const char* text, const char*) { return text; }
[[maybe_unused]] inline const char* strerror_text(int rc, const char* buf) {
  return rc == 0 ? buf : "unknown error";
}
}  // namespace posix_detail

/// "<path>: <what>: <strerror>", with the code that errno maps to: ENOENT NotFound,
/// EACCES/EPERM PermissionDenied, EEXIST AlreadyExists, anything else IOError.
inline Status errno_status(const std::string& path, std::string_view what, int err) {
  char buf[256] = {};
  std::string msg = path + ": " + std::string(what) + ": " +
                    posix_detail::strerror_text(strerror_r(err, buf, sizeof buf), buf);
  switch (err) {
    case ENOENT: return Status::not_found(std::move(msg));
    case EACCES:
    case EPERM: return Status::permission_denied(std::move(msg));
    case EEXIST: return Status::already_exists(std::move(msg));
    default: return Status::io_error(std::move(msg));
  }
}

/// An owned file descriptor, closed on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  ~UniqueFd() { reset(); }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  /// Closes and returns close()'s errno (0 on success): some file systems (NFS) report
  /// delayed write errors only here. On Linux the descriptor is gone even after EINTR.
  int close() {
    const int fd = std::exchange(fd_, -1);
    if (fd < 0 || ::close(fd) == 0 || errno == EINTR) return 0;
    return errno;
  }
  void reset() { (void)close(); }

 private:
  int fd_ = -1;
};

}  // namespace jtree
