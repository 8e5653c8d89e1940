// zstd frames for chunk planes: the zstd PlaneCodec (its encoder's per-plane choice of mode)
// over the frame functions.
//
// Literals-only frames come from ZSTD_compressSequences with zero sequences: every byte is a
// literal, so zstd does no match finding and only Huffman-codes the bytes. On noisy planes
// (float exponents) this is both faster and smaller than LZ, whose spurious short matches cost
// more than they save. That API is experimental, hence ZSTD_STATIC_LINKING_ONLY and the static
// libzstd.
#include "codec/zstd_codec.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <string_view>

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
  return Status::invalid_argument(std::string("zstd compression failed: ") +
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
  if (c == nullptr) return Status::resource_exhausted("zstd: cannot allocate a context");
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
    return Status::corruption(std::string("bad zstd frame: ") + ZSTD_getErrorName(frame_size));
  }
  if (frame_size != frame.size()) {
    return Status::corruption("zstd frame of " + std::to_string(frame_size) +
                              " bytes followed by " + std::to_string(frame.size() - frame_size) +
                              " trailing bytes");
  }
  // A declared content size that disagrees is caught before decoding anything.
  const unsigned long long declared = ZSTD_getFrameContentSize(frame.data(), frame.size());
  if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != ZSTD_CONTENTSIZE_ERROR &&
      declared != dst.size()) {
    return Status::corruption("zstd frame decodes to " + std::to_string(declared) +
                              " bytes, expected " + std::to_string(dst.size()));
  }
  ZSTD_DCtx* d = thread_dctx();
  if (d == nullptr) return Status::resource_exhausted("zstd: cannot allocate a context");
  const size_t n = ZSTD_decompressDCtx(d, dst.data(), dst.size(), frame.data(), frame.size());
  if (ZSTD_isError(n)) {
    return Status::corruption(std::string("bad zstd frame: ") + ZSTD_getErrorName(n));
  }
  if (n != dst.size()) {
    return Status::corruption("zstd frame decodes to " + std::to_string(n) +
                              " bytes, expected " + std::to_string(dst.size()));
  }
  return Status::success();
}

// ---- the plane codec ---------------------------------------------------------------------------

