// The plane-codec registry: one slot per codec id (a uint8 in the header), filled with the
// built-in codecs on first use and by register_plane_codec().
#include "codec/plane_codec.h"

#include <array>
#include <string>

#include "codec/zstd_codec.h"

namespace jtree::codec {
namespace {

// The codecs every build knows. A new built-in codec adds its line here.
const PlaneCodec* const kBuiltin[] = {
    &zstd_plane_codec(),
};

struct Registry {
  std::array<std::atomic<const PlaneCodec*>, 256> slot{};
  Registry() {
    for (const PlaneCodec* c : kBuiltin) slot[static_cast<uint8_t>(c->id())].store(c);
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

const PlaneCodec* find_plane_codec(Codec id) {
  return registry().slot[static_cast<uint8_t>(id)].load(std::memory_order_acquire);
}

Status register_plane_codec(const PlaneCodec& codec) {
  const auto id = static_cast<uint8_t>(codec.id());
  if (codec.id() == Codec::kRaw) {
    return Status::invalid_argument("plane codec " + std::string(codec.name()) +
                                   ": id 0 is Raw (no codec)");
  }
  const PlaneCodec* expected = nullptr;
  if (!registry().slot[id].compare_exchange_strong(expected, &codec,
                                                   std::memory_order_acq_rel)) {
    return Status::invalid_argument("plane codec " + std::string(codec.name()) + ": id " +
                                   std::to_string(id) + " is taken by " +
                                   std::string(expected->name()));
  }
  return Status::success();
}

}  // namespace jtree::codec
