#include "io/remote/object_pin.h"

namespace jtree::remote {

Status ObjectPin::check(const ResponseHead& head, std::optional<uint64_t> total) {
  const std::string* etag = head.find("etag");
  const std::string* modified = head.find("last-modified");
  std::lock_guard<std::mutex> lock(mu_);
  if (etag != nullptr && !etag->empty()) {
    if (etag_.empty()) {
      etag_ = *etag;
    } else if (*etag != etag_) {
      return Status::aborted("the object changed while being read (ETag " + etag_ + ", now " +
                             *etag + ")");
    }
  }
  if (modified != nullptr && !modified->empty()) {
    if (last_modified_.empty()) {
      last_modified_ = *modified;
    } else if (etag_.empty() && *modified != last_modified_) {
      // Only without an ETag: some servers round Last-Modified differently per response.
      return Status::aborted("the object changed while being read (Last-Modified " +
                             last_modified_ + ", now " + *modified + ")");
    }
  }
  if (total) {
    if (!size_) {
      size_ = total;
    } else if (*size_ != *total) {
      return Status::aborted("the object changed while being read (size " +
                             std::to_string(*size_) + ", now " + std::to_string(*total) + ")");
    }
  }
  return Status::success();
}

std::string ObjectPin::etag() const {
  std::lock_guard<std::mutex> lock(mu_);
  return etag_;
}

std::optional<uint64_t> ObjectPin::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return size_;
}

std::optional<std::string> ObjectPin::if_match_header() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (etag_.empty() || etag_.rfind("W/", 0) == 0) return std::nullopt;
  return "If-Match: " + etag_;
}

}  // namespace jtree::remote
