// The jtree subcommands. Each takes its arguments (after the subcommand name) and returns the
// process exit status: 0 success, 1 failure (or problems found), 2 usage error.
#pragma once

#include <string>
#include <vector>

namespace jtree::cli {

using Args = std::vector<std::string>;

int cmd_ls(const Args& args);
int cmd_info(const Args& args);
int cmd_get(const Args& args);
int cmd_verify(const Args& args);
int cmd_compact(const Args& args);
int cmd_clean(const Args& args);
int cmd_commit(const Args& args);
/// Runs jtree.convert in $JTREE_PYTHON or python3 with the arguments (cmd_convert.cc).
int cmd_convert(const Args& args);

/// Prints "jtree: <message>" to stderr; returns 1.
int fail(const std::string& message);
/// Prints a usage error and the command's usage; returns 2.
int usage_error(const std::string& message, const char* usage);

/// Common flags: --json, -q/--quiet, --no-verify, --threads N; the rest are positional.
struct CommonFlags {
  bool json = false;
  bool quiet = false;
  bool verify = true;
  int threads = 0;
  std::string output;  ///< -o/--output
  std::vector<std::string> positional;
};
/// Parses `args`; unknown flags make it return false with `error` set.
bool parse_flags(const Args& args, CommonFlags* flags, std::string* error);

}  // namespace jtree::cli
