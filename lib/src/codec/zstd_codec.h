// zstd frames for chunk planes. Compression contexts are cached per thread.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "jtree/status.h"

namespace jtree::codec {

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
