// Fuzz target: one chunk's codec — every filter (None, Shuffle, FloatSplit) and codec (Raw,
// Zstd) for every dtype. Two properties:
//  1. decoding hostile stored bytes (Planes tables, zstd frames, raw sizes) gives OK or
//     Corruption, never reads or writes outside its buffers;
//  2. encoding the payload as raw chunk bytes and decoding the result gives the payload back,
//     bit for bit, whatever the format; and a part of it (decode_chunk_range) that part.
//
// Options (the input's last 8 bytes): [0] dtype, [1] filter, [2] codec, [3] encoding of the
// stored bytes (2 = an invalid value), [4..5] raw size for decoding, [6] zstd level,
// [7] min_gain.
#include <algorithm>

#include "codec/chunk_codec.h"
#include "codec/pack4.h"
#include "fuzz_util.h"

using namespace jtree;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Split<8> in(data, size);
  codec::ChunkFormat fmt;
  fmt.dtype = static_cast<DType>(1 + in.opt[0] % (kDTypeCodeEnd - 1));
  fmt.filter = static_cast<Filter>(in.opt[1] % 3);
  fmt.codec = static_cast<Codec>(in.opt[2] % 2);
  fmt.level = static_cast<int8_t>(in.opt[6]) % 6;  // -5..5: fast
  constexpr double kGains[4] = {0.03, 0.0, 0.5, -1.0};
  fmt.min_gain = kGains[in.opt[7] % 4];
  const auto encoding = static_cast<ChunkEncoding>(in.opt[3] % 3);

  // 1. Hostile stored bytes.
  std::vector<std::byte> raw(in.u16(4));
  ScratchBytes scratch;
  Status st = codec::decode_chunk(in.payload, encoding, fmt, raw, scratch);
  if (!st.ok()) JTREE_FUZZ_CHECK(st.is_corruption(), st.to_string());

  // 2. The round trip, for formats the writer would use.
  if (!codec::filter_allowed(fmt.filter, fmt.dtype)) return 0;
  const size_t planes = codec::plane_count(fmt);
  std::vector<std::byte> chunk(in.payload.begin(),
                               in.payload.begin() + (in.payload.size() / planes) * planes);
  ScratchBytes stored;
  ScratchBytes enc_scratch;
  auto enc = codec::encode_chunk(chunk, fmt, stored, enc_scratch);
  JTREE_FUZZ_CHECK(enc.ok(), enc.status().to_string());
  const std::span<const std::byte> bytes = *enc == ChunkEncoding::kRaw
                                               ? std::span<const std::byte>(chunk)
                                               : std::span<const std::byte>(stored);
  if (*enc == ChunkEncoding::kPlanes) {
    JTREE_FUZZ_CHECK(stored.size() >= 4 * planes && stored.size() <= chunk.size() + 4 * planes,
                     "planes chunk size outside the format's bounds");
  }
  std::vector<std::byte> back(chunk.size());
  st = codec::decode_chunk(bytes, *enc, fmt, back, scratch);
  JTREE_FUZZ_CHECK(st.ok(), "encoded chunk does not decode: " + st.to_string());
  JTREE_FUZZ_CHECK(back == chunk, "chunk round trip differs");

  // 3. A part of the chunk (whole elements, from the raw-size and level options) decodes to
  // that part of the whole; and a part of hostile stored bytes is OK or Corruption.
  if (!is_4bit(fmt.dtype)) {
    const size_t w = std::max<size_t>(dtype_info(fmt.dtype)->stored_bits / 8, 1);
    const size_t n = chunk.size() / w;
    const size_t a = in.u16(4) % (n + 1);
    const size_t b = a + in.opt[6] % (n - a + 1);
    std::vector<std::byte> part((b - a) * w);
    st = codec::decode_chunk_range(bytes, *enc, fmt, chunk.size(), a * w, part, scratch);
    JTREE_FUZZ_CHECK(st.ok(), "a part of the encoded chunk does not decode: " + st.to_string());
    JTREE_FUZZ_CHECK(std::equal(part.begin(), part.end(), chunk.begin() + a * w),
                     "a part of the chunk differs from that part of the whole");
    if (raw.size() >= part.size() + a * w) {
      st = codec::decode_chunk_range(in.payload, encoding, fmt, raw.size(), a * w, part, scratch);
      if (!st.ok()) {
        JTREE_FUZZ_CHECK(st.is_corruption() || st.code() == StatusCode::kInvalidArgument,
                         st.to_string());
      }
    }
  }

  // 4-bit packing: pack(unpack(x)) == x with the pad nibble cleared.
  if (is_4bit(fmt.dtype) && !chunk.empty()) {
    std::vector<std::byte> unpacked(chunk.size() * 2), packed(chunk.size());
    codec::unpack4(chunk, unpacked);
    codec::pack4(unpacked, packed);
    JTREE_FUZZ_CHECK(packed == chunk, "4-bit pack/unpack round trip differs");
  }
  return 0;
}
