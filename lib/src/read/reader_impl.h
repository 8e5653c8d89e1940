// The Reader's state, shared by reader.cc and verify.cc.
#pragma once

#include <atomic>
#include <memory>

#include "codec/chunk_codec.h"
#include "read/file_opener.h"

namespace jtree {

struct Reader::Impl {
  std::shared_ptr<Source> source;
  OpenOptions options;
  OpenedFile file;

  /// How many fetches to run at once: the CPU threads asked for, or more when the backend
  /// waits on the network; never more than the bytes-in-flight budget allows.
  int fetch_parallelism(const ReadOptions& ro) const;
  /// `ro` with max_fetch_bytes capped to what the backend wants per fetch (remote: a few MiB,
  /// so that decoding overlaps the transfers; local: 1 MiB). Loads and Verify plan with it.
  ReadOptions fetch_options(const ReadOptions& ro) const;
  /// The absolute resolution of chunk `i`.
  ChunkInfo chunk(uint64_t i) const;
  /// How the chunks of `leaf` are encoded.
  static codec::ChunkFormat format_of(const Leaf& leaf);
  /// "<name>: leaf <path>: chunk <k>" (for messages).
  std::string chunk_where(uint32_t leaf, uint64_t local) const;
  /// The error for a chunk whose stored bytes do not match its checksum.
  Status checksum_error(const ChunkInfo& c, uint32_t leaf, uint64_t local) const;
  /// Checks a chunk's stored bytes against its checksum.
  Status verify_chunk(const ChunkInfo& c, std::span<const std::byte> stored, uint32_t leaf,
                      uint64_t local) const;
};

}  // namespace jtree
