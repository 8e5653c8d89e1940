// Where the structures of a valid file's current generation lie, so that the safety tests know
// what a change at any byte must do (spec/FORMAT.md sections 2-5), and the byte patching they
// damage files with.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "jtree/jtree.h"

namespace jtree::safety {

enum class Region {
  kPreamble,  ///< bytes 0..63: magic, versions, features, header location, hashed
  kSlots,     ///< bytes 64..127: commit slots, not covered by the preamble hash
  kHeader,    ///< the current generation's header
  kIndex,     ///< the current generation's index
  kFooter,    ///< the current footer
  kChunk,     ///< the stored bytes of a live chunk
  kOther,     ///< padding, and dead bytes of earlier generations
};

const char* region_name(Region r);

struct FileMap {
  struct Chunk {
    uint64_t offset = 0, size = 0;
    uint32_t leaf = 0;
    bool raw = false;
  };
  uint64_t size = 0;
  uint64_t generation = 0;
  uint64_t header_offset = 0, header_size = 0;
  uint64_t index_offset = 0, index_size = 0;
  uint64_t footer_offset = 0;
  std::vector<Chunk> chunks;  ///< sorted by offset
  bool has_current_slot = false;  ///< a commit slot records the current footer

  Region region(uint64_t p, const Chunk** chunk = nullptr) const;
};

/// The map of a file that `reader` opened.
FileMap map_file(const Reader& reader, std::span<const std::byte> bytes);

void store_le64(std::span<std::byte> b, uint64_t offset, uint64_t v);
uint64_t load_le64(std::span<const std::byte> b, uint64_t offset);

/// After bytes of `region` were changed, recomputes the hashes that cover them (and the hashes
/// of the structures holding those hashes), as a forger would: what is left to catch the
/// change is validation.
void rehash(std::span<std::byte> file, const FileMap& m, Region region);

}  // namespace jtree::safety
