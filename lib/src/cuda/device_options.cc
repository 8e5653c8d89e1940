// DeviceOptions::check and the DirectIo / ZeroCopy names: the one place that says which
// settings of a load to a device are valid and how direct_io and zero_copy are spelt, for
// C++, the C API and Python alike.
#include <string>

#include "jtree/device.h"

namespace jtree {

std::string_view direct_io_name(DirectIo mode) {
  switch (mode) {
    case DirectIo::kAuto: return "auto";
    case DirectIo::kOn: return "on";
    case DirectIo::kOff: return "off";
  }
  return "?";  // (an out-of-range value: DeviceOptions::check refuses it)
}

Result<DirectIo> parse_direct_io(std::string_view name) {
  for (DirectIo m : {DirectIo::kAuto, DirectIo::kOn, DirectIo::kOff}) {
    if (name == direct_io_name(m)) return m;
  }
  return Status::invalid_argument("direct_io must be \"auto\", \"on\" or \"off\", not \"" +
                                  std::string(name) + "\"");
}

std::string_view zero_copy_name(ZeroCopy mode) {
  switch (mode) {
    case ZeroCopy::kAuto: return "auto";
    case ZeroCopy::kOn: return "on";
    case ZeroCopy::kOff: return "off";
  }
  return "?";  // (an out-of-range value: DeviceOptions::check refuses it)
}

Result<ZeroCopy> parse_zero_copy(std::string_view name) {
  for (ZeroCopy m : {ZeroCopy::kAuto, ZeroCopy::kOn, ZeroCopy::kOff}) {
    if (name == zero_copy_name(m)) return m;
  }
  return Status::invalid_argument("zero_copy must be \"auto\", \"on\" or \"off\", not \"" +
                                  std::string(name) + "\"");
}

Status DeviceOptions::check() const {
  JTREE_RETURN_IF_ERROR(read.check());
  if (staging_buffers < 1 || staging_buffers > 64) {
    return Status::invalid_argument("staging_buffers is " + std::to_string(staging_buffers) +
                                    "; it must be from 1 to 64");
  }
  if (staging_bytes > kMaxStagingBytes) {
    return Status::invalid_argument("staging_bytes is " + std::to_string(staging_bytes) +
                                    "; it must be at most " + std::to_string(kMaxStagingBytes) +
                                    " (1 TiB)");
  }
  if (staging_bytes / static_cast<uint64_t>(staging_buffers) < kMinBufferBytes) {
    return Status::invalid_argument(
        "staging_bytes " + std::to_string(staging_bytes) + " over " +
        std::to_string(staging_buffers) + " buffers is below the minimum of " +
        std::to_string(kMinBufferBytes) + " bytes per buffer");
  }
  if (device < 0) {
    return Status::invalid_argument("device is " + std::to_string(device) +
                                    "; a CUDA device ordinal is >= 0");
  }
  const auto mode = static_cast<int>(direct_io);  // (a C caller's int may be anything)
  if (mode < static_cast<int>(DirectIo::kAuto) || mode > static_cast<int>(DirectIo::kOff)) {
    return Status::invalid_argument("direct_io is " + std::to_string(mode) +
                                    "; it must be auto, on or off");
  }
  const auto zc = static_cast<int>(zero_copy);
  if (zc < static_cast<int>(ZeroCopy::kAuto) || zc > static_cast<int>(ZeroCopy::kOff)) {
    return Status::invalid_argument("zero_copy is " + std::to_string(zc) +
                                    "; it must be auto, on or off");
  }
  if (zero_copy == ZeroCopy::kOn && direct_io == DirectIo::kOn) {
    return Status::invalid_argument(
        "zero_copy and direct_io are both on: raw chunks are either read with O_DIRECT or "
        "copied from the page cache; set one of them to auto or off");
  }
  return Status::success();
}

}  // namespace jtree
