// The write operations the fault and crash tests interrupt, each from a fixed starting state
// in a directory: a save over an existing file, an append, an in-place compaction, a
// multi-host commit. Each knows what its success must leave behind.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "dir_state.h"
#include "jtree/jtree.h"
#include "snapshot.h"

namespace jtree::safety {

/// The file every scenario ends up writing, in its directory.
inline constexpr const char* kTarget = "ckpt.jtree";

struct Scenario {
  std::string name;
  /// The starting state: files and their bytes (restored before every run).
  DirState start;
  /// What a reader saw in the target before the operation (empty status for "no file").
  Snapshot before;
  /// The operation (through the public API; faults come from installed I/O hooks).
  std::function<Status(const std::string& dir)> run;
  /// What a reader must see in the target once the operation succeeded.
  Snapshot after;
  /// Files that must exist after a success besides the target (none: segments are removed).
  std::vector<std::string> after_files;
  /// True for in-place appends, which may rewrite the commit slots even when they fail
  /// (spec/FORMAT.md 10.2, step 1): those 64 bytes are not compared.
  bool patches_slots = false;
};

/// Write options of the scenarios: one compression thread (the order of I/O operations is
/// then the same in every run, so "operation N" means the same thing each time), small
/// chunks (many operations), no fsync (faults are injected above the disk; fsync only slows
/// the thousands of runs down; sync() calls still happen and are counted).
WriteOptions scenario_write_options();

/// All scenarios, their starting states built in fresh temporary directories.
std::vector<Scenario> scenarios();

/// The snapshot of `path` (a local file), read with one thread.
Snapshot snapshot_file(const std::string& path);

}  // namespace jtree::safety
