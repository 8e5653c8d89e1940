// Encoding and decoding of one chunk (spec/FORMAT.md, "Chunk encoding").
//
// A chunk's raw bytes are its elements in C order in stored form (4-bit types packed). It is
// stored either Raw (the raw bytes, byte for byte) or as Planes:
//   u32 plane_size[P] (little-endian), then the P plane payloads back to back,
// where the raw bytes, after the leaf's filter, are cut into P planes of equal size
// (P = stored element bytes for Shuffle/FloatSplit, 1 for None). A plane whose stored size
// equals its raw size is stored as is; any other plane is one zstd frame of exactly its size.
//
// The encoder chooses per plane from a sample: zstd with matches, zstd literals only, or raw
// (planes that do not pay are not compressed at all), and falls back to a Raw chunk when the
// whole does not shrink by WriteOptions::min_gain.
//
// Thread-safe: all state is per call or per thread, except the shared plane choices
// (PlaneChoices), which are atomic.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "jtree/dtype.h"
#include "jtree/reader.h"
#include "jtree/status.h"
#include "jtree/tree.h"
#include "util/uninit_bytes.h"

namespace jtree::codec {

/// What the encoder chose for a small plane: kept and reused by later planes that share it, so
/// that a plane is decided by one trial (both zstd modes) and then compressed once. An encoder
/// heuristic, not part of the format.
enum class PlaneChoice : uint8_t { kUndecided = 0, kRaw, kLiterals, kLz };

/// Choices for the planes of small chunks (planes up to 1 MiB, for which trying both modes on a
/// sample costs a good part of compressing them): `leaf` is shared by the chunks of one
/// leaf, `kind` by the leaves of one dtype and filter in one save. A plane takes the leaf's
/// choice, else the kind's, else tries both modes and records what it chose in both. A plane
/// with a choice is compressed once (a Raw choice tries literals-only, the cheapest mode) and
/// stored raw when that does not pay. Thread-safe (relaxed atomics: any recorded choice is a
/// valid one).
struct PlaneChoices {
  std::array<std::atomic<uint8_t>, 16> leaf{};
  std::array<std::atomic<uint8_t>, 16>* kind = nullptr;
};

/// How the chunks of one leaf are encoded.
struct ChunkFormat {
  DType dtype = DType::kUInt8;
  Filter filter = Filter::kNone;
  Codec codec = Codec::kRaw;
  int level = 1;
  double min_gain = 0.03;  ///< encoder only
  PlaneChoices* choices = nullptr;  ///< encoder only: shared choices (none: each chunk decides)
};

/// Number of planes P of a Planes chunk of this format.
size_t plane_count(const ChunkFormat& format);

/// True when `filter` may be used with `dtype` (FloatSplit needs a float component; 4-bit
/// types take only None).
bool filter_allowed(Filter filter, DType dtype);

/// Encodes raw chunk bytes. Returns kRaw when the chunk is to be stored as is (then `out` is
/// left empty and the caller writes `raw` itself, without a copy), or kPlanes with the
/// stored bytes in `out`. `scratch` is reused between calls to avoid allocations.
Result<ChunkEncoding> encode_chunk(std::span<const std::byte> raw, const ChunkFormat& format,
                                   UninitBytes& out, std::vector<std::byte>& scratch);

/// Decodes stored chunk bytes into `raw` (exactly the chunk's raw size). Any inconsistency
/// (plane sizes, a bad zstd frame, a frame of the wrong size) is Corruption; `raw` is then
/// unspecified. `scratch` is reused between calls.
Status decode_chunk(std::span<const std::byte> stored, ChunkEncoding encoding,
                    const ChunkFormat& format, std::span<std::byte> raw,
                    std::vector<std::byte>& scratch);

}  // namespace jtree::codec
