// jtree compact FILE [-o OUT]: rewrite without dead bytes.
#include <cstdio>

#include "cli_util.h"
#include "commands.h"

namespace jtree::cli {
namespace {
constexpr const char* kUsage = "jtree compact [-o OUT] [--json] [-q] [--threads N] FILE";
constexpr const char* kHelp =
    "Rewrites a .jtree file without the bytes earlier generations left behind (replaced\n"
    "leaves after appends, old indexes), in place (atomically: a new file renamed over it) or\n"
    "into OUT. Chunks are copied as stored, not decoded again.\n"
    "\n"
    "options:\n"
    "  -o, --output OUT  write a new file instead of replacing FILE\n"
    "  --json       one JSON object: file, output, size_before, size_after, reclaimed, chunks\n"
    "  -q, --quiet  no progress bar, no summary\n"
    "  --threads N  threads (0: all cores)\n";
}

int cmd_compact(const Args& args) {
  CommonFlags f;
  std::string err;
  if (!parse_flags(args, &f, &err)) return usage_error(err, kUsage);
  if (f.help) return print_help(kUsage, (std::string(kHelp) + kRemoteHelp).c_str());
  if (f.positional.size() != 1) return usage_error("compact takes one FILE", kUsage);
  const std::string& path = f.positional[0];
  uint64_t before = 0;
  {
    auto r = Reader::open(path, open_options(f));
    if (!r.ok()) return fail(r.status().message());
    before = (*r)->info().file_size;
  }
  WriteOptions wo;
  wo.threads = f.threads;
  wo.remote = f.remote;
  Progress progress("compacting", !f.quiet && !f.json);
  wo.progress = progress.fn();
  auto st = compact(path, f.output, wo);
  progress.finish();
  if (!st.ok()) return fail(st.status().message());
  const std::string out = f.output.empty() ? path : f.output;
  if (f.json) {
    Json j;
    j.begin_object()
        .key("file").str(path)
        .key("output").str(out)
        .key("size_before").num(before)
        .key("size_after").num(st->file_size)
        .key("reclaimed").num(before > st->file_size ? before - st->file_size : uint64_t{0})
        .key("chunks").num(st->chunks)
        .end_object();
    std::printf("%s\n", j.text().c_str());
  } else if (!f.quiet) {
    std::printf("%s: %s -> %s (%s reclaimed), %llu chunks copied\n",
                out.c_str(), human_bytes(before).c_str(),
                human_bytes(st->file_size).c_str(),
                human_bytes(before > st->file_size ? before - st->file_size : 0).c_str(),
                static_cast<unsigned long long>(st->chunks));
  }
  return 0;
}

}  // namespace jtree::cli
