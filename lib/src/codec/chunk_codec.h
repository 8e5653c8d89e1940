// Encoding and decoding of one chunk (spec/FORMAT.md, "Chunk encoding").
//
// A chunk's raw bytes are its elements in C order in stored form (4-bit types packed). It is
// stored either Raw (the raw bytes, byte for byte) or as Planes:
//   u32 plane_size[P] (little-endian), then the P plane payloads back to back,
// where the raw bytes, after the leaf's filter, are cut into P planes of equal size
// (P = stored element bytes for Shuffle/FloatSplit, 1 for None). A plane whose stored size
// equals its raw size is stored as is; any other plane is one payload of the leaf's codec
// (ChunkFormat::codec), encoded and decoded by the PlaneCodec registered for that id
// (plane_codec.h; zstd frames for Codec::kZstd).
//
// The encoder asks the codec for each plane (the codec may decline: the plane is then stored as
// is) and falls back to a Raw chunk when the whole does not shrink by WriteOptions::min_gain.
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

#include "jtree/chunk.h"
#include "jtree/dtype.h"
#include "jtree/status.h"
#include "jtree/tree.h"
#include "util/scratch_bytes.h"

namespace jtree::codec {

/// Encoder memory shared between planes, slot k for plane k (PlaneHints of plane_codec.h):
/// `leaf` is shared by the chunks of one leaf, `kind` by the leaves of one dtype and filter in
/// one save. The codec decides what it keeps there (zstd: the mode it chose for small planes,
/// so that a plane like an earlier one is compressed once, without a trial). Thread-safe
/// (relaxed atomics: any recorded choice is a valid one).
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
/// InvalidArgument for a filter the dtype does not allow or a codec no PlaneCodec claims.
Result<ChunkEncoding> encode_chunk(std::span<const std::byte> raw, const ChunkFormat& format,
                                   ScratchBytes& out, ScratchBytes& scratch);

/// Decodes stored chunk bytes into `raw` (exactly the chunk's raw size). Any inconsistency
/// (plane sizes, a bad payload such as a zstd frame of the wrong size, a Planes chunk of a
/// codec no PlaneCodec claims) is Corruption; `raw` is then unspecified. `scratch` is reused
/// between calls.
Status decode_chunk(std::span<const std::byte> stored, ChunkEncoding encoding,
                    const ChunkFormat& format, std::span<std::byte> raw,
                    ScratchBytes& scratch);

/// Decodes only the bytes [begin, begin + out.size()) of a chunk of `raw_size` raw bytes into
/// `out`: what a read of part of a chunk needs, without a buffer of the whole decoded chunk.
/// The compressed planes are still decoded whole (into `scratch`), but only the part's
/// elements are unfiltered, straight into `out`. The part must be whole elements, and 4-bit
/// dtypes take only the whole chunk (InvalidArgument otherwise, as for a part outside the
/// chunk). Corruption as decode_chunk's, which is this with the whole chunk.
Status decode_chunk_range(std::span<const std::byte> stored, ChunkEncoding encoding,
                          const ChunkFormat& format, uint64_t raw_size, uint64_t begin,
                          std::span<std::byte> out, ScratchBytes& scratch);

}  // namespace jtree::codec
