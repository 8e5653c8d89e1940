// Chunk codec: round trips over every dtype / filter / level, the compression the encoder must
// reach on realistic data, and a decoder fed hostile bytes.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <zstd.h>

#include "codec/chunk_codec.h"
#include "codec/zstd_codec.h"
#include "jtree/dtype.h"
#include "../synthetic_weights.h"
#include "util/endian.h"

namespace {

using jtree::ChunkEncoding;
using jtree::Codec;
using jtree::DType;
using jtree::Filter;
using jtree::Status;
using jtree::StatusCode;
using jtree::codec::ChunkFormat;
using jtree::codec::decode_chunk;
using jtree::codec::decode_chunk_range;
using jtree::codec::encode_chunk;
using jtree::codec::filter_allowed;
using jtree::codec::plane_count;
using jtree::codec::ZstdMode;

using Bytes = std::vector<std::byte>;

enum class Kind { kZeros, kRandom, kSmooth };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kZeros: return "zeros";
    case Kind::kRandom: return "random";
    case Kind::kSmooth: return "smooth";
  }
  return "?";
}

template <typename T>
void put(Bytes& b, size_t i, T v) {
  std::memcpy(b.data() + i * sizeof(T), &v, sizeof(T));
}

// bf16 weights ~ normal(0, 0.02), as a model's parameters look.
Bytes bf16_weights(size_t elements, uint64_t seed) {
  return jtree::synthetic::bf16_normal(elements, 0.02f, seed);
}

// "Smooth" data of each dtype: what real arrays of it look like, as far as the codec cares.
Bytes make_data(DType dtype, size_t elements, Kind kind, uint64_t seed) {
  const auto info = *jtree::dtype_info(dtype);
  const size_t size = jtree::stored_bytes(dtype, elements);
  Bytes b(size);
  std::mt19937_64 rng(seed);
  if (kind == Kind::kZeros) return b;
  if (kind == Kind::kRandom) {
    for (auto& x : b) x = std::byte(static_cast<uint8_t>(rng()));
    return b;
  }
  if (info.float_component == 2) return bf16_weights(elements, seed);
  if (info.float_component == 4) {
    std::normal_distribution<float> normal(0.0f, 1e-3f);
    for (size_t i = 0; i < size / 4; ++i) put<float>(b, i, normal(rng));
    return b;
  }
  if (info.float_component == 8) {
    std::normal_distribution<double> normal(0.0, 1.0);
    for (size_t i = 0; i < size / 8; ++i) put<double>(b, i, normal(rng));
    return b;
  }
  // Integers (and fp8 / 4-bit codes): small values around zero.
  std::normal_distribution<double> normal(0.0, 20.0);
  const size_t w = info.stored_bits / 8;
  if (w == 0) {  // packed nibbles
    for (auto& x : b) x = std::byte(static_cast<uint8_t>(rng() & 0x33));
    return b;
  }
  for (size_t i = 0; i < size / w; ++i) {
    const int64_t v = static_cast<int64_t>(std::lround(normal(rng)));
    for (size_t k = 0; k < w; ++k) {
      b[i * w + k] = std::byte(static_cast<uint8_t>(k < 8 ? (v >> (8 * k)) : (v >> 63)));
    }
  }
  return b;
}

struct Encoded {
  ChunkEncoding encoding = ChunkEncoding::kRaw;
  Bytes stored;
};

Encoded encode(const Bytes& raw, const ChunkFormat& format) {
  jtree::ScratchBytes out(3);  // not empty on entry: encode must clear it
  jtree::ScratchBytes scratch;
  auto r = encode_chunk(raw, format, out, scratch);
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  Encoded e;
  e.encoding = *r;
  if (*r == ChunkEncoding::kRaw) {
    CHECK(out.empty());
    e.stored = raw;
  } else {
    e.stored.assign(out.begin(), out.end());
  }
  return e;
}

Status decode(const Bytes& stored, ChunkEncoding encoding, const ChunkFormat& format,
              Bytes& raw) {
  jtree::ScratchBytes scratch;
  return decode_chunk(stored, encoding, format, raw, scratch);
}

// Encodes, decodes, requires the bytes back; returns the encoding.
Encoded check_roundtrip(const Bytes& raw, const ChunkFormat& format) {
  Encoded e = encode(raw, format);
  Bytes back(raw.size(), std::byte{0xCD});
  const Status s = decode(e.stored, e.encoding, format, back);
  REQUIRE_MESSAGE(s.ok(), s.to_string());
  CHECK(back == raw);
  return e;
}

