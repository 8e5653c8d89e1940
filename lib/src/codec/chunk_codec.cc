// Chunk encoding: filter (FloatSplit rotation, byte shuffle) and per-plane compression by the
// leaf's PlaneCodec (plane_codec.h).
//
// Stored Planes chunk: u32 plane_size[P] (little-endian), then the P payloads back to back. A
// payload of exactly the plane's raw size is the plane itself; anything else is one payload of
// the leaf's codec (a zstd frame for Codec::kZstd).
#include "codec/chunk_codec.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cstring>
#include <optional>
#include <string>

#include "codec/byte_planes.h"
#include "codec/plane_codec.h"
#include "util/checked_math.h"
#include "util/endian.h"

namespace jtree::codec {
namespace {

// Filters work block by block so that the rotated / gathered copy stays in L1.
constexpr size_t kBlockBytes = 8 * 1024;

constexpr size_t kMaxPlanes = 16;  // complex128

// What a ChunkFormat means for the bytes.
struct Layout {
  size_t width = 1;      // stored element bytes (the shuffle width); 1 for 4-bit types
  size_t planes = 1;     // P
  size_t component = 0;  // FloatSplit rotation word size; 0 = no rotation
};

std::string u64s(uint64_t v) { return std::to_string(v); }

// Names the plane in an error; free on success (this is on the decode hot path).
Status in_plane(Status s, size_t k) {
  if (s.ok()) return s;
  return s.with_prefix("plane " + u64s(k));
}

// nullopt when the dtype is unknown or the filter not allowed for it.
std::optional<Layout> layout_of(const ChunkFormat& format) {
  if (!filter_allowed(format.filter, format.dtype)) return std::nullopt;
  const DTypeInfo info = *dtype_info(format.dtype);
  Layout l;
  l.width = std::max<size_t>(info.stored_bits / 8, 1);
  l.planes = plane_count(format);
  assert(l.planes <= kMaxPlanes);
  if (format.filter == Filter::kFloatSplit) l.component = info.float_component;
  return l;
}

// ---- filters -----------------------------------------------------------------------------------

// raw -> filtered planes in dst (raw.size() bytes). Shuffle alone goes straight from raw; with
// the FloatSplit rotation each block is copied, rotated and shuffled in L1, then its W plane
// pieces are copied out.
void apply_filter(std::span<const std::byte> raw, const Layout& l, std::byte* dst) {
  const size_t w = l.width;
  if (l.component == 0) {
    shuffle(raw, {dst, raw.size()}, w);
    return;
  }
  const size_t n = raw.size() / w;
  const size_t per_block = kBlockBytes / w;
  alignas(64) std::byte block[kBlockBytes];
  alignas(64) std::byte planes[kBlockBytes];
  for (size_t i0 = 0; i0 < n; i0 += per_block) {
    const size_t nb = std::min(per_block, n - i0), bytes = nb * w;
    std::memcpy(block, raw.data() + i0 * w, bytes);
    rotate_left_1({block, bytes}, l.component);
    shuffle({block, bytes}, {planes, bytes}, w);
    for (size_t k = 0; k < w; ++k) std::memcpy(dst + k * n + i0, planes + k * nb, nb);
  }
}

// Planes (anywhere in memory, each n bytes) -> raw. Each block gathers its W plane pieces
// into L1, unshuffles them into raw and undoes the rotation while the block is still hot.
void undo_filter(const std::array<const std::byte*, kMaxPlanes>& plane, const Layout& l,
                 std::span<std::byte> raw) {
  const size_t w = l.width;
  const size_t n = raw.size() / w;
  const size_t per_block = kBlockBytes / w;
  alignas(64) std::byte gathered[kBlockBytes];
  for (size_t i0 = 0; i0 < n; i0 += per_block) {
    const size_t nb = std::min(per_block, n - i0), bytes = nb * w;
    for (size_t k = 0; k < w; ++k) std::memcpy(gathered + k * nb, plane[k] + i0, nb);
    const std::span<std::byte> out = raw.subspan(i0 * w, bytes);
    unshuffle({gathered, bytes}, out, w);
    if (l.component != 0) rotate_right_1(out, l.component);
  }
}

}  // namespace

size_t plane_count(const ChunkFormat& format) {
  if (format.filter == Filter::kNone) return 1;
  const auto info = dtype_info(format.dtype);
  if (!info) return 1;
  return std::max<size_t>(info->stored_bits / 8, 1);
}

bool filter_allowed(Filter filter, DType dtype) {
  const auto info = dtype_info(dtype);
  if (!info) return false;
  switch (filter) {
    case Filter::kNone: return true;
    case Filter::kShuffle: return !is_4bit(dtype);
    case Filter::kFloatSplit: return info->float_component > 0;
  }
  return false;
}

Result<ChunkEncoding> encode_chunk(std::span<const std::byte> raw, const ChunkFormat& format,
                                   ScratchBytes& out, ScratchBytes& scratch) {
  out.clear();
  const std::optional<Layout> layout = layout_of(format);
  if (!layout) {
    return Status::invalid_argument("filter " + u64s(static_cast<uint8_t>(format.filter)) +
                                   " is not allowed for dtype " +
                                   std::string(dtype_name(format.dtype)));
  }
  const PlaneCodec* codec = find_plane_codec(format.codec);
  if (format.codec != Codec::kRaw && codec == nullptr) {
    return Status::invalid_argument("unknown codec " + u64s(static_cast<uint8_t>(format.codec)));
  }
  const size_t p = layout->planes;
  if (raw.size() % p != 0) {
    return Status::invalid_argument("chunk of " + u64s(raw.size()) + " bytes is not a multiple of " +
                                   u64s(p) + " planes");
  }
  const size_t plane_size = raw.size() / p;
  // Raw when asked, when empty, and when a plane could not be described by a u32 size.
  if (format.codec == Codec::kRaw || raw.empty() || plane_size > UINT32_MAX) {
    return ChunkEncoding::kRaw;
  }
  // The stored chunk must beat raw by min_gain (a negative or NaN gain counts as zero): at most
  // `budget` bytes.
  const double gain = format.min_gain >= 0 ? format.min_gain : 0.0;
  const size_t budget = static_cast<size_t>(static_cast<double>(raw.size()) * (1.0 - gain));
  if (budget < 4 * p) return ChunkEncoding::kRaw;

  std::span<const std::byte> filtered = raw;
  if (p > 1 || layout->component != 0) {
    if (scratch.size() < raw.size()) scratch.resize(raw.size());
    apply_filter(raw, *layout, scratch.data());
    filtered = {scratch.data(), raw.size()};
  }

  // Frames are compressed in place, each into what is left of the budget; a plane whose frame
  // would not be smaller than the plane is stored as the plane itself.
  out.resize(budget);  // not zeroed: every byte up to the final size is written below
  size_t used = 4 * p;
  for (size_t k = 0; k < p; ++k) {
    const std::span<const std::byte> plane = filtered.subspan(k * plane_size, plane_size);
    const size_t room = std::min(budget - used, plane_size - 1);
    PlaneChoices* shared = format.choices;
    const PlaneHints hints{shared ? &shared->leaf[k] : nullptr,
                           shared && shared->kind ? &(*shared->kind)[k] : nullptr};
    auto frame = codec->encode(plane, format.level, hints, {out.data() + used, room});
    if (!frame.ok()) {
      out.clear();
      return in_plane(frame.status(), k);
    }
    size_t payload = *frame;
    if (payload == 0) {  // stored raw, if the budget has room for the whole plane
      if (plane_size > budget - used) {
        out.clear();  // cannot pay any more: stop compressing the remaining planes
        return ChunkEncoding::kRaw;
      }
      std::memcpy(out.data() + used, plane.data(), plane_size);
      payload = plane_size;
    }
    store_le<uint32_t>(out.data() + 4 * k, static_cast<uint32_t>(payload));
    used += payload;
  }
  out.resize(used);
  return ChunkEncoding::kPlanes;
}

Status decode_chunk(std::span<const std::byte> stored, ChunkEncoding encoding,
                    const ChunkFormat& format, std::span<std::byte> raw,
                    ScratchBytes& scratch) {
  return decode_chunk_range(stored, encoding, format, raw.size(), 0, raw, scratch);
}

Status decode_chunk_range(std::span<const std::byte> stored, ChunkEncoding encoding,
                          const ChunkFormat& format, uint64_t raw_size, uint64_t begin,
                          std::span<std::byte> out, ScratchBytes& scratch) {
  const bool whole = begin == 0 && out.size() == raw_size;
  if (begin > raw_size || out.size() > raw_size - begin) {
    return Status::invalid_argument("bytes [" + u64s(begin) + ", " + u64s(begin + out.size()) +
                                    ") are not inside a chunk of " + u64s(raw_size));
  }
  if (encoding == ChunkEncoding::kRaw) {
    if (stored.size() != raw_size) {
      return Status::corruption("raw chunk of " + u64s(stored.size()) + " bytes, expected " +
                                u64s(raw_size));
    }
    if (!out.empty()) std::memcpy(out.data(), stored.data() + begin, out.size());
    return Status::success();
  }
  if (encoding != ChunkEncoding::kPlanes) {
    return Status::corruption("unknown chunk encoding " + u64s(static_cast<uint8_t>(encoding)));
  }
  // The leaf's codec decodes the compressed planes. (Files never get here without one: the
  // header refuses unknown codecs and validation refuses Planes chunks in Raw leaves.)
  const PlaneCodec* codec = find_plane_codec(format.codec);
  if (codec == nullptr) {
    return Status::corruption(format.codec == Codec::kRaw
                                  ? std::string("planes chunk in a raw leaf")
                                  : "planes chunk of unknown codec " +
                                        u64s(static_cast<uint8_t>(format.codec)));
  }
  const std::optional<Layout> layout = layout_of(format);
  if (!layout) {
    return Status::corruption("filter " + u64s(static_cast<uint8_t>(format.filter)) +
                              " is not allowed for dtype " + std::string(dtype_name(format.dtype)));
  }
  const size_t p = layout->planes;
  if (raw_size % p != 0) {
    return Status::corruption("chunk of " + u64s(raw_size) + " bytes is not a multiple of " +
                              u64s(p) + " planes");
  }
  // A part is whole elements: every filter works element by element.
  if (!whole && (is_4bit(format.dtype) || begin % layout->width != 0 ||
                 out.size() % layout->width != 0)) {
    return Status::invalid_argument("bytes [" + u64s(begin) + ", " + u64s(begin + out.size()) +
                                    ") of a chunk are not whole elements of " +
                                    std::string(dtype_name(format.dtype)));
  }
  const size_t plane_size = raw_size / p;

  // Validate every plane size before touching any payload.
  if (stored.size() < 4 * p) {
    return Status::corruption("planes chunk of " + u64s(stored.size()) +
                              " bytes is shorter than its " + u64s(4 * p) + "-byte header");
  }
  std::array<uint32_t, kMaxPlanes> size{};
  uint64_t total = 4 * p;
  for (size_t k = 0; k < p; ++k) {
    size[k] = load_le<uint32_t>(stored.data() + 4 * k);
    if (size[k] > plane_size) {
      return Status::corruption("plane " + u64s(k) + ": stored size " + u64s(size[k]) +
                                " exceeds its raw size " + u64s(plane_size));
    }
    total = *checked_add(total, size[k]);  // at most 16 * 2^32 + 64: cannot overflow
  }
  if (total != stored.size()) {
    return Status::corruption("plane sizes add up to " + u64s(total) + " bytes, chunk has " +
                              u64s(stored.size()));
  }

  // P == 1: straight into out (a part: the frame decoded into scratch, the part copied out).
  // Otherwise raw planes are read where they lie in `stored` and compressed ones are decoded
  // into scratch, then the part's elements unfiltered into out.
  if (p == 1) {
    const auto payload = stored.subspan(4, size[0]);
    if (size[0] == plane_size) {
      if (!out.empty()) std::memcpy(out.data(), payload.data() + begin, out.size());
    } else if (whole) {
      JTREE_RETURN_IF_ERROR(in_plane(codec->decode(payload, out), 0));
    } else {
      grow(scratch, plane_size);
      JTREE_RETURN_IF_ERROR(in_plane(codec->decode(payload, {scratch.data(), plane_size}), 0));
      if (!out.empty()) std::memcpy(out.data(), scratch.data() + begin, out.size());
    }
    if (layout->component != 0) rotate_right_1(out, layout->component);
    return Status::success();
  }
  size_t compressed = 0;
  for (size_t k = 0; k < p; ++k) compressed += size[k] != plane_size;
  grow(scratch, compressed * plane_size);

  // Plane k holds byte k of every element (P == the element's width): the part's elements
  // start at the same index in every plane.
  const size_t first = begin / layout->width;
  std::array<const std::byte*, kMaxPlanes> plane{};
  size_t offset = 4 * p, next_scratch = 0;
  for (size_t k = 0; k < p; ++k) {
    const auto payload = stored.subspan(offset, size[k]);
    offset += size[k];
    if (size[k] == plane_size) {
      plane[k] = payload.data() + first;
      continue;
    }
    const std::span<std::byte> dst(scratch.data() + next_scratch * plane_size, plane_size);
    ++next_scratch;
    JTREE_RETURN_IF_ERROR(in_plane(codec->decode(payload, dst), k));
    plane[k] = dst.data() + first;
  }
  undo_filter(plane, *layout, out);
  return Status::success();
}

}  // namespace jtree::codec
