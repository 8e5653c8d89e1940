// Byte-plane shuffle and float rotation kernels.
//
// The shuffle of a power-of-two width W is done as log2(W) rounds of "split the byte stream into
// its even and its odd bytes" (SSE2 pack), which after the last round leaves plane k in register
// k; unshuffle runs the inverse rounds (byte interleave, SSE2 unpack). The same scheme serves
// SSE2 (baseline on x86-64) and AVX2 (picked at run time); elements that do not fill a whole
// vector block, other widths and other architectures go through the scalar loops.
#include "codec/byte_planes.h"

#include <cassert>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace jtree::codec {
namespace {

// ---- scalar ------------------------------------------------------------------------------------

// Shuffles elements [begin, n); a compile-time width lets the compiler unroll the inner loop.
template <size_t W>
void shuffle_scalar(const std::byte* src, std::byte* dst, size_t n, size_t begin) {
  for (size_t i = begin; i < n; ++i) {
    for (size_t k = 0; k < W; ++k) dst[k * n + i] = src[i * W + k];
  }
}

template <size_t W>
void unshuffle_scalar(const std::byte* src, std::byte* dst, size_t n, size_t begin) {
  for (size_t i = begin; i < n; ++i) {
    for (size_t k = 0; k < W; ++k) dst[i * W + k] = src[k * n + i];
  }
}

void shuffle_generic(const std::byte* src, std::byte* dst, size_t n, size_t width) {
  for (size_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < width; ++k) dst[k * n + i] = src[i * width + k];
  }
}

void unshuffle_generic(const std::byte* src, std::byte* dst, size_t n, size_t width) {
  for (size_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < width; ++k) dst[i * width + k] = src[k * n + i];
  }
}

template <typename U, bool kLeft>
void rotate_scalar(std::byte* p, size_t count) {
  constexpr int kBits = sizeof(U) * 8;
  for (size_t i = 0; i < count; ++i) {
    U x;
    std::memcpy(&x, p + i * sizeof(U), sizeof(U));
    x = kLeft ? static_cast<U>((x << 1) | (x >> (kBits - 1)))
              : static_cast<U>((x >> 1) | (x << (kBits - 1)));
    std::memcpy(p + i * sizeof(U), &x, sizeof(U));
  }
}

// ---- x86-64 vector kernels ---------------------------------------------------------------------
// Each returns how many leading elements it handled (a multiple of its block); the caller
// finishes the tail with the scalar loop.
#if defined(__x86_64__)

// JTREE_CODEC_NO_AVX2 (any value) forces the SSE2 kernels: for testing them on AVX2 machines
// and for comparing the two.
bool cpu_has_avx2() {
  static const bool has =
      __builtin_cpu_supports("avx2") && std::getenv("JTREE_CODEC_NO_AVX2") == nullptr;
  return has;
}

// Registers hold a stream of bytes; with S streams of `len` registers each (S * len = W), a
// round replaces stream s by its even bytes (new stream s) and its odd bytes (new stream S + s).
// Starting from the W registers of 16 consecutive elements, after log2(W) rounds register k
// holds byte k of the 16 elements, i.e. plane k: byte position p ends in stream p because each
// round moves bit j of p into the stream index (evens first keeps the planes in order).
template <size_t W, size_t Len>
inline void shuffle_rounds_sse2(__m128i* v, __m128i low) {
  if constexpr (Len > 1) {
    constexpr size_t kStreams = W / Len, kHalf = Len / 2;
    __m128i t[W];
#pragma GCC unroll 16
    for (size_t s = 0; s < kStreams; ++s) {
#pragma GCC unroll 16
      for (size_t q = 0; q < kHalf; ++q) {
        const __m128i x = v[s * Len + 2 * q], y = v[s * Len + 2 * q + 1];
        t[s * kHalf + q] = _mm_packus_epi16(_mm_and_si128(x, low), _mm_and_si128(y, low));
        t[(kStreams + s) * kHalf + q] =
            _mm_packus_epi16(_mm_srli_epi16(x, 8), _mm_srli_epi16(y, 8));
      }
    }
#pragma GCC unroll 16
    for (size_t r = 0; r < W; ++r) v[r] = t[r];
    shuffle_rounds_sse2<W, Len / 2>(v, low);
  }
}

