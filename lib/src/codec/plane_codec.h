// The plane-codec seam: what compresses one plane of a Planes chunk (spec/FORMAT.md 8.2) and
// decodes it back, chosen by the leaf's codec id (Leaf::codec, recorded in the header).
//
// chunk_codec.cc owns the chunk layout (filter, plane-size table, planes stored as is) and asks
// the leaf's PlaneCodec only for the compressed planes; nothing else in the library knows a
// codec's bytes. A new codec is one file implementing PlaneCodec, one line in the built-in
// table of plane_codec.cc, its value in the schema's / tree.h's `Codec` enum, the spec and tests.
//
// Thread safety: a PlaneCodec is stateless as far as callers can tell (per-thread contexts
// are its own business): encode and decode are called from many threads at once. Lookup is
// lock-free; registration may race with lookups.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>

#include "jtree/status.h"
#include "jtree/tree.h"

namespace jtree::codec {

/// Where an encoder may remember what it chose for a plane, so that later planes like it skip
/// the trial (PlaneChoices in chunk_codec.h): the slot of the plane's leaf and the slot of its
/// kind (dtype and filter, in one save); either may be null. 0 means nothing recorded; any
/// other value is the codec's own (zstd: the mode). Relaxed atomics: a hint, never a format rule.
struct PlaneHints {
  std::atomic<uint8_t>* leaf = nullptr;
  std::atomic<uint8_t>* kind = nullptr;
};

/// One compressor of planes. Implementations live in their own file (zstd_codec.cc).
class PlaneCodec {
 public:
  virtual ~PlaneCodec() = default;

  /// The id recorded in the header for leaves of this codec; never Codec::kRaw.
  virtual Codec id() const = 0;
  /// Its name, for messages and listings ("zstd"); static storage.
  virtual std::string_view name() const = 0;
  /// The largest payload encode() can produce from a plane of `plane_size` bytes when given
  /// room for it.
  virtual size_t compress_bound(size_t plane_size) const = 0;
  /// Compresses one plane (raw.size() > 0) into `dst` at `level` (the leaf's level, whatever it
  /// means to the codec). Returns the payload's size, or 0 when the plane is to be stored as is:
  /// compressing does not pay, or the payload would not fit in `dst` (callers give at most
  /// plane.size() - 1 bytes, since a payload of the plane's own size reads back as the plane
  /// itself). Bytes of `dst` past the payload are unspecified; nothing past dst is written.
  /// Errors are InvalidArgument or ResourceExhausted.
  virtual Result<size_t> encode(std::span<const std::byte> plane, int level, PlaneHints hints,
                                std::span<std::byte> dst) const = 0;
  /// Decodes one payload that must expand to exactly dst.size() bytes; anything else (a bad
  /// payload, another size, trailing bytes) is Corruption, with `dst` then unspecified. Safe on
  /// hostile input.
  virtual Status decode(std::span<const std::byte> payload, std::span<std::byte> dst) const = 0;
  /// The levels it accepts, [first, second] (the header stores a level in a signed byte, so
  /// never outside [-128, 127]); a save asking for another is refused before anything is
  /// written, rather than clamped without a word. By default: every level the header holds.
  virtual std::pair<int, int> levels() const { return {-128, 127}; }
};

/// The codec registered under `id`, or null for Codec::kRaw and ids no codec claims (a file
/// naming one is refused when its header is read). Lock-free.
const PlaneCodec* find_plane_codec(Codec id);

/// Adds a codec beside the built-in ones (tests; an application's own codec): it must outlive
/// every use (a static object). InvalidArgument when its id is Codec::kRaw or already taken.
/// A file whose leaves name it is then read and written like a zstd one; other processes,
/// without it, refuse the file as having an unknown codec.
Status register_plane_codec(const PlaneCodec& codec);

}  // namespace jtree::codec