namespace {

// Encoder heuristics (not part of the format).
constexpr size_t kSampleSlice = 16 * 1024;  // a plane sample is kSampleSlices slices of this
constexpr size_t kSampleSlices = 4;         // spread over the plane
constexpr size_t kSampleBytes = kSampleSlice * kSampleSlices;
// Planes up to this size take a choice made before for their leaf or kind (PlaneHints)
// instead of trying both modes on a sample: for them the trial would cost as much as, or a good
// part of, compressing the plane. Larger planes sample each time (under 7% of their cost),
// which follows data that changes along a big leaf.
constexpr size_t kSharedChoiceMax = 1 << 20;
constexpr double kRawAbove = 0.98;     // sample ratio above which a plane is not compressed
constexpr double kLiteralsWin = 0.99;  // literals-only is chosen when it is this much smaller
                                       // than LZ (float exponent planes: ~10% smaller); on
                                       // near-ties zstd's usual LZ mode is as small and, on
                                       // mixed bytes, faster both ways...
constexpr double kRunsBelow = 1.0 / 32;  // ...except on run-dominated planes (LZ ratio below
                                         // this: zeros, sparse data), where LZ encodes and
                                         // decodes faster and wins unless literals-only is
constexpr size_t kRunsTie = 256;         // smaller by more than 1/kRunsTie of the sample

// Up to kSampleBytes of `plane`: kSampleSlices slices spread evenly from start to end.
std::span<const std::byte> take_sample(std::span<const std::byte> plane,
                                       std::vector<std::byte>& buf) {
  if (plane.size() <= kSampleBytes) return plane;
  buf.resize(kSampleBytes);
  const size_t last = plane.size() - kSampleSlice;
  for (size_t j = 0; j < kSampleSlices; ++j) {
    const size_t at = last * j / (kSampleSlices - 1);
    std::memcpy(buf.data() + j * kSampleSlice, plane.data() + at, kSampleSlice);
  }
  return buf;
}

ZstdMode choose_mode(size_t literals, size_t lz, size_t sample) {
  if (static_cast<double>(lz) < static_cast<double>(sample) * kRunsBelow &&
      lz <= literals + sample / kRunsTie) {
    return ZstdMode::kLz;
  }
  return static_cast<double>(literals) <= static_cast<double>(lz) * kLiteralsWin
             ? ZstdMode::kLiterals
             : ZstdMode::kLz;
}

bool not_worth_it(size_t compressed, size_t size) {
  return static_cast<double>(compressed) > static_cast<double>(size) * kRawAbove;
}

PlaneChoice choice_of(const std::atomic<uint8_t>* slot) {
  return slot ? static_cast<PlaneChoice>(slot->load(std::memory_order_relaxed))
              : PlaneChoice::kUndecided;
}

void record(std::atomic<uint8_t>* slot, PlaneChoice c) {
  if (slot) slot->store(static_cast<uint8_t>(c), std::memory_order_relaxed);
}

// Compresses one plane into `dst`; returns the frame's size, or 0 when the plane is to be
// stored raw (it does not compress, or its frame would not fit in dst). `leaf` and `kind`
// are the plane's shared choices (PlaneHints), or null.
Result<size_t> encode_plane(std::span<const std::byte> plane, int level, std::span<std::byte> dst,
                            std::atomic<uint8_t>* leaf, std::atomic<uint8_t>* kind) {
  if (plane.size() <= kSharedChoiceMax) {
    PlaneChoice known = choice_of(leaf);
    if (known == PlaneChoice::kUndecided) known = choice_of(kind);
    if (known != PlaneChoice::kUndecided) {
      // Decided by an earlier plane of this leaf or kind: one compression. (A Raw choice still
      // tries literals-only, the cheapest mode, for planes unlike the one that decided.)
      // (Into a frame of the full bound, then copied: zstd's literals-only path reports a
      // generic error, not dstSize_tooSmall, when given much less room than the plane.)
      const bool lz = known == PlaneChoice::kLz;
      thread_local std::vector<std::byte> frame;
      frame.resize(zstd_compress_bound(plane.size()));
      JTREE_ASSIGN_OR_RETURN(const size_t size,
                             zstd_compress(plane, level, lz ? ZstdMode::kLz : ZstdMode::kLiterals,
                                           frame));
      const bool pays = !not_worth_it(size, plane.size());
      record(leaf, !pays ? PlaneChoice::kRaw : lz ? PlaneChoice::kLz : PlaneChoice::kLiterals);
      if (!pays || size > dst.size()) return size_t{0};
      std::memcpy(dst.data(), frame.data(), size);
      return size;
    }
  }
  if (plane.size() <= kSampleBytes) {
    // The sample would be the whole plane: compress it both ways and keep the better frame.
    thread_local std::vector<std::byte> lit_frame, lz_frame;
    const size_t bound = zstd_compress_bound(plane.size());
    lit_frame.resize(bound);
    lz_frame.resize(bound);
    JTREE_ASSIGN_OR_RETURN(const size_t lit,
                           zstd_compress(plane, level, ZstdMode::kLiterals, lit_frame));
    JTREE_ASSIGN_OR_RETURN(const size_t lz, zstd_compress(plane, level, ZstdMode::kLz, lz_frame));
    const bool use_lz = choose_mode(lit, lz, plane.size()) == ZstdMode::kLz;
    const size_t size = use_lz ? lz : lit;
    const bool raw = not_worth_it(size, plane.size());
    const PlaneChoice chosen =
        raw ? PlaneChoice::kRaw : use_lz ? PlaneChoice::kLz : PlaneChoice::kLiterals;
    record(leaf, chosen);
    record(kind, chosen);
    if (raw || size > dst.size()) return size_t{0};
    std::memcpy(dst.data(), (use_lz ? lz_frame : lit_frame).data(), size);
    return size;
  }
  thread_local std::vector<std::byte> sample_buf;
  const std::span<const std::byte> sample = take_sample(plane, sample_buf);
  JTREE_ASSIGN_OR_RETURN(const size_t lit,
                         zstd_compressed_size(sample, level, ZstdMode::kLiterals));
  JTREE_ASSIGN_OR_RETURN(const size_t lz, zstd_compressed_size(sample, level, ZstdMode::kLz));
  const ZstdMode mode = choose_mode(lit, lz, sample.size());
  const bool raw = not_worth_it(std::min(lit, lz), sample.size());
  const PlaneChoice chosen =
      raw ? PlaneChoice::kRaw : mode == ZstdMode::kLz ? PlaneChoice::kLz : PlaneChoice::kLiterals;
  if (plane.size() <= kSharedChoiceMax) {
    record(leaf, chosen);
    record(kind, chosen);
  }
  if (raw) return size_t{0};
  // Straight into the chunk's bytes: 0 when the frame would not beat the raw plane or not fit.
  return zstd_compress(plane, level, mode, dst);
}

class ZstdPlaneCodec final : public PlaneCodec {
 public:
  Codec id() const override { return Codec::kZstd; }
  std::string_view name() const override { return "zstd"; }
  size_t compress_bound(size_t plane_size) const override {
    return zstd_compress_bound(plane_size);
  }
  Result<size_t> encode(std::span<const std::byte> plane, int level, PlaneHints hints,
                        std::span<std::byte> dst) const override {
    return encode_plane(plane, level, dst, hints.leaf, hints.kind);
  }
  Status decode(std::span<const std::byte> payload, std::span<std::byte> dst) const override {
    return zstd_decompress(payload, dst);
  }
  // zstd's own range (its fast negative levels go far below what the header's byte holds).
  std::pair<int, int> levels() const override {
    return {std::max(ZSTD_minCLevel(), -128), ZSTD_maxCLevel()};
  }
};

}  // namespace

const PlaneCodec& zstd_plane_codec() {
  static const ZstdPlaneCodec codec;
  return codec;
}

}  // namespace jtree::codec
