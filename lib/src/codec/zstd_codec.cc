// zstd frames for chunk planes.
//
// Literals-only frames come from ZSTD_compressSequences with zero sequences: every byte is a
// literal, so zstd does no match finding and only Huffman-codes the bytes. On noisy planes
// (float exponents) this is both faster and smaller than LZ, whose spurious short matches cost
// more than they save. That API is experimental, hence ZSTD_STATIC_LINKING_ONLY and the static
// libzstd.
#include "codec/zstd_codec.h"

#include <string>

#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>
#include <zstd_errors.h>

namespace jtree::codec {
namespace {

// One compression and one decompression context per thread: creating them costs far more than
// resetting them, and chunks are encoded and decoded from many threads at once.
struct CCtxHolder {
  ZSTD_CCtx* ctx = ZSTD_createCCtx();
  CCtxHolder() = default;
  CCtxHolder(const CCtxHolder&) = delete;
  CCtxHolder& operator=(const CCtxHolder&) = delete;
  ~CCtxHolder() { ZSTD_freeCCtx(ctx); }
};

struct DCtxHolder {
  ZSTD_DCtx* ctx = ZSTD_createDCtx();
  DCtxHolder() = default;
  DCtxHolder(const DCtxHolder&) = delete;
  DCtxHolder& operator=(const DCtxHolder&) = delete;
  ~DCtxHolder() { ZSTD_freeDCtx(ctx); }
};

ZSTD_CCtx* thread_cctx() {
  thread_local CCtxHolder holder;
  return holder.ctx;
}

ZSTD_DCtx* thread_dctx() {
  thread_local DCtxHolder holder;
  return holder.ctx;
}

Status compress_error(size_t code) {
  return Status::InvalidArgument(std::string("zstd compression failed: ") +
                                 ZSTD_getErrorName(code));
}

// Configures the context for one frame; returns a zstd error code or 0.
size_t configure(ZSTD_CCtx* c, int level, ZstdMode mode) {
  ZSTD_CCtx_reset(c, ZSTD_reset_session_and_parameters);
  size_t r = ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level);
  if (ZSTD_isError(r)) return r;
  if (mode == ZstdMode::kLiterals) {
    // Entropy coding is the whole point of this mode: keep it on even at the negative levels,
    // which would otherwise store literals raw.
    r = ZSTD_CCtx_setParameter(c, ZSTD_c_literalCompressionMode, ZSTD_ps_enable);
    if (ZSTD_isError(r)) return r;
  }
  return 0;
}

// Compresses into [dst, dst + cap); returns the frame size, or 0 when it does not fit (zstd
// never writes past the capacity it is given).
Result<size_t> compress_into(std::span<const std::byte> src, int level, ZstdMode mode, void* dst,
                             size_t cap) {
  ZSTD_CCtx* c = thread_cctx();
  if (c == nullptr) return Status::ResourceExhausted("zstd: cannot allocate a context");
  size_t r = configure(c, level, mode);
  if (!ZSTD_isError(r)) {
    if (mode == ZstdMode::kLz) {
      r = ZSTD_compress2(c, dst, cap, src.data(), src.size());
    } else {
      // Zero sequences: the whole of src is literals. A dummy array rather than nullptr, in
      // case the library peeks at the first entry.
      const ZSTD_Sequence none[1] = {};
      r = ZSTD_compressSequences(c, dst, cap, none, 0, src.data(), src.size());
    }
  }
  if (ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall) return size_t{0};
  if (ZSTD_isError(r)) return compress_error(r);
  return r;
}

// Frames whose only use is their size (sampling) go to a per-thread buffer that only grows.
std::vector<std::byte>& frame_buffer(size_t bound) {
  thread_local std::vector<std::byte> buf;
  if (buf.size() < bound) buf.resize(bound);
  return buf;
}

}  // namespace

size_t zstd_compress_bound(size_t src_size) { return ZSTD_compressBound(src_size); }

Result<size_t> zstd_compress(std::span<const std::byte> src, int level, ZstdMode mode,
                             std::span<std::byte> dst) {
  return compress_into(src, level, mode, dst.data(), dst.size());
}

Result<size_t> zstd_compressed_size(std::span<const std::byte> src, int level, ZstdMode mode) {
  const size_t bound = ZSTD_compressBound(src.size());
  if (ZSTD_isError(bound)) return compress_error(bound);
  std::vector<std::byte>& buf = frame_buffer(bound);
  return compress_into(src, level, mode, buf.data(), buf.size());
}

Status zstd_decompress(std::span<const std::byte> frame, std::span<std::byte> dst) {
  // The frame must be exactly one zstd frame: no trailing bytes, no second frame.
  const size_t frame_size = ZSTD_findFrameCompressedSize(frame.data(), frame.size());
  if (ZSTD_isError(frame_size)) {
    return Status::Corruption(std::string("bad zstd frame: ") + ZSTD_getErrorName(frame_size));
  }
  if (frame_size != frame.size()) {
    return Status::Corruption("zstd frame of " + std::to_string(frame_size) +
                              " bytes followed by " + std::to_string(frame.size() - frame_size) +
                              " trailing bytes");
  }
  // A declared content size that disagrees is caught before decoding anything.
  const unsigned long long declared = ZSTD_getFrameContentSize(frame.data(), frame.size());
  if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != ZSTD_CONTENTSIZE_ERROR &&
      declared != dst.size()) {
    return Status::Corruption("zstd frame decodes to " + std::to_string(declared) +
                              " bytes, expected " + std::to_string(dst.size()));
  }
  ZSTD_DCtx* d = thread_dctx();
  if (d == nullptr) return Status::ResourceExhausted("zstd: cannot allocate a context");
  const size_t n = ZSTD_decompressDCtx(d, dst.data(), dst.size(), frame.data(), frame.size());
  if (ZSTD_isError(n)) {
    return Status::Corruption(std::string("bad zstd frame: ") + ZSTD_getErrorName(n));
  }
  if (n != dst.size()) {
    return Status::Corruption("zstd frame decodes to " + std::to_string(n) +
                              " bytes, expected " + std::to_string(dst.size()));
  }
  return Status::OK();
}

}  // namespace jtree::codec
