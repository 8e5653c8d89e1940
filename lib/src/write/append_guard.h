// What keeps appends to one file from racing (jtree::append): an exclusive lock on a local
// file for the whole append, and the check that the file is still the generation the caller
// planned against.
#pragma once

#include <string>
#include <string_view>

#include "io/posix_file.h"
#include "jtree/options.h"
#include "jtree/reader.h"

namespace jtree {

/// An exclusive flock() on a local target, held until destroyed. Appends in other processes
/// (and threads) wait for it; readers take no lock and are never blocked. Remote targets get
/// an empty lock: their appends write a new object version pinned to the ETag instead.
class AppendLock {
 public:
  /// Blocks until the lock is held. Errors: NotFound (no such file), IOError.
  static Result<AppendLock> acquire(std::string_view target);
  /// Whether the path still names the locked file (an in-place compaction or a save renames a
  /// new file over it): Aborted otherwise.
  Status still_current() const;

 private:
  std::string path_;  // empty: remote, nothing locked
  UniqueFd fd_;
};

/// Aborted when `reader` (the target opened under the lock) is not the generation in
/// options.append_base; OK when append_base is unset.
Status check_append_base(const Reader& reader, const WriteOptions& options,
                         std::string_view target);

}  // namespace jtree
