// The "file" backend (backend.h): local paths and file:// URLs.
#include <unistd.h>

#include <cerrno>
#include <string>

#include "io/backend.h"
#include "io/posix_file.h"
#include "io/temp_files.h"

namespace jtree::io {
namespace {

// The file system path of a local path or file:// URL (find_backend chose this backend).
std::string local_of(std::string_view path_or_url) {
  std::string local;
  (void)is_local_path(path_or_url, &local);
  return local;
}

Result<std::shared_ptr<Source>> open(std::string_view url, const OpenOptions& options) {
  return open_file_source(local_of(url), options.use_mmap);
}

Result<std::unique_ptr<Sink>> create(std::string_view url, const SinkOptions& options) {
  return create_file_sink(local_of(url), options);
}

// Local appends are serialised by AppendLock (write/append_guard.h), not by an ETag.
Result<std::unique_ptr<Sink>> append(std::string_view url, uint64_t keep_bytes,
                                     const SinkOptions& options, std::string_view) {
  return open_file_append_sink(local_of(url), keep_bytes, options.sync);
}

Status remove(std::string_view url, const RemoteOptions&) {
  const std::string local = local_of(url);
  if (::unlink(local.c_str()) != 0) return errno_status(local, "remove", errno);
  return Status::success();
}

Result<uint64_t> remove_stale(std::string_view url, const RemoteOptions&) {
  return temp_files::remove_stale_for(local_of(url));
}

}  // namespace

const Backend& file_backend() {
  static const Backend b = [] {
    Backend f;
    f.name = "file";
    f.schemes = {"file"};
    f.open_source = open;
    f.create_sink = create;
    f.open_append_sink = append;
    f.remove_object = remove;
    f.remove_stale = remove_stale;
    return f;
  }();
  return b;
}

}  // namespace jtree::io
