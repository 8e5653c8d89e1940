// jtree info FILE: what the file says about itself.
#include <cstdio>
#include <map>

#include "cli_util.h"
#include "commands.h"
#include "describe.h"

namespace jtree::cli {
namespace {

constexpr const char* kUsage = "jtree info [--json] [--allow-full-download] FILE";
constexpr const char* kHelp =
    "What a .jtree file (a path or a URL) says about itself, from its header, index and\n"
    "footer: format versions and features, generation, writer, where the header, index and\n"
    "segments lie, leaf and chunk counts, storage, sizes and user metadata.\n"
    "\n"
    "options:\n"
    "  --json       one JSON object with those fields\n";

bool printable(const std::string& s) {
  for (unsigned char c : s)
    if (c < 0x20 && c != '\n' && c != '\t') return false;
  return true;
}

}  // namespace

int cmd_info(const Args& args) {
  CommonFlags f;
  std::string err;
  if (!parse_flags(args, &f, &err)) return usage_error(err, kUsage);
  if (f.help) return print_help(kUsage, (std::string(kHelp) + kRemoteHelp).c_str());
  if (f.positional.size() != 1) return usage_error("info takes one FILE", kUsage);
  auto reader = Reader::open(f.positional[0], open_options(f));
  if (!reader.ok()) return fail(reader.status().message());
  const Reader& r = **reader;
  const FileInfo& in = r.info();
  const Tree& t = r.tree();
  uint64_t chunked = 0, inl = 0, scalars = 0, raw_chunks = 0;
  std::map<std::string, uint64_t> storages;
  for (const Leaf& l : t.leaves) {
    if (l.storage == Storage::kChunked) ++chunked;
    else if (l.storage == Storage::kInline) ++inl;
    else ++scalars;
    if (l.is_payload()) storages[storage_desc(l)]++;
  }
  for (uint64_t i = 0; i < in.num_chunks; ++i) {
    if (r.chunk(i).encoding == ChunkEncoding::kRaw) ++raw_chunks;
  }
  if (f.json) {
    Json j;
    j.begin_object();
    j.key("file").str(r.name());
    j.key("file_size").num(in.file_size);
    j.key("kind").str(in.is_segment ? "segment" : "checkpoint");
    j.key("writer_version").num(uint64_t{in.writer_version});
    j.key("min_read_version").num(uint64_t{in.min_read_version});
    j.key("min_write_version").num(uint64_t{in.min_write_version});
    j.key("required_features").num(in.required_features);
    j.key("optional_features").num(in.optional_features);
    j.key("generation").num(in.generation);
    j.key("recovered").boolean(in.recovered);
    j.key("writer").str(in.writer);
    j.key("header").begin_object().key("offset").num(in.header_offset).key("size").num(in.header_size).end_object();
    j.key("index").begin_object().key("offset").num(in.index_offset).key("size").num(in.index_size).end_object();
    j.key("footer_offset").num(in.footer_offset);
    j.key("segments").begin_array();
    for (const auto& s : in.segments) {
      j.begin_object().key("offset").num(s.file_offset).key("size").num(s.size).end_object();
    }
    j.end_array();
    j.key("nodes").num(uint64_t{t.nodes.size()});
    j.key("leaves").num(uint64_t{t.leaves.size()});
    j.key("chunks").num(in.num_chunks);
    j.key("raw_chunks").num(raw_chunks);
    j.key("stored_bytes").num(in.stored_bytes);
    j.key("raw_bytes").num(in.raw_bytes);
    j.key("inline_bytes").num(in.inline_bytes);
    j.key("storage").begin_object();
    for (const auto& [k, v] : storages) j.key(k).num(v);
    j.end_object();
    j.key("metadata").begin_object();
    for (const auto& [k, v] : t.metadata) j.key(k).str(printable(v) ? v : "<binary>");
    j.end_object();
    j.end_object();
    std::printf("%s\n", j.text().c_str());
    return 0;
  }
  auto row = [](const char* k, const std::string& v) { std::printf("%-14s %s\n", k, v.c_str()); };
  row("file", r.name());
  row("size", human_bytes(in.file_size) + " (" + std::to_string(in.file_size) + " bytes)");
  row("kind", in.is_segment ? "segment (one host's part of a multi-host save)" : "checkpoint");
  row("format", "version " + std::to_string(in.writer_version) + "; readable by version >= " +
                    std::to_string(in.min_read_version) + ", appendable by >= " +
                    std::to_string(in.min_write_version));
  char feat[64];
  std::snprintf(feat, sizeof feat, "required 0x%llx, optional 0x%llx",
                static_cast<unsigned long long>(in.required_features),
                static_cast<unsigned long long>(in.optional_features));
  row("features", feat);
  std::string gen = std::to_string(in.generation);
  if (in.generation > 0) gen += " (previous footer at " + std::to_string(in.prev_footer_offset) + ")";
  if (in.recovered) gen += "; the file ends in an interrupted append, ignored";
  row("generation", gen);
  row("writer", in.writer);
  row("header", human_bytes(in.header_size) + " at " + std::to_string(in.header_offset));
  row("index", human_bytes(in.index_size) + " at " + std::to_string(in.index_offset));
  row("segments", std::to_string(in.segments.size()));
  for (const auto& s : in.segments) {
    std::printf("%-14s   %s at %llu\n", "", human_bytes(s.size).c_str(),
                static_cast<unsigned long long>(s.file_offset));
  }
  row("tree", std::to_string(t.nodes.size()) + " nodes, " + std::to_string(t.leaves.size()) +
                  " leaves (" + std::to_string(chunked) + " chunked, " + std::to_string(inl) +
                  " inline, " + std::to_string(scalars) + " scalars)");
  row("chunks", std::to_string(in.num_chunks) + " (" + std::to_string(raw_chunks) +
                    " stored raw, " + std::to_string(in.num_chunks - raw_chunks) + " compressed)");
  std::string st;
  for (const auto& [k, v] : storages) st += (st.empty() ? "" : ", ") + k + ": " + std::to_string(v);
  row("storage", st.empty() ? "-" : st);
  row("data", human_bytes(in.stored_bytes) + " stored / " + human_bytes(in.raw_bytes) +
                  " raw (ratio " + ratio_string(in.stored_bytes, in.raw_bytes) + "), " +
                  human_bytes(in.inline_bytes) + " inline");
  for (const auto& [k, v] : t.metadata) {
    row("metadata", k + " = " + (printable(v) ? quoted(v, 60) : "<" + std::to_string(v.size()) + " bytes>"));
  }
  return 0;
}

}  // namespace jtree::cli