template <size_t W>
size_t shuffle_sse2(const std::byte* src, std::byte* dst, size_t n) {
  const __m128i low = _mm_set1_epi16(0x00FF);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m128i v[W];
#pragma GCC unroll 16
    for (size_t r = 0; r < W; ++r) {
      v[r] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i * W + 16 * r));
    }
    shuffle_rounds_sse2<W, W>(v, low);
#pragma GCC unroll 16
    for (size_t k = 0; k < W; ++k) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + k * n + i), v[k]);
    }
  }
  return i;
}

// The inverse rounds: 2S streams of `len` registers become S streams of 2 * len, stream s
// being the byte interleave of stream s (even bytes) and stream S + s (odd bytes).
template <size_t W, size_t Len>
inline void unshuffle_rounds_sse2(__m128i* v) {
  if constexpr (Len < W) {
    constexpr size_t kStreams = W / (2 * Len);
    __m128i t[W];
#pragma GCC unroll 16
    for (size_t s = 0; s < kStreams; ++s) {
#pragma GCC unroll 16
      for (size_t q = 0; q < Len; ++q) {
        const __m128i e = v[s * Len + q], o = v[(kStreams + s) * Len + q];
        t[s * 2 * Len + 2 * q] = _mm_unpacklo_epi8(e, o);
        t[s * 2 * Len + 2 * q + 1] = _mm_unpackhi_epi8(e, o);
      }
    }
#pragma GCC unroll 16
    for (size_t r = 0; r < W; ++r) v[r] = t[r];
    unshuffle_rounds_sse2<W, Len * 2>(v);
  }
}

template <size_t W>
size_t unshuffle_sse2(const std::byte* src, std::byte* dst, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m128i v[W];
#pragma GCC unroll 16
    for (size_t k = 0; k < W; ++k) {
      v[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + k * n + i));
    }
    unshuffle_rounds_sse2<W, 1>(v);
#pragma GCC unroll 16
    for (size_t r = 0; r < W; ++r) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i * W + 16 * r), v[r]);
    }
  }
  return i;
}

// AVX2 packs and unpacks work within 128-bit lanes; a qword permute (0, 2, 1, 3) after each
// pack, and before each unpack, restores the element order.
#define JTREE_AVX2_INLINE __attribute__((target("avx2"), always_inline)) inline

template <size_t W, size_t Len>
JTREE_AVX2_INLINE void shuffle_rounds_avx2(__m256i* v, __m256i low) {
  if constexpr (Len > 1) {
    constexpr size_t kStreams = W / Len, kHalf = Len / 2;
    __m256i t[W];
#pragma GCC unroll 16
    for (size_t s = 0; s < kStreams; ++s) {
#pragma GCC unroll 16
      for (size_t q = 0; q < kHalf; ++q) {
        const __m256i x = v[s * Len + 2 * q], y = v[s * Len + 2 * q + 1];
        const __m256i even =
            _mm256_packus_epi16(_mm256_and_si256(x, low), _mm256_and_si256(y, low));
        const __m256i odd = _mm256_packus_epi16(_mm256_srli_epi16(x, 8), _mm256_srli_epi16(y, 8));
        t[s * kHalf + q] = _mm256_permute4x64_epi64(even, 0xD8);
        t[(kStreams + s) * kHalf + q] = _mm256_permute4x64_epi64(odd, 0xD8);
      }
    }
#pragma GCC unroll 16
    for (size_t r = 0; r < W; ++r) v[r] = t[r];
    shuffle_rounds_avx2<W, Len / 2>(v, low);
  }
}

template <size_t W>
__attribute__((target("avx2"))) size_t shuffle_avx2(const std::byte* src, std::byte* dst,
                                                    size_t n) {
  const __m256i low = _mm256_set1_epi16(0x00FF);
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i v[W];
#pragma GCC unroll 16
    for (size_t r = 0; r < W; ++r) {
      v[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i * W + 32 * r));
    }
    shuffle_rounds_avx2<W, W>(v, low);
#pragma GCC unroll 16
    for (size_t k = 0; k < W; ++k) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + k * n + i), v[k]);
    }
  }
  return i;
}