double ratio(const Encoded& e, size_t raw_size) {
  return static_cast<double>(e.stored.size()) / static_cast<double>(raw_size);
}

std::vector<uint32_t> plane_sizes(const Bytes& stored, size_t p) {
  std::vector<uint32_t> s(p);
  for (size_t k = 0; k < p; ++k) s[k] = jtree::load_le<uint32_t>(stored.data() + 4 * k);
  return s;
}

const Filter kFilters[] = {Filter::kNone, Filter::kShuffle, Filter::kFloatSplit};

}  // namespace

TEST_CASE("plane_count and filter_allowed") {
  CHECK(plane_count({DType::kBFloat16, Filter::kFloatSplit, Codec::kZstd}) == 2);
  CHECK(plane_count({DType::kComplex64, Filter::kFloatSplit, Codec::kZstd}) == 8);
  CHECK(plane_count({DType::kComplex128, Filter::kShuffle, Codec::kZstd}) == 16);
  CHECK(plane_count({DType::kFloat32, Filter::kNone, Codec::kZstd}) == 1);
  CHECK(plane_count({DType::kInt8, Filter::kShuffle, Codec::kZstd}) == 1);
  CHECK(filter_allowed(Filter::kNone, DType::kInt4));
  CHECK_FALSE(filter_allowed(Filter::kShuffle, DType::kInt4));
  CHECK_FALSE(filter_allowed(Filter::kShuffle, DType::kFloat4E2M1FN));
  CHECK(filter_allowed(Filter::kShuffle, DType::kFloat8E4M3FN));
  CHECK_FALSE(filter_allowed(Filter::kFloatSplit, DType::kFloat8E4M3FN));
  CHECK_FALSE(filter_allowed(Filter::kFloatSplit, DType::kInt32));
  CHECK(filter_allowed(Filter::kFloatSplit, DType::kComplex128));
  CHECK_FALSE(filter_allowed(Filter::kNone, DType::kInvalid));
  CHECK_FALSE(filter_allowed(static_cast<Filter>(9), DType::kFloat32));
}

TEST_CASE("zstd frames of both modes are standard zstd frames") {
  Bytes skewed(100000);
  std::mt19937_64 rng(3);
  for (auto& b : skewed) b = std::byte(static_cast<uint8_t>(120 + (rng() % 8) * (rng() % 3)));
  for (ZstdMode mode : {ZstdMode::kLz, ZstdMode::kLiterals}) {
    for (int level : {-1, 1, 3, 19}) {
      CAPTURE(level);
      CAPTURE(static_cast<int>(mode));
      Bytes frame(jtree::codec::zstd_compress_bound(skewed.size()));
      auto n = jtree::codec::zstd_compress(skewed, level, mode, frame);
      REQUIRE(n.ok());
      REQUIRE(*n > 0);
      frame.resize(*n);
      // A frame that does not fit is 0, and nothing is written past the room given. (zstd
      // asks for a few bytes of room beyond the frame: 8-9 on these sizes.)
      Bytes tight(*n + 16);
      tight[*n - 1] = std::byte{0x5A};
      auto too_small = jtree::codec::zstd_compress(skewed, level, mode, {tight.data(), *n - 1});
      REQUIRE(too_small.ok());
      CHECK(*too_small == 0);
      CHECK(tight[*n - 1] == std::byte{0x5A});
      auto fits = jtree::codec::zstd_compress(skewed, level, mode, tight);
      REQUIRE(fits.ok());
      CHECK(*fits == *n);
      tight.resize(*n);
      CHECK(tight == frame);
      // Literals-only keeps entropy coding even at negative levels.
      if (mode == ZstdMode::kLiterals) CHECK(*n < skewed.size() * 6 / 10);
      auto sz = jtree::codec::zstd_compressed_size(skewed, level, mode);
      REQUIRE(sz.ok());
      CHECK(*sz == *n);
      Bytes back(skewed.size());
      CHECK(ZSTD_decompress(back.data(), back.size(), frame.data(), frame.size()) ==
            skewed.size());
      CHECK(back == skewed);
      CHECK(jtree::codec::zstd_decompress(frame, back).ok());
    }
  }
}

