// Fuzz target: the index flatbuffer checked against a header — chunk counts, segments inside
// the file and clear of the metadata, chunk ranges inside their segments, sizes consistent
// with encodings, no overlaps. The payload is a header followed by an index.
//
// Options (the input's last 8 bytes): [0..3] the header's length (the rest is the index),
// [4..5] extra file bytes after the index (the file size validation assumes), [6] limits.
#include "format/header_codec.h"
#include "format/validate.h"
#include "fuzz_util.h"

using namespace jtree;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Split<8> in(data, size);
  const uint32_t header_len = in.u32(0);
  if (header_len > in.payload.size()) return 0;
  const auto header = in.payload.first(header_len);
  const auto index = in.payload.subspan(header_len);
  const Limits limits = fuzz::limits_for(in.opt[6]);

  auto t = format::decode_header(header, limits, nullptr);
  if (!t.ok()) return 0;
  if (!t->finalize(limits.max_depth).ok()) return 0;
  auto chunks = format::validate_leaves(*t, limits);
  if (!chunks.ok()) return 0;
  auto ix = format::decode_index(index, limits);
  if (!ix.ok()) {
    JTREE_FUZZ_CHECK(fuzz::is_refusal(ix.status()), ix.status().to_string());
    return 0;
  }
  // The file the index is checked against: preamble, header, data, index, footer.
  const uint64_t header_at = format::kPreambleSize;
  const uint64_t index_at = (header_at + header.size() + 7) / 8 * 8 + in.u16(4);
  const uint64_t footer_at = index_at + index.size();
  const format::Region meta[] = {{0, format::kPreambleSize, "preamble"},
                                 {header_at, header.size(), "header"},
                                 {index_at, index.size(), "index"},
                                 {footer_at, format::kFooterSize, "footer"}};
  const auto kind = ix->segment_info ? format::FileKind::kSegment : format::FileKind::kCheckpoint;
  Status st = format::validate_index(*t, *ix, *chunks, footer_at + format::kFooterSize, meta,
                                     kind, ix->generation);
  if (!st.ok()) {
    JTREE_FUZZ_CHECK(fuzz::is_refusal(st), st.to_string());
    return 0;
  }
  // Accepted: every stored chunk lies in the data area, clear of the metadata.
  for (const format::ChunkRecord& c : ix->chunks) {
    if (c.flags & format::kChunkAbsent) continue;
    const SegmentSpan& seg = ix->segments[c.segment];
    const uint64_t b = seg.file_offset + c.offset, e = b + c.stored_size;
    JTREE_FUZZ_CHECK(b >= format::kPreambleSize && e <= footer_at, "chunk outside the file");
    for (const auto& m : meta) {
      JTREE_FUZZ_CHECK(e <= m.offset || b >= m.offset + m.size,
                       std::string("chunk overlaps the ") + m.what);
    }
  }
  return 0;
}