template <size_t W, size_t Len>
JTREE_AVX2_INLINE void unshuffle_rounds_avx2(__m256i* v) {
  if constexpr (Len < W) {
    constexpr size_t kStreams = W / (2 * Len);
    __m256i t[W];
#pragma GCC unroll 16
    for (size_t s = 0; s < kStreams; ++s) {
#pragma GCC unroll 16
      for (size_t q = 0; q < Len; ++q) {
        const __m256i e = _mm256_permute4x64_epi64(v[s * Len + q], 0xD8);
        const __m256i o = _mm256_permute4x64_epi64(v[(kStreams + s) * Len + q], 0xD8);
        t[s * 2 * Len + 2 * q] = _mm256_unpacklo_epi8(e, o);
        t[s * 2 * Len + 2 * q + 1] = _mm256_unpackhi_epi8(e, o);
      }
    }
#pragma GCC unroll 16
    for (size_t r = 0; r < W; ++r) v[r] = t[r];
    unshuffle_rounds_avx2<W, Len * 2>(v);
  }
}

template <size_t W>
__attribute__((target("avx2"))) size_t unshuffle_avx2(const std::byte* src, std::byte* dst,
                                                      size_t n) {
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i v[W];
#pragma GCC unroll 16
    for (size_t k = 0; k < W; ++k) {
      v[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + k * n + i));
    }
    unshuffle_rounds_avx2<W, 1>(v);
#pragma GCC unroll 16
    for (size_t r = 0; r < W; ++r) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i * W + 32 * r), v[r]);
    }
  }
  return i;
}

#undef JTREE_AVX2_INLINE

// Rotation by one bit of every lane of `bits` bits (16, 32, 64).
template <int kBits, bool kLeft>
__m128i rotate_sse2_vec(__m128i x) {
  if constexpr (kBits == 16) {
    return kLeft ? _mm_or_si128(_mm_slli_epi16(x, 1), _mm_srli_epi16(x, 15))
                 : _mm_or_si128(_mm_srli_epi16(x, 1), _mm_slli_epi16(x, 15));
  } else if constexpr (kBits == 32) {
    return kLeft ? _mm_or_si128(_mm_slli_epi32(x, 1), _mm_srli_epi32(x, 31))
                 : _mm_or_si128(_mm_srli_epi32(x, 1), _mm_slli_epi32(x, 31));
  } else {
    return kLeft ? _mm_or_si128(_mm_slli_epi64(x, 1), _mm_srli_epi64(x, 63))
                 : _mm_or_si128(_mm_srli_epi64(x, 1), _mm_slli_epi64(x, 63));
  }
}

template <int kBits, bool kLeft>
__attribute__((target("avx2"))) __m256i rotate_avx2_vec(__m256i x) {
  if constexpr (kBits == 16) {
    return kLeft ? _mm256_or_si256(_mm256_slli_epi16(x, 1), _mm256_srli_epi16(x, 15))
                 : _mm256_or_si256(_mm256_srli_epi16(x, 1), _mm256_slli_epi16(x, 15));
  } else if constexpr (kBits == 32) {
    return kLeft ? _mm256_or_si256(_mm256_slli_epi32(x, 1), _mm256_srli_epi32(x, 31))
                 : _mm256_or_si256(_mm256_srli_epi32(x, 1), _mm256_slli_epi32(x, 31));
  } else {
    return kLeft ? _mm256_or_si256(_mm256_slli_epi64(x, 1), _mm256_srli_epi64(x, 63))
                 : _mm256_or_si256(_mm256_srli_epi64(x, 1), _mm256_slli_epi64(x, 63));
  }
}

// Returns the number of bytes handled (a multiple of 64 / 128).
template <int kBits, bool kLeft>
size_t rotate_sse2(std::byte* p, size_t size) {
  size_t i = 0;
  for (; i + 64 <= size; i += 64) {
    auto* q = reinterpret_cast<__m128i*>(p + i);
    const __m128i a = rotate_sse2_vec<kBits, kLeft>(_mm_loadu_si128(q));
    const __m128i b = rotate_sse2_vec<kBits, kLeft>(_mm_loadu_si128(q + 1));
    const __m128i c = rotate_sse2_vec<kBits, kLeft>(_mm_loadu_si128(q + 2));
    const __m128i d = rotate_sse2_vec<kBits, kLeft>(_mm_loadu_si128(q + 3));
    _mm_storeu_si128(q, a);
    _mm_storeu_si128(q + 1, b);
    _mm_storeu_si128(q + 2, c);
    _mm_storeu_si128(q + 3, d);
  }
  return i;
}

