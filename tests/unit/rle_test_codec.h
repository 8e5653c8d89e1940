// A test-only plane codec: byte run-length coding under codec id 200, which the format does not
// define. It exists to show that a codec is one class plus its registration (codec/plane_codec.h):
// the tests register it and save, read, verify and decode chunks through the library with no
// other change. Not a codec for real files.
//
// Payload: pairs (run length 1..255, byte), expanding to exactly the plane.
#pragma once

#include <doctest/doctest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "codec/plane_codec.h"

namespace jtree::testing {

inline constexpr Codec kRleTestCodec = static_cast<Codec>(200);

class RleTestCodec final : public codec::PlaneCodec {
 public:
  Codec id() const override { return kRleTestCodec; }
  std::string_view name() const override { return "rle-test"; }
  size_t compress_bound(size_t plane_size) const override { return 2 * plane_size; }

  Result<size_t> encode(std::span<const std::byte> plane, int /*level*/, codec::PlaneHints hints,
                        std::span<std::byte> dst) const override {
    ++encoded_;
    if (hints.leaf) hints.leaf->store(1, std::memory_order_relaxed);  // any value: a hint
    size_t out = 0;
    for (size_t i = 0; i < plane.size();) {
      size_t run = 1;
      while (i + run < plane.size() && run < 255 && plane[i + run] == plane[i]) ++run;
      if (out + 2 > dst.size()) return size_t{0};  // does not fit: the plane is stored as is
      dst[out++] = static_cast<std::byte>(run);
      dst[out++] = plane[i];
      i += run;
    }
    return out;
  }

  Status decode(std::span<const std::byte> payload, std::span<std::byte> dst) const override {
    if (payload.size() % 2 != 0) return Status::corruption("rle-test: odd payload");
    size_t at = 0;
    for (size_t i = 0; i < payload.size(); i += 2) {
      const auto run = static_cast<size_t>(payload[i]);
      if (run == 0 || run > dst.size() - at) {
        return Status::corruption("rle-test: run of " + std::to_string(run) + " at " +
                                  std::to_string(at) + " of " + std::to_string(dst.size()));
      }
      for (size_t k = 0; k < run; ++k) dst[at++] = payload[i + 1];
    }
    if (at != dst.size()) return Status::corruption("rle-test: payload ends early");
    return Status::success();
  }

  /// Planes this codec was asked to encode (so tests see that the library used it).
  size_t encoded() const { return encoded_; }

 private:
  mutable std::atomic<size_t> encoded_{0};
};

/// The one instance, registered on first use (registration is for the whole process).
inline const RleTestCodec& rle_test_codec() {
  static const RleTestCodec codec;
  static const Status registered = codec::register_plane_codec(codec);
  REQUIRE_MESSAGE(registered.ok(), registered.to_string());
  return codec;
}

}  // namespace jtree::testing
