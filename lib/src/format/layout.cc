#include "format/layout.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "codec/checksum.h"
#include "jtree/writer.h"
#include "util/endian.h"

namespace jtree::format {

static_assert(kFormatVersion == jtree::kFormatVersion, "one format version");

namespace {

// Byte offsets shared by preamble and footer encodings (spec/FORMAT.md tables).
namespace pre {
constexpr size_t kMagic = 0, kWriterVersion = 8, kMinRead = 10, kMinWrite = 12, kKind = 14,
                 kReserved = 15, kRequired = 16, kOptional = 24, kHeaderOffset = 32,
                 kHeaderSize = 40, kHeaderHash = 48, kHash = 56;
}
namespace foot {
constexpr size_t kIndexOffset = 0, kIndexSize = 8, kIndexHash = 16, kHeaderOffset = 24,
                 kHeaderSize = 32, kHeaderHash = 40, kGeneration = 48, kPrevFooter = 56,
                 kRequired = 64, kOptional = 72, kWriterVersion = 80, kMinRead = 82,
                 kMinWrite = 84, kKind = 86, kReserved = 87, kReservedEnd = 112, kHash = 112,
                 kMagic = 120;
}
namespace slot {
constexpr size_t kGeneration = 0, kFooterOffset = 8, kReserved = 16, kHash = 24;
}

uint64_t hash_of(std::span<const std::byte> b, size_t n) { return xxh3(b.first(n)); }

bool all_zero(std::span<const std::byte> b) {
  for (std::byte x : b)
    if (x != std::byte{0}) return false;
  return true;
}

template <size_t N>
bool has_magic(std::span<const std::byte> b, size_t at, const std::array<uint8_t, N>& magic) {
  return std::memcmp(b.data() + at, magic.data(), N) == 0;
}

void encode_version(std::byte* p, size_t writer, size_t min_read, size_t min_write, size_t kind,
                    size_t required, size_t optional, const VersionInfo& v) {
  store_le<uint16_t>(p + writer, v.writer_version);
  store_le<uint16_t>(p + min_read, v.min_read_version);
  store_le<uint16_t>(p + min_write, v.min_write_version);
  p[kind] = static_cast<std::byte>(v.kind);
  store_le<uint64_t>(p + required, v.required_features);
  store_le<uint64_t>(p + optional, v.optional_features);
}

Result<VersionInfo> decode_version(const std::byte* p, size_t writer, size_t min_read,
                                   size_t min_write, size_t kind, size_t required,
                                   size_t optional, std::string_view where) {
  VersionInfo v;
  v.writer_version = load_le<uint16_t>(p + writer);
  v.min_read_version = load_le<uint16_t>(p + min_read);
  v.min_write_version = load_le<uint16_t>(p + min_write);
  uint8_t k = static_cast<uint8_t>(p[kind]);
  if (k > static_cast<uint8_t>(FileKind::kSegment)) {
    return Status::corruption(std::string(where) + ": unknown file kind " + std::to_string(k));
  }
  v.kind = static_cast<FileKind>(k);
  v.required_features = load_le<uint64_t>(p + required);
  v.optional_features = load_le<uint64_t>(p + optional);
  JTREE_RETURN_IF_ERROR(check_version(v, where));
  return v;
}

}  // namespace

Status check_version(const VersionInfo& v, std::string_view where) {
  // A version this reader lacks is NotSupported even when the other fields then disagree
  // with it: upgrading is the only way to know more.
  if (v.min_read_version > kFormatVersion) {
    return Status::not_supported(std::string(where) + ": file needs format version " +
                                std::to_string(v.min_read_version) +
                                " to read; this jtree reads up to version " +
                                std::to_string(kFormatVersion) + " (upgrade jtree)");
  }
  if (v.min_read_version == 0 || v.min_write_version == 0 || v.writer_version == 0 ||
      v.min_read_version > v.writer_version) {
    return Status::corruption(std::string(where) + ": inconsistent version fields");
  }
  uint64_t unknown = v.required_features & ~kKnownRequiredFeatures;
  if (unknown != 0) {
    return Status::not_supported(std::string(where) + ": file uses required features unknown to " +
                                "this jtree (bits 0x" + [&] {
                                  char buf[20];
                                  std::snprintf(buf, sizeof buf, "%llx",
                                                static_cast<unsigned long long>(unknown));
                                  return std::string(buf);
                                }() + "); upgrade jtree");
  }
  return Status::success();
}

std::array<std::byte, kPreambleSize> encode_preamble(const Preamble& p) {
  std::array<std::byte, kPreambleSize> b{};
  std::memcpy(b.data() + pre::kMagic, kPreambleMagic.data(), 8);
  encode_version(b.data(), pre::kWriterVersion, pre::kMinRead, pre::kMinWrite, pre::kKind,
                 pre::kRequired, pre::kOptional, p.version);
  store_le<uint64_t>(b.data() + pre::kHeaderOffset, p.header_offset);
  store_le<uint64_t>(b.data() + pre::kHeaderSize, p.header_size);
  store_le<uint64_t>(b.data() + pre::kHeaderHash, p.header_hash);
  store_le<uint64_t>(b.data() + pre::kHash, hash_of(b, pre::kHash));
  return b;
}

Result<Preamble> decode_preamble(std::span<const std::byte> b) {
  if (b.size() < kPreambleSize) return Status::corruption("file too short for a jtree preamble");
  if (!has_magic(b, pre::kMagic, kPreambleMagic)) {
    return Status::corruption("not a jtree file (bad magic at offset 0)");
  }
  if (load_le<uint64_t>(b.data() + pre::kHash) != hash_of(b, pre::kHash)) {
    return Status::corruption("preamble checksum mismatch");
  }
  if (b[pre::kReserved] != std::byte{0}) return Status::corruption("preamble: reserved byte set");
  Preamble p;
  JTREE_ASSIGN_OR_RETURN(p.version, decode_version(b.data(), pre::kWriterVersion, pre::kMinRead,
                                                   pre::kMinWrite, pre::kKind, pre::kRequired,
                                                   pre::kOptional, "preamble"));
  p.header_offset = load_le<uint64_t>(b.data() + pre::kHeaderOffset);
  p.header_size = load_le<uint64_t>(b.data() + pre::kHeaderSize);
  p.header_hash = load_le<uint64_t>(b.data() + pre::kHeaderHash);
  if (p.header_offset != kPreambleSize) {
    return Status::corruption("preamble: header must start at offset 128, not " +
                              std::to_string(p.header_offset));
  }
  return p;
}

std::array<std::byte, kSlotSize> encode_slot(const CommitSlot& s) {
  std::array<std::byte, kSlotSize> b{};
  store_le<uint64_t>(b.data() + slot::kGeneration, s.generation);
  store_le<uint64_t>(b.data() + slot::kFooterOffset, s.footer_offset);
  store_le<uint64_t>(b.data() + slot::kHash, hash_of(b, slot::kHash));
  return b;
}

std::optional<CommitSlot> decode_slot(std::span<const std::byte> b) {
  if (b.size() < kSlotSize || all_zero(b.first(kSlotSize))) return std::nullopt;
  if (load_le<uint64_t>(b.data() + slot::kHash) != hash_of(b, slot::kHash)) return std::nullopt;
  if (!all_zero(b.subspan(slot::kReserved, 8))) return std::nullopt;
  CommitSlot s;
  s.generation = load_le<uint64_t>(b.data() + slot::kGeneration);
  s.footer_offset = load_le<uint64_t>(b.data() + slot::kFooterOffset);
  return s;
}

std::vector<CommitSlot> valid_slots(std::span<const std::byte> preamble) {
  std::vector<CommitSlot> out;
  for (size_t off : kSlotOffset) {
    if (preamble.size() < off + kSlotSize) continue;
    if (auto s = decode_slot(preamble.subspan(off, kSlotSize))) out.push_back(*s);
  }
  std::sort(out.begin(), out.end(), [](const CommitSlot& a, const CommitSlot& b) {
    return a.generation > b.generation;
  });
  return out;
}

std::optional<CommitSlot> newest_slot(std::span<const std::byte> preamble) {
  auto slots = valid_slots(preamble);
  if (slots.empty()) return std::nullopt;
  return slots.front();
}

std::array<std::byte, kFooterSize> encode_footer(const Footer& f) {
  std::array<std::byte, kFooterSize> b{};
  std::byte* p = b.data();
  store_le<uint64_t>(p + foot::kIndexOffset, f.index_offset);
  store_le<uint64_t>(p + foot::kIndexSize, f.index_size);
  store_le<uint64_t>(p + foot::kIndexHash, f.index_hash);
  store_le<uint64_t>(p + foot::kHeaderOffset, f.header_offset);
  store_le<uint64_t>(p + foot::kHeaderSize, f.header_size);
  store_le<uint64_t>(p + foot::kHeaderHash, f.header_hash);
  store_le<uint64_t>(p + foot::kGeneration, f.generation);
  store_le<uint64_t>(p + foot::kPrevFooter, f.prev_footer_offset);
  encode_version(p, foot::kWriterVersion, foot::kMinRead, foot::kMinWrite, foot::kKind,
                 foot::kRequired, foot::kOptional, f.version);
  store_le<uint64_t>(p + foot::kHash, hash_of(b, foot::kHash));
  std::memcpy(p + foot::kMagic, kFooterMagic.data(), 8);
  return b;
}

bool footer_intact(std::span<const std::byte> b) {
  return b.size() >= kFooterSize && has_magic(b, foot::kMagic, kFooterMagic) &&
         load_le<uint64_t>(b.data() + foot::kHash) == hash_of(b, foot::kHash);
}

Result<Footer> decode_footer(std::span<const std::byte> b) {
  if (b.size() < kFooterSize) return Status::corruption("file too short for a jtree footer");
  if (!has_magic(b, foot::kMagic, kFooterMagic)) {
    return Status::corruption("no jtree footer at the end of the file (bad magic)");
  }
  if (load_le<uint64_t>(b.data() + foot::kHash) != hash_of(b, foot::kHash)) {
    return Status::corruption("footer checksum mismatch");
  }
  if (!all_zero(b.subspan(foot::kReserved, foot::kReservedEnd - foot::kReserved))) {
    return Status::corruption("footer: reserved bytes set");
  }
  const std::byte* p = b.data();
  Footer f;
  f.index_offset = load_le<uint64_t>(p + foot::kIndexOffset);
  f.index_size = load_le<uint64_t>(p + foot::kIndexSize);
  f.index_hash = load_le<uint64_t>(p + foot::kIndexHash);
  f.header_offset = load_le<uint64_t>(p + foot::kHeaderOffset);
  f.header_size = load_le<uint64_t>(p + foot::kHeaderSize);
  f.header_hash = load_le<uint64_t>(p + foot::kHeaderHash);
  f.generation = load_le<uint64_t>(p + foot::kGeneration);
  f.prev_footer_offset = load_le<uint64_t>(p + foot::kPrevFooter);
  JTREE_ASSIGN_OR_RETURN(f.version,
                         decode_version(p, foot::kWriterVersion, foot::kMinRead, foot::kMinWrite,
                                        foot::kKind, foot::kRequired, foot::kOptional, "footer"));
  return f;
}

Status check_checkpoint_head(std::span<const std::byte> copy, std::span<const std::byte> header) {
  if (copy.size() != kPreambleSize + header.size()) {
    return Status::corruption("the copy of the checkpoint head has the wrong size");
  }
  auto pre = decode_preamble(copy.first(kPreambleSize));
  if (!pre.ok()) return pre.status().with_prefix("the copy of the checkpoint head");
  if (pre->version.kind != FileKind::kCheckpoint || pre->header_offset != kPreambleSize ||
      pre->header_size != header.size() || pre->header_hash != xxh3(header)) {
    return Status::corruption("the copy of the checkpoint head does not describe this header");
  }
  const auto copied = copy.subspan(kPreambleSize);
  if (!std::equal(copied.begin(), copied.end(), header.begin())) {
    return Status::corruption("the copy of the checkpoint head holds another header");
  }
  return Status::success();
}

Status check_head_placement(uint64_t head_offset, uint64_t head_size, uint64_t header_end,
                            uint64_t data_offset) {
  const uint64_t h = head_offset;
  if (h % 64 != 0 || h < header_end || head_size > data_offset || h > data_offset - head_size ||
      (data_offset - h) % 64 != 0) {
    return Status::corruption("the copy of the checkpoint head at " + std::to_string(h) +
                              " does not lie, 64-aligned, between the header and the chunk "
                              "data at " + std::to_string(data_offset));
  }
  return Status::success();
}

}  // namespace jtree::format
