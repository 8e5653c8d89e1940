// check_save_target(): a save never replaces something that is not a jtree file (a typo in a path
// must not destroy someone's data) unless the caller says overwrite_foreign. The same rule for
// every backend and every writer of a new file (save, commit, compact into another file).
#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>

#include "format/layout.h"
#include "jtree/io.h"
#include "jtree/multihost.h"
#include "write/save_internal.h"

namespace jtree {
namespace {

constexpr size_t kMagicSize = 8;

Status refuse(const std::string& name) {
  return Status::already_exists(name + ": exists and is not a jtree file; refusing to replace "
                                      "it (set overwrite_foreign to allow)");
}

bool is_jtree_magic(std::span<const std::byte> first) {
  return first.size() == kMagicSize &&
         std::memcmp(first.data(), format::kPreambleMagic.data(), kMagicSize) == 0;
}

bool is_s3(std::string_view url) {
  if (url.size() < 5) return false;
  std::string scheme(url.substr(0, 5));
  std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return scheme == "s3://";
}

// An s3:// object: its size (HEAD-like open) and, when it is not empty, its first 8 bytes
// (one ranged GET) decide. Absent: nothing to protect.
Status check_remote(std::string_view url, const WriteOptions& options) {
  OpenOptions oo;
  oo.use_mmap = false;
  oo.remote = options.remote;
  auto src = open_source(url, oo);
  if (!src.ok()) return src.status().is_not_found() ? Status::success() : src.status();
  // (A remote source makes its first request here.)
  auto size = (*src)->size();
  if (!size.ok()) return size.status().is_not_found() ? Status::success() : size.status();
  if (*size == 0) return Status::success();
  if (*size < kMagicSize) return refuse(std::string(url));
  std::byte magic[kMagicSize] = {};
  ReadRange r{0, magic};
  JTREE_RETURN_IF_ERROR((*src)->read(std::span(&r, 1)));
  return is_jtree_magic(magic) ? Status::success() : refuse(std::string(url));
}

}  // namespace

Status check_save_target(std::string_view path_or_url, const WriteOptions& options) {
  if (options.overwrite_foreign) return Status::success();
  std::string local;
  if (!is_local_path(path_or_url, &local)) {
    // http(s) targets cannot be written at all: their sink says so.
    return is_s3(path_or_url) ? check_remote(path_or_url, options) : Status::success();
  }
  std::ifstream in(local, std::ios::binary);
  if (!in) return Status::success();  // absent (or unreadable: the sink reports that)
  char magic[kMagicSize] = {};
  in.read(magic, sizeof magic);
  if (in.gcount() == 0) return Status::success();  // empty file
  if (in.gcount() == static_cast<std::streamsize>(kMagicSize) &&
      is_jtree_magic(std::as_bytes(std::span(magic)))) {
    return Status::success();
  }
  return refuse(local);
}

}  // namespace jtree
