// zstd frames for chunk planes (Codec::kZstd): the built-in PlaneCodec, and the frame
// functions under it. Compression contexts are cached per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "codec/plane_codec.h"
#include "jtree/status.h"

namespace jtree::codec {

/// The zstd plane codec (registered in plane_codec.cc). Its encoder chooses per plane, from a
/// sample, between zstd's match finder at the leaf's level, literals only, or storing the
/// plane as is, and records the choice in the plane's PlaneHints (values of PlaneChoice) so
/// that small planes like it are compressed once without a trial.
const PlaneCodec& zstd_plane_codec();

/// What the zstd encoder chose for a small plane, as kept in a PlaneHints slot. An encoder
/// heuristic, not part of the format.
enum class PlaneChoice : uint8_t { kUndecided = 0, kRaw, kLiterals, kLz };

/// How the encoder asks zstd to compress one plane; every mode yields a standard zstd frame.
enum class ZstdMode {
  kLz,        ///< zstd at the given level (matches + entropy coding)
  kLiterals,  ///< literals only: entropy coding without match finding (fast, and better than
              ///< LZ on planes of noisy bytes such as float exponents)
};

/// Compresses `src` straight into `dst`. Returns the frame's size, or 0 when zstd cannot make
/// it within dst.size() bytes (a zstd frame is never empty); `dst` is then unspecified, and
/// nothing past it is written. zstd needs a few bytes of room beyond the frame it makes (8 or
/// 9 in our measurements), so a frame within that of dst.size() may give 0. A `dst` of
/// zstd_compress_bound(src.size()) bytes always fits.
Result<size_t> zstd_compress(std::span<const std::byte> src, int level, ZstdMode mode,
                             std::span<std::byte> dst);

/// The largest frame `src_size` bytes can give (ZSTD_compressBound).
size_t zstd_compress_bound(size_t src_size);

/// Decompresses one frame that must expand to exactly dst.size() bytes; anything else
/// (a bad frame, a different size, trailing bytes) is Corruption.
Status zstd_decompress(std::span<const std::byte> frame, std::span<std::byte> dst);

/// Compressed size of `src` in each mode (for choosing one from a sample).
Result<size_t> zstd_compressed_size(std::span<const std::byte> src, int level, ZstdMode mode);

}  // namespace jtree::codec
