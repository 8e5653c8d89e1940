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

/// Compresses `src` into `dst` (resized to fit). Returns the frame size.
Result<size_t> zstd_compress(std::span<const std::byte> src, int level, ZstdMode mode,
                             std::vector<std::byte>& dst);

/// Decompresses one frame that must expand to exactly dst.size() bytes; anything else
/// (a bad frame, a different size, trailing bytes) is Corruption.
Status zstd_decompress(std::span<const std::byte> frame, std::span<std::byte> dst);

/// Compressed size of `src` in each mode (for choosing one from a sample).
Result<size_t> zstd_compressed_size(std::span<const std::byte> src, int level, ZstdMode mode);

}  // namespace jtree::codec
