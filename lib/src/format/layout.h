// The fixed-size parts of a .jtree file: the preamble at offset 0 and the footer at the end
// (spec/FORMAT.md, "Preamble", "Footer", "Commit slots"). Pure encode/decode over bytes.
//
//   +--------------------+ 0
//   | preamble (128 B)   |  magic, versions, features, generation-0 header location, 2 slots
//   | header             |  flatbuffer (format/jtree.fbs: Header)
//   | chunk data         |  one or more segments
//   | [header of a later generation]
//   | index              |  flatbuffer (Index)
//   | footer (128 B)     |  index + header location, generation, versions, magic last
//   +--------------------+ end
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "jtree/status.h"

namespace jtree::format {

inline constexpr size_t kPreambleSize = 128;
inline constexpr size_t kFooterSize = 128;
inline constexpr size_t kSlotSize = 32;
inline constexpr size_t kSlotOffset[2] = {64, 96};
/// "\x89JTREE\r\n": a high byte first (no text file starts so), CR LF to catch newline
/// conversion.
inline constexpr std::array<uint8_t, 8> kPreambleMagic = {0x89, 'J', 'T', 'R', 'E', 'E', '\r',
                                                          '\n'};
/// The preamble magic reversed, as the last 8 bytes of the file.
inline constexpr std::array<uint8_t, 8> kFooterMagic = {'\n', '\r', 'E', 'E', 'R', 'T', 'J',
                                                        0x89};

/// The format version this code writes, and the newest it reads (it reads every older one).
/// Version 2 added dtypes (spec/CHANGELOG.md); a file that uses none of version 2's additions
/// is written with min_read_version 1, so that version-1 readers still read it.
inline constexpr uint16_t kFormatVersion = 3;  // == jtree::kFormatVersion (layout.cc checks)
/// Required feature bits this code understands (none defined in versions 1 and 2).
inline constexpr uint64_t kKnownRequiredFeatures = 0;

/// The largest dimension and element count of an array (spec section 6.2): 2^58, so that the
/// memory size of any dtype (at most 16 bytes an element) stays under 2^62 bytes.
inline constexpr uint64_t kMaxElements = uint64_t{1} << 58;

/// File kinds (preamble and footer).
enum class FileKind : uint8_t { kCheckpoint = 0, kSegment = 1 };

/// Versions and features, shared by preamble and footer.
struct VersionInfo {
  uint16_t writer_version = kFormatVersion;
  uint16_t min_read_version = 1;
  uint16_t min_write_version = 1;
  FileKind kind = FileKind::kCheckpoint;
  uint64_t required_features = 0;
  uint64_t optional_features = 0;
};

struct Preamble {
  VersionInfo version;
  uint64_t header_offset = kPreambleSize;
  uint64_t header_size = 0;
  uint64_t header_hash = 0;
};

/// A commit slot: where the footer of a committed generation is (in-place appends).
struct CommitSlot {
  uint64_t generation = 0;
  uint64_t footer_offset = 0;
};

struct Footer {
  uint64_t index_offset = 0;
  uint64_t index_size = 0;
  uint64_t index_hash = 0;
  uint64_t header_offset = 0;
  uint64_t header_size = 0;
  uint64_t header_hash = 0;
  uint64_t generation = 0;
  uint64_t prev_footer_offset = 0;  ///< 0: none (generation 0)
  VersionInfo version;
};

/// Encodes a preamble with both commit slots empty.
std::array<std::byte, kPreambleSize> encode_preamble(const Preamble& p);
/// Decodes and checks a preamble: magic, hash, reserved bytes, versions, features.
/// Errors: Corruption ("not a jtree file" for a wrong magic), NotSupported (versions/features).
Result<Preamble> decode_preamble(std::span<const std::byte> bytes);

std::array<std::byte, kSlotSize> encode_slot(const CommitSlot& slot);
/// nullopt for an empty (all zero) or invalid slot.
std::optional<CommitSlot> decode_slot(std::span<const std::byte> bytes);
/// The newest valid commit slot of a preamble, if any.
std::optional<CommitSlot> newest_slot(std::span<const std::byte> preamble);
/// The valid commit slots of a preamble, newest generation first.
std::vector<CommitSlot> valid_slots(std::span<const std::byte> preamble);

std::array<std::byte, kFooterSize> encode_footer(const Footer& f);
/// Decodes and checks a footer: magic, hash, reserved bytes, versions, features.
Result<Footer> decode_footer(std::span<const std::byte> bytes);
/// Whether `bytes` (128) carry a footer's magic and a matching hash: such a footer at the end of
/// a file is the current one (FORMAT.md section 5) even if its other fields are then refused.
bool footer_intact(std::span<const std::byte> bytes);

/// Checks the copy of a checkpoint's head that segment 0 of a multi-process save keeps for the
/// commit (section 11.1): `copy` is that preamble and header. Corruption (saying what differs)
/// unless the preamble is a valid checkpoint preamble describing `header` and the header bytes
/// equal `header`.
Status check_checkpoint_head(std::span<const std::byte> copy, std::span<const std::byte> header);

/// Checks where segment 0 keeps that copy (section 11.1): `head_offset` a multiple of 64, at or
/// after `header_end` (the end of the segment's own header), the copy of `head_size` bytes
/// (preamble and header) ending at or before the chunk data at `data_offset`, and
/// `data_offset - head_offset` a multiple of 64. Corruption naming both offsets otherwise.
Status check_head_placement(uint64_t head_offset, uint64_t head_size, uint64_t header_end,
                            uint64_t data_offset);

/// Checks the versions and feature bits against what this code supports.
Status check_version(const VersionInfo& v, std::string_view where);

}  // namespace jtree::format
