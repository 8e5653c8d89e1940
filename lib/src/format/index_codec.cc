#include "format/index_codec.h"

#include <cstring>

#include <flatbuffers/flatbuffers.h>

#include "format/aligned_bytes.h"
#include "jtree_generated.h"
#include "util/endian.h"

namespace jtree::format {

static_assert(sizeof(fb::Chunk) == sizeof(ChunkRecord));
static_assert(sizeof(fb::Segment) == 3 * sizeof(uint64_t));

std::vector<std::byte> encode_index(const IndexData& index) {
  flatbuffers::FlatBufferBuilder b(256 + index.chunks.size() * sizeof(ChunkRecord) +
                                   index.segments.size() * sizeof(fb::Segment));
  fb::Chunk* chunks = nullptr;
  auto chunk_vec = b.CreateUninitializedVectorOfStructs<fb::Chunk>(index.chunks.size(), &chunks);
  if (!index.chunks.empty()) {
    std::memcpy(static_cast<void*>(chunks), index.chunks.data(),
                index.chunks.size() * sizeof(ChunkRecord));
  }
  std::vector<fb::Segment> segs;
  segs.reserve(index.segments.size());
  for (const auto& s : index.segments) segs.emplace_back(s.file_offset, s.size, s.salt);
  auto seg_vec = b.CreateVectorOfStructs(segs);
  flatbuffers::Offset<fb::SegmentInfo> info = 0;
  if (index.segment_info) {
    info = fb::CreateSegmentInfo(b, index.segment_info->process_index,
                                 index.segment_info->process_count, index.segment_info->save_id,
                                 index.segment_info->head_offset);
  }
  b.Finish(fb::CreateIndex(b, index.generation, seg_vec, chunk_vec, info));
  auto* p = reinterpret_cast<const std::byte*>(b.GetBufferPointer());
  return std::vector<std::byte>(p, p + b.GetSize());
}

Result<IndexData> decode_index(std::span<const std::byte> unaligned, const Limits& limits) {
  const AlignedBytes aligned(unaligned);
  const std::span<const std::byte> bytes = aligned.span();
  if (bytes.size() > limits.max_index_bytes) {
    return Status::resource_exhausted("index is " + std::to_string(bytes.size()) +
                                     " bytes, over the limit of " +
                                     std::to_string(limits.max_index_bytes));
  }
  if (bytes.size() >= FLATBUFFERS_MAX_BUFFER_SIZE) {
    return Status::corruption("index: too large for a flatbuffer");
  }
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  flatbuffers::Verifier verifier(data, bytes.size(), 8, 16);
  if (!verifier.VerifyBuffer<fb::Index>(nullptr)) {
    return Status::corruption("index: flatbuffer verification failed (damaged or not an index)");
  }
  const fb::Index* root = flatbuffers::GetRoot<fb::Index>(data);
  IndexData out;
  out.generation = root->generation();
  if (root->segments()) {
    out.segments.reserve(root->segments()->size());
    // Loaded bytewise: the verifier does not check the alignment of a vector's elements, and
    // a hostile index can put these 8-byte fields at 4 mod 8.
    const auto* p = reinterpret_cast<const std::byte*>(root->segments()) +
                    sizeof(flatbuffers::uoffset_t);
    for (size_t i = 0; i < root->segments()->size(); ++i, p += sizeof(fb::Segment)) {
      out.segments.push_back({load_le<uint64_t>(p), load_le<uint64_t>(p + 8),
                              load_le<uint64_t>(p + 16)});
    }
  }
  if (root->chunks() && root->chunks()->size() > 0) {
    out.chunks.resize(root->chunks()->size());
    // Vector::Data() points just past the vector's length word; GCC's bounds tracking takes
    // that for an overrun of the word itself.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
#pragma GCC diagnostic ignored "-Wstringop-overread"
    std::memcpy(out.chunks.data(), root->chunks()->Data(),
                out.chunks.size() * sizeof(ChunkRecord));
#pragma GCC diagnostic pop
  }
  if (root->segment_info()) {
    const auto* si = root->segment_info();
    out.segment_info = SegmentInfo{si->process_index(), si->process_count(), si->save_id(),
                                   si->head_offset()};
  }
  return out;
}

}  // namespace jtree::format
