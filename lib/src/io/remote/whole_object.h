// The fallback for servers that ignore HTTP Range (RemoteOptions::allow_full_download): the
// object downloaded once, whole, into an unlinked temporary file (in $TMPDIR, else /tmp) that
// is then mapped read-only, so that every later read is a copy from that map. The download is
// bounded by RemoteOptions::full_download_max_bytes and pinned to the object's version like
// every other response; the file disappears with the WholeObject (or the process).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "io/remote/object_pin.h"
#include "io/remote/remote_call.h"
#include "jtree/status.h"

namespace jtree::remote {

class WholeObject {
 public:
  /// Runs `spec` (a GET without Range; its build sets the request) with retries, writing the
  /// body to a new temporary file. ResourceExhausted when the object is larger than
  /// `max_bytes` (before any body byte when the server sends Content-Length); IOError when the
  /// temporary file cannot be written (a full disk).
  static Result<std::unique_ptr<WholeObject>> download(const CallSpec& spec, ObjectPin& pin,
                                                       uint64_t max_bytes);
  ~WholeObject();
  WholeObject(const WholeObject&) = delete;
  WholeObject& operator=(const WholeObject&) = delete;

  uint64_t size() const { return size_; }
  /// The object's bytes (valid while this lives).
  std::span<const std::byte> bytes() const {
    return {static_cast<const std::byte*>(map_), static_cast<size_t>(size_)};
  }

 private:
  WholeObject(int fd, void* map, uint64_t size) : fd_(fd), map_(map), size_(size) {}
  int fd_ = -1;
  void* map_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace jtree::remote
