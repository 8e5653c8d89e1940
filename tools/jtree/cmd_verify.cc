// jtree verify FILE: every checksum, every chunk decoded, every byte accounted for.
#include <cstdio>

#include "cli_util.h"
#include "commands.h"

namespace jtree::cli {
namespace {
constexpr const char* kUsage =
    "jtree verify [--json] [-q] [--threads N] [--allow-full-download] FILE";
constexpr const char* kHelp =
    "Checks a .jtree file (a path or a URL): every checksum (preamble, header, index, footer,\n"
    "every chunk), every chunk decoded, every byte of the file accounted for. Exit status 0\n"
    "when it is intact, 1 when a problem is found (each named: leaf, chunk, offset).\n"
    "\n"
    "options:\n"
    "  --json       one JSON object: file, ok, generation, chunks_checked, bytes_checked,\n"
    "               dead_bytes, problems (where, code, message), notes\n"
    "  -q, --quiet  no progress bar\n"
    "  --threads N  decoding threads (0: all cores)\n";
}

int cmd_verify(const Args& args) {
  CommonFlags f;
  std::string err;
  if (!parse_flags(args, &f, &err)) return usage_error(err, kUsage);
  if (f.help) return print_help(kUsage, (std::string(kHelp) + kRemoteHelp).c_str());
  if (f.positional.size() != 1) return usage_error("verify takes one FILE", kUsage);
  auto reader = Reader::open(f.positional[0], open_options(f));
  if (!reader.ok()) {
    if (f.json) {
      Json j;
      j.begin_object().key("file").str(f.positional[0]).key("ok").boolean(false);
      j.key("problems").begin_array().begin_object().key("where").str("open");
      j.key("code").str(status_code_name(reader.status().code()));
      j.key("message").str(reader.status().message()).end_object().end_array().end_object();
      std::printf("%s\n", j.text().c_str());
      return 1;
    }
    return fail("FAILED: " + reader.status().message());
  }
  const Reader& r = **reader;
  ReadOptions ro;
  ro.threads = f.threads;
  Progress progress("verifying", !f.quiet && !f.json);
  ro.progress = progress.fn();
  auto report = r.verify(ro);
  progress.finish();
  if (!report.ok()) return fail(report.status().message());
  if (f.json) {
    Json j;
    j.begin_object();
    j.key("file").str(r.name());
    j.key("ok").boolean(report->ok());
    j.key("generation").num(r.info().generation);
    j.key("chunks_checked").num(report->chunks_checked);
    j.key("bytes_checked").num(report->bytes_checked);
    j.key("dead_bytes").num(report->dead_bytes);
    j.key("problems").begin_array();
    for (const auto& p : report->problems) {
      j.begin_object().key("where").str(p.where).key("code").str(status_code_name(p.status.code()));
      j.key("message").str(p.status.message()).end_object();
    }
    j.end_array();
    j.key("notes").begin_array();
    for (const auto& n : report->notes) j.str(n);
    j.end_array();
    j.end_object();
    std::printf("%s\n", j.text().c_str());
    return report->ok() ? 0 : 1;
  }
  for (const auto& n : report->notes) std::printf("note: %s\n", n.c_str());
  if (report->ok()) {
    std::printf("OK: %s, generation %llu: %llu chunks (%s) verified; header, index and footer "
                "intact; %s dead or padding\n",
                r.name().c_str(), static_cast<unsigned long long>(r.info().generation),
                static_cast<unsigned long long>(report->chunks_checked),
                human_bytes(report->bytes_checked).c_str(), human_bytes(report->dead_bytes).c_str());
    return 0;
  }
  std::printf("FAILED: %s: %zu problem(s) in %llu chunks checked\n", r.name().c_str(),
              report->problems.size(), static_cast<unsigned long long>(report->chunks_checked));
  for (const auto& p : report->problems) {
    std::printf("  %s\n", p.status.to_string().c_str());  // the message names the place
  }
  return 1;
}

}  // namespace jtree::cli
