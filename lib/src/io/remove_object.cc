// Deleting objects (segment files after a multi-process commit).
#include <unistd.h>

#include <cerrno>
#include <string>

#include "io/posix_file.h"
#include "jtree/io.h"

namespace jtree {

Status remove_object(std::string_view path_or_url) {
  std::string local;
  if (is_local_path(path_or_url, &local)) {
    if (::unlink(local.c_str()) != 0) return errno_status(local, "remove", errno);
    return Status::OK();
  }
  return Status::NotSupported(std::string(path_or_url) +
                              ": removing objects is not supported for this URL scheme");
}

}  // namespace jtree
