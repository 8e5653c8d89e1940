// jtree clean PATH...: remove the temporary files that killed saves left behind.
#include <cstdio>

#include "cli_util.h"
#include "commands.h"

namespace jtree::cli {
namespace {
constexpr const char* kUsage = "jtree clean [-q] FILE_OR_DIR...";
}

int cmd_clean(const Args& args) {
  CommonFlags f;
  std::string err;
  if (!parse_flags(args, &f, &err)) return usage_error(err, kUsage);
  if (f.positional.empty()) return usage_error("clean takes a FILE or a DIRECTORY", kUsage);
  int status = 0;
  for (const std::string& path : f.positional) {
    auto removed = remove_stale_temp_files(path);
    if (!removed.ok()) {
      status = fail(removed.status().message());
      continue;
    }
    if (!f.quiet) {
      std::printf("%s: %llu stale temporary file%s removed\n", path.c_str(),
                  static_cast<unsigned long long>(*removed), *removed == 1 ? "" : "s");
    }
  }
  return status;
}

}  // namespace jtree::cli
