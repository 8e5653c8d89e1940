#include "file_map.h"

#include <algorithm>

#include "codec/checksum.h"
#include "format/layout.h"

namespace jtree::safety {

namespace {
// Field offsets of spec/FORMAT.md sections 3 and 4.
constexpr uint64_t kPreambleHeaderHash = 48, kPreambleHash = 56, kPreambleHashed = 56;
constexpr uint64_t kFooterIndexHash = 16, kFooterHeaderHash = 40, kFooterHash = 112;
}  // namespace

const char* region_name(Region r) {
  switch (r) {
    case Region::kPreamble: return "preamble";
    case Region::kSlots: return "commit slots";
    case Region::kHeader: return "header";
    case Region::kIndex: return "index";
    case Region::kFooter: return "footer";
    case Region::kChunk: return "chunk";
    case Region::kOther: return "padding/dead";
  }
  return "?";
}

Region FileMap::region(uint64_t p, const Chunk** chunk) const {
  if (p < 64) return Region::kPreamble;
  if (p < 128) return Region::kSlots;
  if (p >= header_offset && p - header_offset < header_size) return Region::kHeader;
  if (p >= index_offset && p - index_offset < index_size) return Region::kIndex;
  if (p >= footer_offset && p - footer_offset < format::kFooterSize) return Region::kFooter;
  auto it = std::upper_bound(chunks.begin(), chunks.end(), p,
                             [](uint64_t v, const Chunk& c) { return v < c.offset; });
  if (it != chunks.begin() && p - std::prev(it)->offset < std::prev(it)->size) {
    if (chunk) *chunk = &*std::prev(it);
    return Region::kChunk;
  }
  return Region::kOther;
}

FileMap map_file(const Reader& reader, std::span<const std::byte> bytes) {
  const FileInfo& info = reader.info();
  FileMap m;
  m.size = bytes.size();
  m.generation = info.generation;
  m.header_offset = info.header_offset;
  m.header_size = info.header_size;
  m.index_offset = info.index_offset;
  m.index_size = info.index_size;
  m.footer_offset = info.footer_offset;
  const Tree& t = reader.tree();
  for (uint32_t l = 0; l < t.leaves.size(); ++l) {
    if (t.leaves[l].storage != Storage::kChunked) continue;
    for (uint64_t k = 0; k < Tree::chunk_count(t.leaves[l]); ++k) {
      const ChunkInfo c = reader.chunk(t.leaves[l].first_chunk + k);
      if (c.absent || c.stored_size == 0) continue;
      m.chunks.push_back({c.file_offset, c.stored_size, l, c.encoding == ChunkEncoding::kRaw});
    }
  }
  std::sort(m.chunks.begin(), m.chunks.end(),
            [](const FileMap::Chunk& a, const FileMap::Chunk& b) { return a.offset < b.offset; });
  for (const format::CommitSlot& s : format::valid_slots(bytes.first(format::kPreambleSize))) {
    if (s.generation == info.generation && s.footer_offset == info.footer_offset) {
      m.has_current_slot = true;
    }
  }
  return m;
}

void store_le64(std::span<std::byte> b, uint64_t offset, uint64_t v) {
  for (int i = 0; i < 8; ++i) b[offset + i] = static_cast<std::byte>(v >> (8 * i));
}

uint64_t load_le64(std::span<const std::byte> b, uint64_t offset) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(b[offset + i]);
  return v;
}

void rehash(std::span<std::byte> file, const FileMap& m, Region region) {
  std::span<std::byte> footer = file.subspan(m.footer_offset, format::kFooterSize);
  if (region == Region::kHeader) {
    const uint64_t h = xxh3(file.subspan(m.header_offset, m.header_size));
    store_le64(footer, kFooterHeaderHash, h);
    // Generation 0's header location and hash are repeated in the preamble.
    if (m.generation == 0) store_le64(file, kPreambleHeaderHash, h);
  }
  if (region == Region::kIndex) {
    store_le64(footer, kFooterIndexHash, xxh3(file.subspan(m.index_offset, m.index_size)));
  }
  store_le64(file, kPreambleHash, xxh3(file.first(kPreambleHashed)));
  store_le64(footer, kFooterHash, xxh3(footer.first(kFooterHash)));
}

}  // namespace jtree::safety
