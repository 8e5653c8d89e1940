// Temporary files of local saves: their names, the lock a writer holds on its own temporary
// file while it writes, and the removal of those whose writer is gone.
//
// A save writes `<dir>/.<name>.tmp-<16 hex>` and renames it over `<dir>/<name>`. A writer that
// is killed (SIGKILL, power loss) leaves that file behind. To tell a dead writer's file from a
// live one's — across processes and hosts sharing a directory, whatever their clocks say — a
// writer holds an exclusive flock() on its temporary file from just after creating it until
// just after the rename (or the removal) that ends it; the kernel releases the lock when the
// process dies. remove_stale_temp_files() takes the lock (without waiting) before it removes
// a file, so it removes only files that no live process holds:
//  - a writer locks its new file, then checks that its name still names it; if a cleaner took
//    the file between creation and lock (and so may remove it), the writer picks another name;
//  - a cleaner that got the lock checks that the name still names the file it locked (not
//    renamed to its target meanwhile, not replaced) before it removes the name.
// Where the file system has no flock() (some FUSE or network file systems), writers write
// unlocked and cleaners remove nothing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "io/posix_file.h"
#include "jtree/status.h"

namespace jtree::temp_files {

/// The 16 hexadecimal digits at the end of a temporary name.
inline constexpr size_t kSuffixDigits = 16;

/// `.<base>.tmp-`: what the temporary files of target `base` (a file name) are named after.
std::string prefix(std::string_view base);

/// Whether `name` (a directory entry) is a temporary file of target `base` (of any target
/// when `base` is empty).
bool is_temp_name(std::string_view name, std::string_view base);

/// The outcome of claim().
enum class Claim {
  kLocked,      ///< the file is ours and locked until the returned descriptor closes
  kUnlockable,  ///< the file system has no flock(): ours, but unprotected against cleaners
  kLost,        ///< a cleaner got the file first: pick another name (the file is not ours)
};

/// Locks the temporary file just created at `path` as `fd`. On kLocked / kUnlockable `*lock`
/// receives a descriptor of the same open file (the lock lives until it and `fd` are closed:
/// keep it open until the file has been renamed or removed). Errors: those of fstat/dup.
Result<Claim> claim(int fd, const std::string& path, UniqueFd* lock);

/// Removes the temporary files of target `base` (of every target when `base` is empty) in
/// directory `dir` that no live writer holds.
/// Best effort: entries that cannot be opened, locked or checked are left alone. Returns how
/// many were removed; an error only when `dir` cannot be listed.
Result<uint64_t> remove_stale(const std::string& dir, std::string_view base);

/// remove_stale() for the target at local path `path`, or for every target in it when it is
/// a directory (what remove_stale_temp_files() does for local paths). InvalidArgument when
/// the path names no file ("", ".", "..").
Result<uint64_t> remove_stale_for(std::string local);

}  // namespace jtree::temp_files
