// Pins reads of one object to one version of it: the ETag (or, without one, Last-Modified)
// and the size of the first response; every later response must agree. A file replaced while
// a Reader uses it then fails with "the object changed while being read" instead of feeding
// bytes of two versions into one result.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "io/remote/http_client.h"
#include "jtree/status.h"

namespace jtree::remote {

class ObjectPin {
 public:
  /// `expected_etag`: a version the caller already knows (empty: adopt the first seen).
  explicit ObjectPin(std::string expected_etag = {}) : etag_(std::move(expected_etag)) {}

  /// Checks a response's ETag / Last-Modified, and the object's total size when the response
  /// states it, against the pin; adopts them while the pin has none. Aborted on a mismatch.
  Status check(const ResponseHead& head, std::optional<uint64_t> total);

  std::string etag() const;
  std::optional<uint64_t> size() const;
  /// "If-Match: <etag>" for a strong ETag (weak ones cannot be used with If-Match), so that
  /// the server itself refuses another version (412).
  std::optional<std::string> if_match_header() const;

 private:
  mutable std::mutex mu_;
  std::string etag_;
  std::string last_modified_;
  std::optional<uint64_t> size_;
};

}  // namespace jtree::remote
