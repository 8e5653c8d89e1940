// The plane-codec seam (codec/plane_codec.h): the registry, and a chunk encoded and decoded by
// a codec registered from outside the library (rle_test_codec.h) through encode_chunk /
// decode_chunk, which choose the codec by the id in the ChunkFormat (the leaf's codec).
#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codec/chunk_codec.h"
#include "codec/plane_codec.h"
#include "codec/zstd_codec.h"
#include "rle_test_codec.h"
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
using jtree::codec::encode_chunk;
using jtree::codec::find_plane_codec;
using jtree::codec::register_plane_codec;
using jtree::testing::kRleTestCodec;
using jtree::testing::rle_test_codec;

using Bytes = std::vector<std::byte>;

// A codec that claims an id it has no right to (registration must refuse it).
class Claimant final : public jtree::codec::PlaneCodec {
 public:
  explicit Claimant(Codec id) : id_(id) {}
  Codec id() const override { return id_; }
  std::string_view name() const override { return "claimant"; }
  size_t compress_bound(size_t n) const override { return n; }
  jtree::Result<size_t> encode(std::span<const std::byte>, int, jtree::codec::PlaneHints,
                               std::span<std::byte>) const override {
    return size_t{0};
  }
  Status decode(std::span<const std::byte>, std::span<std::byte>) const override {
    return Status::corruption("claimant");
  }

 private:
  Codec id_;
};

// int32 values below 256: byte plane 0 varies, planes 1..3 are all zero (after Shuffle).
Bytes small_ints(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Bytes b(n * 4);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t v = static_cast<uint32_t>(rng() % 256);
    std::memcpy(b.data() + 4 * i, &v, 4);
  }
  return b;
}

}  // namespace

TEST_CASE("plane codec registry: built-ins, lookups, refusals") {
  const auto* zstd = find_plane_codec(Codec::kZstd);
  REQUIRE(zstd != nullptr);
  CHECK(zstd == &jtree::codec::zstd_plane_codec());
  CHECK(zstd->id() == Codec::kZstd);
  CHECK(zstd->name() == "zstd");
  CHECK(zstd->compress_bound(1000) >= 1000);
  CHECK(find_plane_codec(Codec::kRaw) == nullptr);           // Raw is no codec
  CHECK(find_plane_codec(static_cast<Codec>(7)) == nullptr);  // nobody's

  const auto& rle = rle_test_codec();  // registers it
  CHECK(find_plane_codec(kRleTestCodec) == &rle);
  // Taken ids and Raw's are refused, and leave the registry as it was.
  const Claimant raw(Codec::kRaw), zstd_again(Codec::kZstd), rle_again(kRleTestCodec);
  CHECK(register_plane_codec(raw).code() == StatusCode::kInvalidArgument);
  const Status taken = register_plane_codec(zstd_again);
  CHECK(taken.code() == StatusCode::kInvalidArgument);
  CHECK(taken.to_string().find("taken by zstd") != std::string::npos);
  CHECK(register_plane_codec(rle_again).code() == StatusCode::kInvalidArgument);
  CHECK(find_plane_codec(Codec::kZstd) == zstd);
  CHECK(find_plane_codec(kRleTestCodec) == &rle);
  CHECK(find_plane_codec(Codec::kRaw) == nullptr);
}

TEST_CASE("a registered codec encodes and decodes chunks through encode_chunk/decode_chunk") {
  const auto& rle = rle_test_codec();
  const Bytes raw = small_ints(4096, 11);
  std::array<std::atomic<uint8_t>, 16> kind{};
  jtree::codec::PlaneChoices hints;
  hints.kind = &kind;
  ChunkFormat f{DType::kInt32, Filter::kShuffle, kRleTestCodec, 1};
  f.choices = &hints;

  const size_t before = rle.encoded();
  jtree::ScratchBytes out;
  jtree::ScratchBytes scratch;
  auto enc = encode_chunk(raw, f, out, scratch);
  REQUIRE_MESSAGE(enc.ok(), enc.status().to_string());
  REQUIRE(*enc == ChunkEncoding::kPlanes);
  CHECK(rle.encoded() - before == 4);  // the library asked this codec, for every plane
  CHECK(hints.leaf[0].load() == 1);    // and gave it the plane's hint slots
  const Bytes stored(out.begin(), out.end());
  // Plane 0 (varied bytes) does not run-length code: stored as is. Planes 1..3 (zeros) are
  // 4096 / 255 -> 17 runs of 2 bytes each.
  const size_t plane = 4096;
  CHECK(jtree::load_le<uint32_t>(stored.data()) == plane);
  for (size_t k = 1; k < 4; ++k) CHECK(jtree::load_le<uint32_t>(stored.data() + 4 * k) == 34);
  CHECK(stored.size() == 16 + plane + 3 * 34);

  Bytes back(raw.size());
  Status st = decode_chunk(stored, *enc, f, back, scratch);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  CHECK(back == raw);

  // The codec id chooses the decoder: the same bytes read as zstd frames are Corruption, and
  // an id nobody registered is Corruption (decode) or InvalidArgument (encode).
  ChunkFormat as_zstd = f;
  as_zstd.codec = Codec::kZstd;
  st = decode_chunk(stored, *enc, as_zstd, back, scratch);
  CHECK(st.code() == StatusCode::kCorruption);
  ChunkFormat unknown = f;
  unknown.codec = static_cast<Codec>(201);
  st = decode_chunk(stored, *enc, unknown, back, scratch);
  CHECK(st.code() == StatusCode::kCorruption);
  CHECK(st.to_string().find("unknown codec 201") != std::string::npos);
  CHECK(encode_chunk(raw, unknown, out, scratch).status().code() ==
        StatusCode::kInvalidArgument);
  ChunkFormat raw_leaf = f;
  raw_leaf.codec = Codec::kRaw;
  CHECK(decode_chunk(stored, *enc, raw_leaf, back, scratch).code() == StatusCode::kCorruption);

  // The codec's own errors come back named by plane: a run past the plane's end.
  // (Plane 1 is 16 runs of 255 zeros and one of 16: make the last one 17.)
  Bytes bad = stored;
  REQUIRE(bad[16 + plane + 32] == std::byte{16});
  bad[16 + plane + 32] = std::byte{17};
  st = decode_chunk(bad, *enc, f, back, scratch);
  CHECK(st.code() == StatusCode::kCorruption);
  CHECK(st.to_string().find("plane 1") != std::string::npos);
}

TEST_CASE("a registered codec that never pays leaves the chunk Raw") {
  rle_test_codec();
  std::mt19937_64 rng(5);
  Bytes noise(8192);
  for (auto& b : noise) b = static_cast<std::byte>(rng());
  jtree::ScratchBytes out;
  jtree::ScratchBytes scratch;
  auto enc = encode_chunk(noise, {DType::kUInt8, Filter::kNone, kRleTestCodec, 1}, out, scratch);
  REQUIRE(enc.ok());
  CHECK(*enc == ChunkEncoding::kRaw);
  CHECK(out.empty());
}
