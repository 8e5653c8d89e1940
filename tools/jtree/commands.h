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

/// Common flags: --json, -q/--quiet, --no-verify, --threads N, -h/--help, and the remote
/// settings (kRemoteHelp); the rest are positional.
struct CommonFlags {
  bool json = false;
  bool quiet = false;
  bool verify = true;
  bool help = false;     ///< -h/--help: the command prints its help, exits 0
  int threads = 0;
  std::string output;    ///< -o/--output
  RemoteOptions remote;  ///< --endpoint, --region... (kRemoteHelp), checked by parse_flags
  /// A remote flag other than --allow-full-download was given (then a URL must be too).
  bool remote_set = false;
  std::vector<std::string> positional;
};
/// Parses `args`; unknown flags (the remote ones too, unless `remote_flags`), bad values,
/// and remote flags without an http(s):// or s3:// URL among the arguments (they would go
/// unused) make it return false with `error` set.
bool parse_flags(const Args& args, CommonFlags* flags, std::string* error,
                 bool remote_flags = true);
/// The OpenOptions the flags ask for (remote settings).
OpenOptions open_options(const CommonFlags& flags);

/// Help text of the remote settings every command opening files takes (for print_help);
/// docs/remote.md describes them, and the environment they override.
inline constexpr const char* kRemoteHelp =
    "\nremote files (http(s):// and s3:// URLs; unset: the environment's settings):\n"
    "  --endpoint URL         S3-compatible endpoint (over AWS_ENDPOINT_URL_S3...)\n"
    "  --region R             S3 region (over AWS_REGION...)\n"
    "  --profile P            AWS profile for credentials, region, endpoint (over AWS_PROFILE)\n"
    "  --addressing MODE      S3 addressing: auto (default), path or virtual\n"
    "  --concurrency N        requests in flight per file (default 64)\n"
    "  --retries N            retries of a failed request (default 8)\n"
    "  --timeout S            seconds for one request, retries included (default 300)\n"
    "  --connect-timeout S    seconds to connect (default 10)\n"
    "  --part-size BYTES      S3 upload part size, 5 MiB to 5 GiB (default 8 MiB; writes)\n"
    "  --header 'NAME: VALUE' an extra http(s):// request header (repeatable)\n"
    "  --ca-file FILE         CA bundle to verify TLS peers with\n"
    "  --no-verify-tls        do not verify TLS certificates (test servers only)\n"
    "  --allow-full-download  an http(s):// server that ignores Range requests (it answers\n"
    "                         with the whole file) is refused by default; with this the file\n"
    "                         is downloaded once into a temporary file and read from there\n";

}  // namespace jtree::cli
