#include "io/remote/whole_object.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

namespace jtree::remote {
namespace {

std::string errno_text() { return std::strerror(errno); }

// Receives the 200 answer to a GET without Range into the temporary file.
class FileHandler final : public ResponseHandler {
 public:
  FileHandler(int fd, ObjectPin& pin, uint64_t max_bytes)
      : fd_(fd), pin_(pin), max_bytes_(max_bytes) {}

  bool accepts(long status) const override { return status == 200; }

  Status on_head(const ResponseHead& head) override {
    if (const std::string* enc = head.find("content-encoding");
        enc != nullptr && !enc->empty() && *enc != "identity") {
      return Status::io_error("the server sent Content-Encoding \"" + enc->substr(0, 40) +
                             "\", which jtree did not ask for");
    }
    expected_ = head.content_length();
    // Refused before any body byte when the server says how large the object is.
    if (expected_ && *expected_ > max_bytes_) return too_large(*expected_);
    return pin_.check(head, expected_);
  }

  Status on_body(std::span<const std::byte> data) override {
    if (data.size() > max_bytes_ - received_) return too_large(received_ + data.size());
    if (expected_ && data.size() > *expected_ - received_) {
      return Status::io_error("the body is longer than the " + std::to_string(*expected_) +
                             " bytes announced");
    }
    while (!data.empty()) {
      const ssize_t n = ::write(fd_, data.data(), data.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Status::io_error("writing the temporary download file: " + errno_text());
      data = data.subspan(static_cast<size_t>(n));
      received_ += static_cast<uint64_t>(n);
    }
    return Status::success();
  }

  Status on_done() override {
    if (expected_ && received_ < *expected_) {
      transient_error = true;
      return Status::io_error("the body ended after " + std::to_string(received_) + " of " +
                             std::to_string(*expected_) + " bytes announced");
    }
    return pin_.check({}, received_);
  }

  void reset() override {
    ResponseHandler::reset();
    // A retry starts the file over.
    received_ = 0;
    expected_.reset();
    if (::ftruncate(fd_, 0) != 0 || ::lseek(fd_, 0, SEEK_SET) != 0) failed_reset_ = true;
  }

  uint64_t received() const { return received_; }
  bool failed_reset() const { return failed_reset_; }

 private:
  Status too_large(uint64_t n) const {
    return Status::resource_exhausted(
        "the server ignores HTTP Range requests and the object (" + std::to_string(n) +
        " bytes or more) is larger than full_download_max_bytes (" +
        std::to_string(max_bytes_) + " bytes) allows downloading whole");
  }

  int fd_;
  ObjectPin& pin_;
  uint64_t max_bytes_;
  uint64_t received_ = 0;
  std::optional<uint64_t> expected_;
  bool failed_reset_ = false;
};

}  // namespace

Result<std::unique_ptr<WholeObject>> WholeObject::download(const CallSpec& spec, ObjectPin& pin,
                                                           uint64_t max_bytes) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  std::string path = dir + "/jtree-download-XXXXXX";
  const int fd = ::mkostemp(path.data(), O_CLOEXEC);
  if (fd < 0) {
    return Status::io_error(spec.name + ": cannot create a temporary file for the whole "
                           "download in " + dir + ": " +
                           errno_text());
  }
  // Unlinked at once: nothing is left behind, whatever happens to the process.
  ::unlink(path.c_str());
  FileHandler handler(fd, pin, max_bytes);
  auto head = call(spec, handler);
  if (!head.ok() || handler.failed_reset()) {
    ::close(fd);
    if (!head.ok()) return head.status();
    return Status::io_error(spec.name + ": cannot rewind the temporary download file");
  }
  const uint64_t size = handler.received();
  void* map = nullptr;
  if (size > 0) {
    map = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
      const std::string why = errno_text();
      ::close(fd);
      return Status::io_error(spec.name + ": cannot map the downloaded object: " + why);
    }
  }
  return std::unique_ptr<WholeObject>(new WholeObject(fd, map, size));
}

WholeObject::~WholeObject() {
  if (map_ != nullptr) ::munmap(map_, static_cast<size_t>(size_));
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace jtree::remote
