// Receives the answer to one range GET and trusts nothing in it: the status (206, or 200 from
// a server that ignored the Range header, or 416), Content-Range against what was asked,
// Content-Length against Content-Range, the body's length against both, the ETag and size
// against the object's pin. Bytes go straight into the caller's buffers.
//
// A 200 (the server ignored Range) is taken only when its body is no longer than the bytes
// asked for (a small object); a longer one is refused with NotSupported as soon as that is
// known (from Content-Length, before any body byte; else when the body passes the length
// asked for), so that a range read never silently becomes a whole-object download.
// RemoteSource then downloads the object whole only when RemoteOptions::allow_full_download.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "io/remote/http_client.h"
#include "io/remote/object_pin.h"

namespace jtree::remote {

/// Destination of object bytes [offset, offset + dst.size()).
struct Piece {
  uint64_t offset = 0;
  std::span<std::byte> dst;
};

class RangeHandler final : public ResponseHandler {
 public:
  enum class Mode {
    kRange,   ///< bytes [first, first + length) into `pieces`
    kHead,    ///< the first `length` bytes (fewer when the object is shorter) into `out`
    kSuffix,  ///< the last `length` bytes (fewer when the object is shorter) into `out`
  };

  /// kRange: `pieces` are sorted, disjoint and inside [first, first + length); bytes between
  /// them (a coalesced gap) are discarded.
  RangeHandler(ObjectPin& pin, uint64_t first, uint64_t length, std::vector<Piece> pieces);
  /// kHead or kSuffix into `out` (resized to what the object has), length > 0.
  RangeHandler(ObjectPin& pin, Mode mode, uint64_t length, std::vector<std::byte>* out);

  /// The request header: "Range: bytes=first-last" or "Range: bytes=-length".
  std::string range_header() const;

  bool accepts(long status) const override {
    return status == 200 || status == 206 || status == 416;
  }
  Status on_head(const ResponseHead& head) override;
  Status on_body(std::span<const std::byte> data) override;
  bool satisfied() const override;
  Status on_done() override;
  void reset() override;

  /// The object's size, as this answer stated it (known after a successful attempt).
  std::optional<uint64_t> total() const { return total_; }
  /// The server answered with the whole object (200): it ignores Range.
  bool range_ignored() const { return status_ == 200; }
  /// The 200 answer was longer than the bytes asked for, and was refused (NotSupported).
  bool refused_whole_body() const { return refused_; }
  /// A suffix request was answered with another range (a server that mis-serves suffixes);
  /// total() is known, the bytes are not: ask again with an explicit range.
  bool suffix_misserved() const { return suffix_misserved_; }

 private:
  Status fail(Status st, bool transient = false);
  Status refuse_whole_body();
  void place(uint64_t object_offset, std::span<const std::byte> data);
  uint64_t position() const { return origin_ + received_; }  // object offset of the next byte

  ObjectPin& pin_;
  const Mode mode_;
  const uint64_t first_, length_;
  std::vector<Piece> pieces_;
  std::vector<std::byte>* out_ = nullptr;

  // Per attempt.
  long status_ = 0;
  std::optional<uint64_t> total_;
  uint64_t origin_ = 0;    // object offset of the body's first byte
  uint64_t received_ = 0;  // body bytes so far
  std::optional<uint64_t> expected_;  // body bytes announced
  uint64_t want_first_ = 0, want_end_ = 0;  // the object bytes wanted
  size_t cursor_ = 0;      // next piece (kRange)
  // A 200 of unknown length (chunked): kept up to length_ bytes until its end tells the size.
  bool unknown_length_ = false;
  bool suffix_misserved_ = false;
  bool refused_ = false;
};

}  // namespace jtree::remote
