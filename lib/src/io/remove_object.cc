// Deleting objects (segment files after a multi-process commit).
#include <unistd.h>

#include <cerrno>
#include <string>

#include "io/posix_file.h"
#include "jtree/io.h"
#ifdef JTREE_HAVE_REMOTE
#include "io/remote/remote_io.h"
#endif

namespace jtree {

Status remove_object(std::string_view path_or_url) {
  std::string local;
  if (is_local_path(path_or_url, &local)) {
    if (::unlink(local.c_str()) != 0) return errno_status(local, "remove", errno);
    return Status::OK();
  }
#ifdef JTREE_HAVE_REMOTE
  if (remote::is_remote_url(path_or_url)) return remote::remove_remote_object(path_or_url);
#endif
  return Status::NotSupported(std::string(path_or_url) +
                              ": removing objects is not supported for this URL scheme");
}

}  // namespace jtree
