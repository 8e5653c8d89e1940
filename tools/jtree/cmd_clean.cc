// jtree clean PATH...: remove what killed saves left behind (temporary files beside local
// files; incomplete multipart uploads of s3:// targets).
#include <cstdio>

#include "cli_util.h"
#include "commands.h"

namespace jtree::cli {
namespace {
constexpr const char* kUsage =
    "jtree clean [--json] [-q] [--endpoint URL ...] FILE_OR_DIR_OR_S3_URL...";
constexpr const char* kHelp =
    "Removes the temporary files that killed saves left beside FILE (or beside any file in\n"
    "DIR): '.NAME.tmp-<16 hex digits>' whose save is no longer running (its lock is free).\n"
    "Those of running saves, and every other file, are kept.\n"
    "For s3://bucket/key: aborts every incomplete multipart upload of the key and of its\n"
    "segments ('key.seg-KKKKK-of-NNNNN'), the parts killed writers left stored (run it when\n"
    "no save to that key is running: a running save's upload is aborted too).\n"
    "\n"
    "options:\n"
    "  --json       one JSON object: paths, each with path and removed (a count of files,\n"
    "               or of uploads aborted) or error\n"
    "  -q, --quiet  print nothing\n";
}

int cmd_clean(const Args& args) {
  CommonFlags f;
  std::string err;
  if (!parse_flags(args, &f, &err)) return usage_error(err, kUsage);
  if (f.help) return print_help(kUsage, (std::string(kHelp) + kRemoteHelp).c_str());
  if (f.positional.empty()) return usage_error("clean takes a FILE or a DIRECTORY", kUsage);
  int status = 0;
  Json j;
  j.begin_object().key("paths").begin_array();
  for (const std::string& path : f.positional) {
    auto removed = remove_stale_temp_files(path, f.remote);
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
      const bool local = is_local_path(path);
      std::printf("%s: %llu %s\n", path.c_str(), static_cast<unsigned long long>(*removed),
                  local ? (*removed == 1 ? "stale temporary file removed"
                                         : "stale temporary files removed")
                        : (*removed == 1 ? "incomplete multipart upload aborted"
                                         : "incomplete multipart uploads aborted"));
    }
  }
  if (f.json) {
    j.end_array().end_object();
    std::printf("%s\n", j.text().c_str());
  }
  return status;
}

}  // namespace jtree::cli
