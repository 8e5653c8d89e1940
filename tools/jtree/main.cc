// jtree — inspect, extract, verify, compact, commit, convert and clean up after .jtree files.
#include <cstdio>
#include <cstring>
#include <string>

#include "commands.h"
#include "jtree/writer.h"

namespace {

const char* kUsage =
    "usage: jtree <command> [options] FILE ...\n"
    "\n"
    "commands:\n"
    "  ls FILE              the tree: every leaf with dtype, shape, stored and raw size, ratio\n"
    "  info FILE            format version, generations, segments, codecs, sizes, metadata\n"
    "  get FILE KEY[SLICE]  a leaf or a slice of it, e.g. 'params/emb[1000:2000, :64]';\n"
    "                       -o out.npy writes NumPy, -o out.bin raw bytes, else printed\n"
    "  verify FILE          check every checksum and decode every chunk\n"
    "  compact FILE         rewrite without dead bytes (-o OUT for a new file)\n"
    "  clean FILE|DIR       remove temporary files left by killed saves of FILE (or of any\n"
    "                       file in DIR); those of running saves are kept\n"
    "  commit TARGET        finish a multi-process save: assemble TARGET from its segments\n"
    "                       (-n N processes; found beside a local TARGET when omitted;\n"
    "                       --keep-segments, --verify-data reads and checks all the data)\n"
    "  diff A B             what differs: entries added, removed, changed in dtype, shape or\n"
    "                       value (max abs diff); equal checksums are not read; exit 0/1/2\n"
    "  convert SRC DST      safetensors (Hugging Face sharded too), PyTorch, NumPy, GGUF, orbax,\n"
    "                       flax -> .jtree, or .jtree -> .safetensors (sharded too)/.gguf; runs\n"
    "                       the jtree Python package: the pip-installed jtree in its own\n"
    "                       Python, a jtree built from source in $JTREE_PYTHON or python3\n"
    "                       (convert --help names it)\n"
    "\n"
    "options: --json (every command that prints), -q/--quiet (no progress bar), --no-verify\n"
    "         (skip chunk checksums), --threads N, -o/--output PATH, --allow-full-download\n"
    "         (an http(s) server that ignores Range: download the file whole)\n"
    "'jtree CMD --help' describes a command.\n"
    "FILE may be a path or a URL (file://; http(s):// and s3:// when built with them).\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help") ||
      !std::strcmp(argv[1], "help")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--version") || !std::strcmp(argv[1], "version")) {
    std::printf("jtree %s (format version %d)\n", std::string(jtree::version_string()).c_str(),
                jtree::kFormatVersion);
    return 0;
  }
  const std::string cmd = argv[1];
  jtree::cli::Args args(argv + 2, argv + argc);
  if (cmd == "ls") return jtree::cli::cmd_ls(args);
  if (cmd == "info") return jtree::cli::cmd_info(args);
  if (cmd == "get") return jtree::cli::cmd_get(args);
  if (cmd == "verify") return jtree::cli::cmd_verify(args);
  if (cmd == "compact") return jtree::cli::cmd_compact(args);
  if (cmd == "clean") return jtree::cli::cmd_clean(args);
  if (cmd == "commit") return jtree::cli::cmd_commit(args);
  if (cmd == "diff") return jtree::cli::cmd_diff(args);
  if (cmd == "convert") return jtree::cli::cmd_convert(args);
  std::fprintf(stderr, "jtree: unknown command '%s'\n\n%s", cmd.c_str(), kUsage);
  return 2;
}
