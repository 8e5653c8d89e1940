// A flatbuffer's bytes at an 8-aligned address, copied there only when they are not already.
//
// The flatbuffers verifier checks the alignment of scalars relative to the buffer's start; the
// accessors then load them with aligned loads. Bytes that start at an odd address (a caller's
// span into a larger buffer) would make those loads misaligned — undefined behaviour — though
// the verifier accepted them. The reader's own buffers are always aligned: no copy there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace jtree::format {

class AlignedBytes {
 public:
  explicit AlignedBytes(std::span<const std::byte> bytes) : bytes_(bytes) {
    // (An empty span needs no copy, and memcpy from its possibly null pointer would be UB.)
    if (bytes.empty() || reinterpret_cast<uintptr_t>(bytes.data()) % alignof(uint64_t) == 0) {
      return;
    }
    copy_.resize((bytes.size() + 7) / 8);
    std::memcpy(copy_.data(), bytes.data(), bytes.size());
    bytes_ = {reinterpret_cast<const std::byte*>(copy_.data()), bytes.size()};
  }
  std::span<const std::byte> span() const { return bytes_; }

 private:
  std::vector<uint64_t> copy_;
  std::span<const std::byte> bytes_;
};

}  // namespace jtree::format
