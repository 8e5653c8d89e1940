// jtree compact FILE [-o OUT]: rewrite without dead bytes.
#include <cstdio>

#include "cli_util.h"
#include "commands.h"

namespace jtree::cli {
namespace {
constexpr const char* kUsage = "jtree compact [-o OUT] [-q] FILE";
}

int cmd_compact(const Args& args) {
  CommonFlags f;
  std::string err;
  if (!parse_flags(args, &f, &err)) return usage_error(err, kUsage);
  if (f.positional.size() != 1) return usage_error("compact takes one FILE", kUsage);
  const std::string& path = f.positional[0];
  uint64_t before = 0;
  {
    auto r = Reader::Open(path);
    if (!r.ok()) return fail(r.status().message());
    before = (*r)->info().file_size;
  }
  WriteOptions wo;
  wo.threads = f.threads;
  Progress progress("compacting", !f.quiet);
  wo.progress = progress.fn();
  auto st = compact(path, f.output, wo);
  progress.finish();
  if (!st.ok()) return fail(st.status().message());
  if (!f.quiet) {
    std::printf("%s: %s -> %s (%s reclaimed), %llu chunks copied\n",
                (f.output.empty() ? path : f.output).c_str(), human_bytes(before).c_str(),
                human_bytes(st->file_size).c_str(),
                human_bytes(before > st->file_size ? before - st->file_size : 0).c_str(),
                static_cast<unsigned long long>(st->chunks));
  }
  return 0;
}

}  // namespace jtree::cli
