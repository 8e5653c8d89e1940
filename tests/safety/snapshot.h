// What a reader sees in a file, as plain values that tests compare: the tree's structure, each
// leaf's spec, and each payload leaf's data (or the error reading it gave). Two snapshots are
// equal exactly when a caller could not tell the two files apart through the Reader.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "jtree/jtree.h"

namespace jtree::safety {

struct LeafSnapshot {
  std::string spec;      ///< kind, dtype, shape, storage, codec, scalar values...
  std::string location;  ///< where the payload comes from: inline bytes or chunk entries
  Status status;     ///< of reading the payload (OK for scalar leaves)
  std::string data;  ///< the payload as read (empty when the read failed)
};

struct Snapshot {
  Status status;          ///< of opening; the rest is empty when it failed
  std::string structure;  ///< nodes and metadata
  uint64_t generation = 0;
  bool recovered = false;
  std::vector<LeafSnapshot> leaves;
};

/// Payloads larger than this are not read (their status says so): a header changed on purpose
/// may declare a leaf far larger than the test should allocate.
inline constexpr uint64_t kMaxSnapshotLeafBytes = 16u << 20;

/// Opens `bytes` (a memory source named `name`) and reads every payload leaf.
Snapshot snapshot(std::vector<std::byte> bytes, const std::string& name,
                  const ReadOptions& ro = {});
/// The same from an open reader.
Snapshot snapshot(const Reader& reader, const ReadOptions& ro = {});

/// The spec of a leaf as a string ("Array float32 [24,16] Chunked zstd ...").
std::string leaf_spec(const Leaf& l);

/// Read options for the gauntlet: one thread (no pool start-up per read), checksums on.
ReadOptions single_thread();

}  // namespace jtree::safety
