// jtree commit TARGET [-n N]: finish a multi-process save by hand — assemble TARGET from the
// segments its processes wrote (after a job died before or during its own commit).
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <set>

#include "cli_util.h"
#include "commands.h"
#include "jtree/multihost.h"

namespace jtree::cli {
namespace {

constexpr const char* kUsage =
    "jtree commit [-n N] [--keep-segments] [--verify-data] [--overwrite-foreign] [--json] [-q] "
    "TARGET";
constexpr const char* kHelp =
    "Finishes a multi-process save by hand (after its job died before or during its own\n"
    "commit): assembles TARGET from the segments 'TARGET.seg-KKKKK-of-NNNNN' its processes\n"
    "wrote, then removes them. TARGET appears only when complete; a missing, damaged or\n"
    "foreign segment fails with no TARGET written. An existing TARGET that is not a jtree\n"
    "file (local or s3://) is never replaced unless --overwrite-foreign.\n"
    "\n"
    "options:\n"
    "  -n, --processes N  the save's process count (found beside a local TARGET when omitted)\n"
    "  --keep-segments    keep the segments after the commit\n"
    "  --verify-data      also check every chunk's checksum (reads all the data)\n"
    "  --overwrite-foreign  replace an existing TARGET that is not a jtree file\n"
    "  --json             one JSON object: target, segments, leaves, chunks, raw_bytes,\n"
    "                     stored_bytes, file_size, segments_kept, seconds\n"
    "  -q, --quiet        no progress bar, no summary\n"
    "  --threads N        threads (0: all cores)\n";

// The process counts of the local segments "<target>.seg-00000-of-NNNNN" beside TARGET.
std::set<uint32_t> local_segment_counts(const std::string& target) {
  std::set<uint32_t> counts;
  std::string local;
  if (!is_local_path(target, &local)) return counts;
  const std::filesystem::path p(local);
  const std::string prefix = p.filename().string() + ".seg-00000-of-";
  std::error_code ec;
  const auto dir = p.has_parent_path() ? p.parent_path() : std::filesystem::path(".");
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() != prefix.size() + 5 || name.compare(0, prefix.size(), prefix) != 0) continue;
    uint32_t n = 0;
    const char* digits = name.data() + prefix.size();
    auto [end, err] = std::from_chars(digits, digits + 5, n);
    if (err == std::errc() && end == digits + 5 && n > 0) counts.insert(n);
  }
  return counts;
}

}  // namespace

int cmd_commit(const Args& args) {
  // The commit's own flags first; the rest are the common ones.
  Args rest;
  uint32_t count = 0;
  CommitOptions co;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-n" || a == "--processes") {
      if (i + 1 == args.size()) return usage_error(a + " needs a number", kUsage);
      const std::string& v = args[++i];
      auto [end, err] = std::from_chars(v.data(), v.data() + v.size(), count);
      if (err != std::errc() || end != v.data() + v.size() || count == 0 || count > 99999) {
        return usage_error("-n takes a process count from 1 to 99999, not '" + v + "'", kUsage);
      }
    } else if (a == "--keep-segments") {
      co.keep_segments = true;
    } else if (a == "--verify-data") {
      co.verify_chunks = true;
    } else if (a == "--overwrite-foreign") {
      co.write.overwrite_foreign = true;
    } else {
      rest.push_back(a);
    }
  }
  CommonFlags f;
  std::string err;
  if (!parse_flags(rest, &f, &err)) return usage_error(err, kUsage);
  if (f.help) return print_help(kUsage, (std::string(kHelp) + kRemoteHelp).c_str());
  if (f.positional.size() != 1) return usage_error("commit takes one TARGET", kUsage);
  const std::string& target = f.positional[0];
  if (count == 0) {
    // Only local segments can be listed here; for URLs the count must be given.
    const auto counts = local_segment_counts(target);
    if (counts.size() != 1) {
      return fail(target + ": " +
                  (counts.empty() ? std::string("no segment 0 found beside it")
                                  : std::string("segments of saves by different process counts "
                                                "lie beside it")) +
                  "; give the process count with -n N");
    }
    count = *counts.begin();
  }
  co.write.threads = f.threads;
  co.write.remote = f.remote;
  Progress progress("committing", !f.quiet && !f.json);
  co.write.progress = progress.fn();
  const auto start = std::chrono::steady_clock::now();
  auto st = commit_segments(target, count, co);
  progress.finish();
  if (!st.ok()) return fail(st.status().message());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (f.json) {
    Json j;
    j.begin_object()
        .key("target").str(target)
        .key("segments").num(uint64_t{count})
        .key("leaves").num(st->leaves)
        .key("chunks").num(st->chunks)
        .key("raw_bytes").num(st->raw_bytes)
        .key("stored_bytes").num(st->stored_bytes)
        .key("file_size").num(st->file_size)
        .key("segments_kept").boolean(co.keep_segments)
        .key("seconds").num(seconds)
        .end_object();
    std::printf("%s\n", j.text().c_str());
  } else if (!f.quiet) {
    std::printf("%s: committed from %u segment%s: %llu leaves, %llu chunks, %s (%s raw) in "
                "%.2f s; segments %s\n",
                target.c_str(), count, count == 1 ? "" : "s",
                static_cast<unsigned long long>(st->leaves),
                static_cast<unsigned long long>(st->chunks), human_bytes(st->file_size).c_str(),
                human_bytes(st->raw_bytes).c_str(), seconds,
                co.keep_segments ? "kept" : "removed");
  }
  return 0;
}

}  // namespace jtree::cli