template <int kBits, bool kLeft>
__attribute__((target("avx2"))) size_t rotate_avx2(std::byte* p, size_t size) {
  size_t i = 0;
  for (; i + 128 <= size; i += 128) {
    auto* q = reinterpret_cast<__m256i*>(p + i);
    const __m256i a = rotate_avx2_vec<kBits, kLeft>(_mm256_loadu_si256(q));
    const __m256i b = rotate_avx2_vec<kBits, kLeft>(_mm256_loadu_si256(q + 1));
    const __m256i c = rotate_avx2_vec<kBits, kLeft>(_mm256_loadu_si256(q + 2));
    const __m256i d = rotate_avx2_vec<kBits, kLeft>(_mm256_loadu_si256(q + 3));
    _mm256_storeu_si256(q, a);
    _mm256_storeu_si256(q + 1, b);
    _mm256_storeu_si256(q + 2, c);
    _mm256_storeu_si256(q + 3, d);
  }
  return i;
}

#endif  // __x86_64__

template <size_t W>
void shuffle_fixed(const std::byte* src, std::byte* dst, size_t n) {
  size_t done = 0;
#if defined(__x86_64__)
  done = cpu_has_avx2() ? shuffle_avx2<W>(src, dst, n) : shuffle_sse2<W>(src, dst, n);
#endif
  shuffle_scalar<W>(src, dst, n, done);
}

template <size_t W>
void unshuffle_fixed(const std::byte* src, std::byte* dst, size_t n) {
  size_t done = 0;
#if defined(__x86_64__)
  done = cpu_has_avx2() ? unshuffle_avx2<W>(src, dst, n) : unshuffle_sse2<W>(src, dst, n);
#endif
  unshuffle_scalar<W>(src, dst, n, done);
}

template <typename U, bool kLeft>
void rotate_fixed(std::byte* p, size_t size) {
  size_t done = 0;
#if defined(__x86_64__)
  constexpr int kBits = sizeof(U) * 8;
  done = cpu_has_avx2() ? rotate_avx2<kBits, kLeft>(p, size) : rotate_sse2<kBits, kLeft>(p, size);
#endif
  rotate_scalar<U, kLeft>(p + done, (size - done) / sizeof(U));
}

template <bool kLeft>
void rotate(std::span<std::byte> data, size_t component) {
  assert(data.size() % component == 0);
  switch (component) {
    case 2: return rotate_fixed<uint16_t, kLeft>(data.data(), data.size());
    case 4: return rotate_fixed<uint32_t, kLeft>(data.data(), data.size());
    case 8: return rotate_fixed<uint64_t, kLeft>(data.data(), data.size());
    default: assert(false && "rotate: component must be 2, 4 or 8");
  }
}

}  // namespace

void shuffle(std::span<const std::byte> src, std::span<std::byte> dst, size_t width) {
  assert(width >= 1 && src.size() == dst.size() && src.size() % width == 0);
  const size_t n = src.size() / width;
  if (n == 0) return;
  switch (width) {
    case 1: std::memcpy(dst.data(), src.data(), n); return;
    case 2: return shuffle_fixed<2>(src.data(), dst.data(), n);
    case 4: return shuffle_fixed<4>(src.data(), dst.data(), n);
    case 8: return shuffle_fixed<8>(src.data(), dst.data(), n);
    case 16: return shuffle_fixed<16>(src.data(), dst.data(), n);
    default: return shuffle_generic(src.data(), dst.data(), n, width);
  }
}

void unshuffle(std::span<const std::byte> src, std::span<std::byte> dst, size_t width) {
  assert(width >= 1 && src.size() == dst.size() && src.size() % width == 0);
  const size_t n = src.size() / width;
  if (n == 0) return;
  switch (width) {
    case 1: std::memcpy(dst.data(), src.data(), n); return;
    case 2: return unshuffle_fixed<2>(src.data(), dst.data(), n);
    case 4: return unshuffle_fixed<4>(src.data(), dst.data(), n);
    case 8: return unshuffle_fixed<8>(src.data(), dst.data(), n);
    case 16: return unshuffle_fixed<16>(src.data(), dst.data(), n);
    default: return unshuffle_generic(src.data(), dst.data(), n, width);
  }
}

void rotate_left_1(std::span<std::byte> data, size_t component) {
  rotate<true>(data, component);
}

void rotate_right_1(std::span<std::byte> data, size_t component) {
  rotate<false>(data, component);
}

}  // namespace jtree::codec
