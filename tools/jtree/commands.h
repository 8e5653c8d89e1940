// The jtree subcommands. Each takes its arguments (after the subcommand name) and returns the
// process exit status: 0 success, 1 failure (or problems found), 2 usage error.
#pragma once

#include <string>
#include <vector>

#include "jtree/options.h"

namespace jtree::cli {

using Args = std::vector<std::string>;

int cmd_ls(const Args& args);
int cmd_info(const Args& args);
int cmd_get(const Args& args);
int cmd_verify(const Args& args);
int cmd_compact(const Args& args);
int cmd_clean(const Args& args);
int cmd_commit(const Args& args);
int cmd_diff(const Args& args);
/// Runs jtree.convert in $JTREE_PYTHON or python3 with the arguments (cmd_convert.cc).
int cmd_convert(const Args& args);

/// Prints "jtree: <message>" to stderr; returns 1.
int fail(const std::string& message);
/// Prints a usage error and the command's usage; returns 2.
int usage_error(const std::string& message, const char* usage);

/// Prints a command's help (its usage line, then `help`) to stdout; returns 0.
int print_help(const char* usage, const char* help);

/// Common flags: --json, -q/--quiet, --no-verify, --threads N, -h/--help,
/// --allow-full-download; the rest are positional.
struct CommonFlags {
  bool json = false;
  bool quiet = false;
  bool verify = true;
  bool help = false;                 ///< -h/--help: the command prints its help, exits 0
  bool allow_full_download = false;  ///< RemoteOptions::allow_full_download
  int threads = 0;
  std::string output;  ///< -o/--output
  std::vector<std::string> positional;
};
/// Parses `args`; unknown flags make it return false with `error` set.
bool parse_flags(const Args& args, CommonFlags* flags, std::string* error);
/// The OpenOptions the flags ask for (remote settings).
OpenOptions open_options(const CommonFlags& flags);

/// Help text of the options every command reading files takes (for print_help).
inline constexpr const char* kRemoteHelp =
    "  --allow-full-download  an http(s):// server that ignores Range requests (it answers\n"
    "                         with the whole file) is refused by default; with this the file\n"
    "                         is downloaded once into a temporary file and read from there\n";

}  // namespace jtree::cli