TEST_CASE("round trip: every dtype, filter, codec, level, size and data kind") {
  const size_t counts[] = {0, 1, 37, 4099, 70001};
  for (int code = 1; code < jtree::kDTypeCodeEnd; ++code) {
    const auto dtype = static_cast<DType>(code);
    for (Filter filter : kFilters) {
      if (!filter_allowed(filter, dtype)) continue;
      for (int level : {0, -1, 1, 3, 19}) {  // level 0 here stands for Codec::kRaw
        for (size_t count : counts) {
          if (level == 19 && count > 4099) continue;  // keeps the test fast
          for (Kind kind : {Kind::kZeros, Kind::kRandom, Kind::kSmooth}) {
            CAPTURE(jtree::dtype_name(dtype));
            CAPTURE(static_cast<int>(filter));
            CAPTURE(level);
            CAPTURE(count);
            CAPTURE(kind_name(kind));
            ChunkFormat f{dtype, filter, level == 0 ? Codec::kRaw : Codec::kZstd, level};
            const Bytes raw = make_data(dtype, count, kind, 31 * code + count);
            const Encoded e = check_roundtrip(raw, f);
            if (f.codec == Codec::kRaw || count == 0 || kind == Kind::kRandom) {
              CHECK(e.encoding == ChunkEncoding::kRaw);
            }
            if (kind == Kind::kZeros && f.codec == Codec::kZstd && raw.size() >= 65536) {
              CHECK(e.encoding == ChunkEncoding::kPlanes);
              CHECK(ratio(e, raw.size()) < 0.01);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("a part of a chunk decodes to the same bytes as that part of the whole") {
  // decode_chunk_range (reads of part of a chunk: rows of a slice) against decode_chunk, for
  // every dtype and filter, stored Raw, as raw planes and as compressed planes; parts at the
  // start, in the middle, at the end, of one element and empty.
  const size_t count = 4099;
  for (int code = 1; code < jtree::kDTypeCodeEnd; ++code) {
    const auto dtype = static_cast<DType>(code);
    if (jtree::is_4bit(dtype)) continue;  // (whole chunks only: below)
    const size_t w = jtree::dtype_info(dtype)->stored_bits / 8;
    for (Filter filter : kFilters) {
      if (!filter_allowed(filter, dtype)) continue;
      for (Kind kind : {Kind::kZeros, Kind::kRandom, Kind::kSmooth}) {
        for (Codec codec : {Codec::kRaw, Codec::kZstd}) {
          CAPTURE(jtree::dtype_name(dtype));
          CAPTURE(static_cast<int>(filter));
          CAPTURE(kind_name(kind));
          const ChunkFormat f{dtype, filter, codec, 1};
          const Bytes raw = make_data(dtype, count, kind, 7 * code);
          const Encoded e = encode(raw, f);
          const std::pair<size_t, size_t> parts[] = {
              {0, 100}, {1000, 2000}, {count - 37, count}, {17, 18}, {5, 5}, {0, count}};
          for (auto [a, b] : parts) {
            CAPTURE(a);
            CAPTURE(b);
            Bytes part((b - a) * w, std::byte{0xCD});
            jtree::ScratchBytes scratch;
            const Status st =
                decode_chunk_range(e.stored, e.encoding, f, raw.size(), a * w, part, scratch);
            REQUIRE_MESSAGE(st.ok(), st.to_string());
            CHECK(std::equal(part.begin(), part.end(), raw.begin() + a * w));
          }
        }
      }
    }
  }
}

TEST_CASE("a part of a chunk that is not whole elements, or outside it, is refused") {
  const ChunkFormat f{DType::kBFloat16, Filter::kFloatSplit, Codec::kZstd, 1};
  const Bytes raw = bf16_weights(2048, 3);
  const Encoded e = encode(raw, f);
  REQUIRE(e.encoding == jtree::ChunkEncoding::kPlanes);
  jtree::ScratchBytes scratch;
  Bytes part(4);
  CHECK(decode_chunk_range(e.stored, e.encoding, f, raw.size(), 1, part, scratch).code() ==
        StatusCode::kInvalidArgument);  // starts inside an element
  Bytes odd(3);
  CHECK(decode_chunk_range(e.stored, e.encoding, f, raw.size(), 2, odd, scratch).code() ==
        StatusCode::kInvalidArgument);  // ends inside one
  CHECK(decode_chunk_range(e.stored, e.encoding, f, raw.size(), raw.size() - 2, part, scratch)
            .code() == StatusCode::kInvalidArgument);  // past the end
  // A damaged chunk is Corruption for a part as for the whole.
  Bytes bad = e.stored;
  bad.pop_back();
  CHECK(decode_chunk_range(bad, e.encoding, f, raw.size(), 0, part, scratch).code() ==
        StatusCode::kCorruption);
  // 4-bit dtypes (two elements a byte): the whole chunk only.
  const ChunkFormat f4{DType::kInt4, Filter::kNone, Codec::kZstd, 1};
  const Bytes raw4 = make_data(DType::kInt4, 4096, Kind::kSmooth, 5);
  const Encoded e4 = encode(raw4, f4);
  Bytes half4(raw4.size() / 2);
  CHECK(decode_chunk_range(e4.stored, e4.encoding, f4, raw4.size(), 0, half4, scratch).code() ==
        StatusCode::kInvalidArgument);
  Bytes whole4(raw4.size());
  CHECK(decode_chunk_range(e4.stored, e4.encoding, f4, raw4.size(), 0, whole4, scratch).ok());
  CHECK(whole4 == raw4);
}

TEST_CASE("round trip: 4 MiB chunks of every dtype and filter at level 1") {
  for (int code = 1; code < jtree::kDTypeCodeEnd; ++code) {
    const auto dtype = static_cast<DType>(code);
    const auto info = *jtree::dtype_info(dtype);
    const size_t count = (size_t{4} << 20) * 8 / info.stored_bits;
    const Bytes raw = make_data(dtype, count, Kind::kSmooth, code);
    REQUIRE(raw.size() == (size_t{4} << 20));
    for (Filter filter : kFilters) {
      if (!filter_allowed(filter, dtype)) continue;
      CAPTURE(jtree::dtype_name(dtype));
      CAPTURE(static_cast<int>(filter));
      const Encoded e = check_roundtrip(raw, {dtype, filter, Codec::kZstd, 1});
      // Smooth data always pays when split into planes.
      if (filter != Filter::kNone) CHECK(e.encoding == ChunkEncoding::kPlanes);
    }
  }
}

TEST_CASE("compression targets on 4 MiB chunks") {
  const size_t mib4 = size_t{4} << 20;
  SUBCASE("bf16 normal(0, 0.02) weights, FloatSplit + zstd 1: within 2% of the entropy bound") {
    const Bytes raw = bf16_weights(mib4 / 2, 42);
    const Encoded e =
        check_roundtrip(raw, {DType::kBFloat16, Filter::kFloatSplit, Codec::kZstd, 1});
    REQUIRE(e.encoding == ChunkEncoding::kPlanes);
    const auto sizes = plane_sizes(e.stored, 2);
    CHECK(sizes[0] == mib4 / 2);  // sign + mantissa: stored raw, not compressed
    CHECK(sizes[1] < mib4 / 2 / 2);
    const double r = ratio(e, raw.size());
    MESSAGE("bf16 normal(0, 0.02) FloatSplit+zstd-1 stored/raw = " << r);
    CHECK(r <= 0.675);
  }
  SUBCASE("fp32 normal(0, 1e-3), FloatSplit + zstd 1") {
    const Bytes raw = make_data(DType::kFloat32, mib4 / 4, Kind::kSmooth, 7);
    const Encoded split =
        check_roundtrip(raw, {DType::kFloat32, Filter::kFloatSplit, Codec::kZstd, 1});
    const Encoded shuf = check_roundtrip(raw, {DType::kFloat32, Filter::kShuffle, Codec::kZstd, 1});
    MESSAGE("fp32 normal(0, 1e-3): FloatSplit " << ratio(split, mib4) << ", Shuffle "
                                                << ratio(shuf, mib4));
    CHECK(ratio(split, mib4) < 0.88);
    CHECK(ratio(split, mib4) <= ratio(shuf, mib4));
  }
  SUBCASE("zeros compress to under 1%") {
    const Bytes raw(mib4);
    for (Filter filter : {Filter::kNone, Filter::kShuffle}) {
      const Encoded e = check_roundtrip(raw, {DType::kInt32, filter, Codec::kZstd, 1});
      CHECK(e.encoding == ChunkEncoding::kPlanes);
      CHECK(ratio(e, mib4) < 0.01);
    }
  }
  SUBCASE("random bytes are stored raw") {
    const Bytes raw = make_data(DType::kUInt32, mib4 / 4, Kind::kRandom, 9);
    for (Filter filter : {Filter::kNone, Filter::kShuffle}) {
      CHECK(check_roundtrip(raw, {DType::kUInt32, filter, Codec::kZstd, 3}).encoding ==
            ChunkEncoding::kRaw);
    }
  }
  SUBCASE("small-range int32 with Shuffle") {
    const Bytes raw = make_data(DType::kInt32, mib4 / 4, Kind::kSmooth, 11);
    const Encoded e = check_roundtrip(raw, {DType::kInt32, Filter::kShuffle, Codec::kZstd, 1});
    MESSAGE("int32 normal(0, 20) Shuffle+zstd-1 stored/raw = " << ratio(e, mib4));
    // Order-0 bound per plane: ~7 bits (low byte) + 3 x 1 bit (sign bytes) of 32, ~0.31.
    CHECK(ratio(e, mib4) < 0.32);
  }
}

TEST_CASE("shared plane choices: small chunks compressed once, as small as deciding each") {
  // 64 chunks of 16 KiB of bf16 weights (planes of 8 KiB, below the sample size): with shared
  // choices only the first chunk tries both modes.
  const size_t chunk = 16 * 1024;
  const Bytes all = bf16_weights(64 * chunk / 2, 7);
  jtree::codec::PlaneChoices shared;
  std::array<std::atomic<uint8_t>, 16> kind{};
  shared.kind = &kind;
  ChunkFormat alone{DType::kBFloat16, Filter::kFloatSplit, Codec::kZstd, 1};
  ChunkFormat with = alone;
  with.choices = &shared;
  size_t stored_alone = 0, stored_with = 0;
  for (size_t c = 0; c < 64; ++c) {
    const Bytes raw(all.begin() + c * chunk, all.begin() + (c + 1) * chunk);
    const Encoded a = encode(raw, alone), b = encode(raw, with);
    stored_alone += a.stored.size();
    stored_with += b.stored.size();
    Bytes back(raw.size());
    REQUIRE(decode(b.stored, b.encoding, with, back).ok());
    CHECK(back == raw);
  }
  // The same choices as deciding each chunk: within 1% of the size.
  CHECK(static_cast<double>(stored_with) <= static_cast<double>(stored_alone) * 1.01);
  CHECK(static_cast<double>(stored_with) < 0.8 * static_cast<double>(all.size()));
  CHECK(shared.leaf[0].load() != 0);
  CHECK(kind[0].load() == shared.leaf[0].load());

  // A plane decided Raw (random bytes) does not make a compressible plane of the same kind
  // stay raw: the next one still tries one mode.
  jtree::codec::PlaneChoices next;
  std::array<std::atomic<uint8_t>, 16> kind8{};
  next.kind = &kind8;
  ChunkFormat u8{DType::kUInt8, Filter::kNone, Codec::kZstd, 1};
  u8.choices = &next;
  std::mt19937_64 rng(3);
  Bytes noise(8192);
  for (auto& b : noise) b = static_cast<std::byte>(rng());
  CHECK(encode(noise, u8).encoding == ChunkEncoding::kRaw);
  CHECK(static_cast<jtree::codec::PlaneChoice>(next.leaf[0].load()) ==
        jtree::codec::PlaneChoice::kRaw);
  CHECK(kind8[0].load() == next.leaf[0].load());
  const Encoded zeros = encode(Bytes(8192), u8);
  CHECK(zeros.encoding == ChunkEncoding::kPlanes);
  CHECK(zeros.stored.size() < 200);
  Bytes back(8192);
  REQUIRE(decode(zeros.stored, zeros.encoding, u8, back).ok());
  CHECK(back == Bytes(8192));
}

TEST_CASE("min_gain decides between Planes and Raw") {
  const Bytes raw = bf16_weights(32768, 5);  // compresses to about 0.66
  ChunkFormat f{DType::kBFloat16, Filter::kFloatSplit, Codec::kZstd, 1};
  f.min_gain = 0.2;
  CHECK(check_roundtrip(raw, f).encoding == ChunkEncoding::kPlanes);
  f.min_gain = 0.5;
  CHECK(check_roundtrip(raw, f).encoding == ChunkEncoding::kRaw);
}

TEST_CASE("encode rejects bad arguments") {
  jtree::ScratchBytes out;
  jtree::ScratchBytes scratch;
  const Bytes raw(64);
  auto r = encode_chunk(raw, {DType::kInt32, Filter::kFloatSplit, Codec::kZstd, 1}, out, scratch);
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  r = encode_chunk(raw, {DType::kInt4, Filter::kShuffle, Codec::kZstd, 1}, out, scratch);
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  r = encode_chunk(Bytes(6), {DType::kInt32, Filter::kShuffle, Codec::kZstd, 1}, out, scratch);
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  r = encode_chunk(raw, {static_cast<DType>(99), Filter::kNone, Codec::kZstd, 1}, out, scratch);
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  r = encode_chunk(raw, {DType::kInt32, Filter::kNone, static_cast<Codec>(7), 1}, out, scratch);
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
}

// ---- hostile input -----------------------------------------------------------------------------

namespace {

// A valid two-plane chunk: 8192 bf16 weights, plane 0 (sign + mantissa) raw, plane 1
// (exponents) one zstd frame.
struct Fixture {
  ChunkFormat format{DType::kBFloat16, Filter::kFloatSplit, Codec::kZstd, 1};
  Bytes raw = bf16_weights(8192, 99);
  Bytes stored;
  size_t plane = 8192;
  Fixture() {
    const Encoded e = encode(raw, format);
    REQUIRE(e.encoding == ChunkEncoding::kPlanes);
    stored = e.stored;
    const auto sizes = plane_sizes(stored, 2);
    REQUIRE(sizes[0] == plane);
    REQUIRE(sizes[1] < plane);
  }
};

void check_corrupt(const Bytes& stored, const ChunkFormat& format, size_t raw_size,
                   ChunkEncoding encoding = ChunkEncoding::kPlanes) {
  Bytes raw(raw_size);
  const Status s = decode(stored, encoding, format, raw);
  CHECK_MESSAGE(s.code() == StatusCode::kCorruption, s.to_string());
}

Bytes frame_of(size_t size, uint64_t seed, bool content_size = true) {
  Bytes src(size);
  std::mt19937_64 rng(seed);
  for (auto& b : src) b = std::byte(static_cast<uint8_t>(rng() % 4));
  Bytes frame(ZSTD_compressBound(size));
  ZSTD_CCtx* c = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, content_size ? 1 : 0);
  const size_t n = ZSTD_compress2(c, frame.data(), frame.size(), src.data(), src.size());
  ZSTD_freeCCtx(c);
  REQUIRE(!ZSTD_isError(n));
  frame.resize(n);
  return frame;
}

// A two-plane bf16 chunk of `plane` bytes per plane: plane 0 raw, plane 1 = `frame`.
Bytes chunk_with_frame(const Bytes& frame, size_t plane) {
  Bytes s(8 + plane + frame.size(), std::byte{0x11});
  jtree::store_le<uint32_t>(s.data(), static_cast<uint32_t>(plane));
  jtree::store_le<uint32_t>(s.data() + 4, static_cast<uint32_t>(frame.size()));
  std::copy(frame.begin(), frame.end(), s.begin() + 8 + static_cast<ptrdiff_t>(plane));
  return s;
}

}  // namespace

TEST_CASE("decoder: the fixture decodes") {
  Fixture fx;
  Bytes back(fx.raw.size());
  CHECK(decode(fx.stored, ChunkEncoding::kPlanes, fx.format, back).ok());
  CHECK(back == fx.raw);
}

TEST_CASE("decoder: every truncation and every extension is Corruption") {
  Fixture fx;
  for (size_t len = 0; len < fx.stored.size(); ++len) {
    CAPTURE(len);
    check_corrupt(Bytes(fx.stored.begin(), fx.stored.begin() + len), fx.format, fx.raw.size());
  }
  Bytes longer = fx.stored;
  longer.push_back(std::byte{0});
  check_corrupt(longer, fx.format, fx.raw.size());
}

TEST_CASE("decoder: every single-byte change of the plane-size header is Corruption") {
  Fixture fx;
  for (size_t i = 0; i < 8; ++i) {
    for (int x = 1; x < 256; ++x) {
      CAPTURE(i);
      CAPTURE(x);
      Bytes s = fx.stored;
      s[i] ^= std::byte(static_cast<uint8_t>(x));
      check_corrupt(s, fx.format, fx.raw.size());
    }
  }
}

TEST_CASE("decoder: plane sizes that overflow or exceed the plane") {
  Fixture fx;
  for (auto [a, b] : {std::pair<uint32_t, uint32_t>{0xFFFFFFFFu, 0xFFFFFFFFu},
                      {0xFFFFFFF8u, 0x10u},   // wraps to 8 in 32 bits
                      {0x10u, 0xFFFFFFF8u},
                      {8193u, 0u},             // one more than the plane
                      {0u, 0u}}) {
    CAPTURE(a);
    CAPTURE(b);
    Bytes s(8);
    jtree::store_le<uint32_t>(s.data(), a);
    jtree::store_le<uint32_t>(s.data() + 4, b);
    s.resize(8 + ((a + b) & 0xFFFF));  // whatever the 32-bit sum would claim
    check_corrupt(s, fx.format, fx.raw.size());
  }
}

TEST_CASE("decoder: frames of the wrong size, trailing bytes, skippable frames") {
  const size_t plane = 8192;
  const ChunkFormat bf16{DType::kBFloat16, Filter::kFloatSplit, Codec::kZstd, 1};
  const ChunkFormat u8{DType::kUInt8, Filter::kNone, Codec::kZstd, 1};
  for (bool content_size : {true, false}) {
    CAPTURE(content_size);
    for (size_t n : {plane - 1, plane + 1, plane / 2, size_t{1}}) {
      CAPTURE(n);
      const Bytes frame = frame_of(n, n, content_size);
      Bytes raw(2 * plane);
      const Status s = decode(chunk_with_frame(frame, plane), ChunkEncoding::kPlanes, bf16, raw);
      CHECK(s.code() == StatusCode::kCorruption);
      CHECK_MESSAGE(s.message().find("plane 1") != std::string::npos, s.message());
      // P = 1 decodes straight into raw: same checks.
      Bytes one(4);
      jtree::store_le<uint32_t>(one.data(), static_cast<uint32_t>(frame.size()));
      one.insert(one.end(), frame.begin(), frame.end());
      check_corrupt(one, u8, plane);
    }
  }
  const Bytes good = frame_of(plane, 1);
  Bytes raw(2 * plane);
  REQUIRE(decode(chunk_with_frame(good, plane), ChunkEncoding::kPlanes, bf16, raw).ok());

  Bytes trailing = good;
  trailing.push_back(std::byte{0});
  check_corrupt(chunk_with_frame(trailing, plane), bf16, 2 * plane);

  // Two frames that together decode to the plane's size (with and without content sizes).
  for (bool content_size : {true, false}) {
    Bytes two = frame_of(plane / 2, 2, content_size);
    const Bytes second = frame_of(plane / 2, 3, content_size);
    two.insert(two.end(), second.begin(), second.end());
    check_corrupt(chunk_with_frame(two, plane), bf16, 2 * plane);
  }

  // A skippable frame (magic 0x184D2A50, 4-byte length, payload).
  Bytes skippable = {std::byte{0x50}, std::byte{0x2A}, std::byte{0x4D}, std::byte{0x18},
                     std::byte{4},    std::byte{0},    std::byte{0},    std::byte{0},
                     std::byte{1},    std::byte{2},    std::byte{3},    std::byte{4}};
  check_corrupt(chunk_with_frame(skippable, plane), bf16, 2 * plane);
}

// FORMAT.md 8.2, "exactly one zstd frame": what is optional in a frame and what is refused.
TEST_CASE("decoder: frames with or without content size and checksum; dictionaries refused") {
  const size_t plane = 8192;
  const ChunkFormat bf16{DType::kBFloat16, Filter::kFloatSplit, Codec::kZstd, 1};
  Bytes src(plane);
  std::mt19937_64 rng(9);
  for (auto& b : src) b = std::byte(static_cast<uint8_t>(rng() % 4));
  auto frame_with = [&](bool content_size, bool checksum) {
    Bytes frame(ZSTD_compressBound(plane));
    ZSTD_CCtx* c = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, content_size ? 1 : 0);
    ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, checksum ? 1 : 0);
    const size_t n = ZSTD_compress2(c, frame.data(), frame.size(), src.data(), src.size());
    ZSTD_freeCCtx(c);
    REQUIRE(!ZSTD_isError(n));
    frame.resize(n);
    return frame;
  };
  for (bool content_size : {true, false}) {
    for (bool checksum : {true, false}) {
      CAPTURE(content_size);
      CAPTURE(checksum);
      const Bytes f = frame_with(content_size, checksum);
      Bytes raw(2 * plane);
      const Status st = decode(chunk_with_frame(f, plane), ChunkEncoding::kPlanes, bf16, raw);
      REQUIRE_MESSAGE(st.ok(), st.to_string());
      if (checksum) {
        // The checksum is the frame's last 4 bytes: a wrong one is Corruption.
        Bytes bad = f;
        bad.back() ^= std::byte{1};
        check_corrupt(chunk_with_frame(bad, plane), bf16, 2 * plane);
      }
    }
  }
  // A frame that declares a dictionary: Frame_Header_Descriptor bits 0-1 give the ID's size.
  {
    Bytes f = frame_with(true, false);
    // Rebuild the header with a 1-byte dictionary ID: magic(4) FHD(1) [WD(1)] ...
    const uint8_t fhd = static_cast<uint8_t>(f[4]);
    const bool single_segment = (fhd & 0x20) != 0;
    Bytes with_dict(f.begin(), f.begin() + 5 + (single_segment ? 0 : 1));
    with_dict[4] = std::byte(static_cast<uint8_t>(fhd | 0x01));
    with_dict.push_back(std::byte{7});  // dictionary ID 7
    with_dict.insert(with_dict.end(), f.begin() + 5 + (single_segment ? 0 : 1), f.end());
    check_corrupt(chunk_with_frame(with_dict, plane), bf16, 2 * plane);
  }
  // A skippable frame in front of a good frame.
  {
    Bytes both = {std::byte{0x5F}, std::byte{0x2A}, std::byte{0x4D}, std::byte{0x18},
                  std::byte{0},    std::byte{0},    std::byte{0},    std::byte{0}};
    const Bytes f = frame_with(true, false);
    both.insert(both.end(), f.begin(), f.end());
    check_corrupt(chunk_with_frame(both, plane), bf16, 2 * plane);
  }
}

TEST_CASE("decoder: random garbage is Corruption, never a crash") {
  Fixture fx;
  std::mt19937_64 rng(1234);
  for (int trial = 0; trial < 300; ++trial) {
    Bytes s(rng() % 20000);
    for (auto& b : s) b = std::byte(static_cast<uint8_t>(rng()));
    check_corrupt(s, fx.format, fx.raw.size());
  }
  // Consistent headers with garbage frames, some starting with the zstd magic number.
  for (int trial = 0; trial < 300; ++trial) {
    CAPTURE(trial);
    const uint32_t a = static_cast<uint32_t>(rng() % fx.plane);  // not raw: must be a frame
    const uint32_t b = static_cast<uint32_t>(rng() % (fx.plane + 1));
    Bytes s(8 + a + b);
    jtree::store_le<uint32_t>(s.data(), a);
    jtree::store_le<uint32_t>(s.data() + 4, b);
    for (size_t i = 8; i < s.size(); ++i) s[i] = std::byte(static_cast<uint8_t>(rng()));
    if (trial % 2 == 0 && a >= 4) jtree::store_le<uint32_t>(s.data() + 8, 0xFD2FB528u);
    check_corrupt(s, fx.format, fx.raw.size());
  }
}

TEST_CASE("decoder: a changed payload byte is Corruption or, in a raw plane, one changed element") {
  Fixture fx;
  const size_t payload = 8;
  size_t frame_undetected = 0, frame_bytes = 0;
  for (size_t i = payload; i < fx.stored.size(); ++i) {
    CAPTURE(i);
    Bytes s = fx.stored;
    s[i] ^= std::byte{0x5A};
    Bytes back(fx.raw.size());
    const Status st = decode(s, ChunkEncoding::kPlanes, fx.format, back);
    const bool in_raw_plane = i < payload + fx.plane;
    if (in_raw_plane) {
      REQUIRE(st.ok());
      const size_t element = i - payload;
      size_t diff_elements = 0;
      for (size_t e = 0; e < fx.plane; ++e) {
        diff_elements += std::memcmp(back.data() + 2 * e, fx.raw.data() + 2 * e, 2) != 0;
      }
      CHECK(diff_elements == 1);
      CHECK(std::memcmp(back.data() + 2 * element, fx.raw.data() + 2 * element, 2) != 0);
    } else {
      ++frame_bytes;
      if (st.ok()) {
        ++frame_undetected;  // zstd frames carry no checksum: the chunk's XXH3 catches these
      } else {
        CHECK(st.code() == StatusCode::kCorruption);
      }
    }
  }
  MESSAGE("changed frame bytes that decoded without error: " << frame_undetected << " of "
                                                             << frame_bytes);
}

TEST_CASE("decoder: encodings, sizes and formats that do not fit") {
  Fixture fx;
  check_corrupt(fx.stored, fx.format, fx.raw.size(), static_cast<ChunkEncoding>(2));
  check_corrupt(fx.stored, fx.format, fx.raw.size(), static_cast<ChunkEncoding>(255));
  // Raw chunks must have exactly the raw size.
  check_corrupt(Bytes(fx.raw.size() - 1), fx.format, fx.raw.size(), ChunkEncoding::kRaw);
  check_corrupt(Bytes(fx.raw.size() + 1), fx.format, fx.raw.size(), ChunkEncoding::kRaw);
  Bytes back(fx.raw.size());
  CHECK(decode(fx.raw, ChunkEncoding::kRaw, fx.format, back).ok());
  CHECK(back == fx.raw);
  // A raw size that is not a multiple of the plane count.
  check_corrupt(fx.stored, fx.format, fx.raw.size() - 1);
  // The right bytes with the wrong format: plane sizes no longer add up.
  check_corrupt(fx.stored, {DType::kFloat32, Filter::kFloatSplit, Codec::kZstd, 1},
                fx.raw.size());
  // A filter the dtype does not allow.
  check_corrupt(fx.stored, {DType::kInt16, Filter::kFloatSplit, Codec::kZstd, 1}, fx.raw.size());
  check_corrupt(fx.stored, {static_cast<DType>(0), Filter::kNone, Codec::kZstd, 1},
                fx.raw.size());
}
