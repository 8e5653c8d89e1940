// jtree clean PATH...: remove the temporary files that killed saves left behind.
#include <cstdio>

#include "cli_util.h"
#include "commands.h"

namespace jtree::cli {
namespace {
constexpr const char* kUsage = "jtree clean [--json] [-q] FILE_OR_DIR...";
constexpr const char* kHelp =
    "Removes the temporary files that killed saves left beside FILE (or beside any file in\n"
    "DIR): '.NAME.tmp-<16 hex digits>' whose save is no longer running (its lock is free).\n"
    "Those of running saves, and every other file, are kept.\n"
    "\n"
    "options:\n"
    "  --json       one JSON object: paths, each with path and removed (a count) or error\n"
    "  -q, --quiet  print nothing\n";
}

int cmd_clean(const Args& args) {
  CommonFlags f;
  std::string err;
  if (!parse_flags(args, &f, &err)) return usage_error(err, kUsage);
  if (f.help) return print_help(kUsage, kHelp);
  if (f.positional.empty()) return usage_error("clean takes a FILE or a DIRECTORY", kUsage);
  int status = 0;
  Json j;
  j.begin_object().key("paths").begin_array();
  for (const std::string& path : f.positional) {
    auto removed = remove_stale_temp_files(path);
    if (f.json) {
      j.begin_object().key("path").str(path);
      if (removed.ok()) j.key("removed").num(*removed);
      else j.key("error").str(removed.status().message());
      j.end_object();
    }
    if (!removed.ok()) {
      status = fail(removed.status().message());
      continue;
    }
    if (!f.quiet && !f.json) {
      std::printf("%s: %llu stale temporary file%s removed\n", path.c_str(),
                  static_cast<unsigned long long>(*removed), *removed == 1 ? "" : "s");
    }
  }
  if (f.json) {
    j.end_array().end_object();
    std::printf("%s\n", j.text().c_str());
  }
  return status;
}

}  // namespace jtree::cli
