// jtree ls FILE: every leaf with dtype, shape, stored and raw size and ratio; totals.
#include <cstdio>
#include <unordered_map>

#include "cli_util.h"
#include "commands.h"
#include "describe.h"

namespace jtree::cli {
namespace {

constexpr const char* kUsage = "jtree ls [--json] [--allow-full-download] FILE";
constexpr const char* kHelp =
    "Lists the tree of a .jtree file (a path or a URL) from its header and index, without\n"
    "reading chunk data: every leaf, None and empty container with its kind, dtype, shape,\n"
    "stored and raw size, ratio and storage (or its value); tied leaves name the first path;\n"
    "then the totals and the requests and bytes it took.\n"
    "\n"
    "options:\n"
    "  --json       one JSON object: file, generation, file_size, stored_bytes, raw_bytes,\n"
    "               leaves (path, kind, dtype, shape as an array of numbers, value, storage,\n"
    "               stored_bytes, raw_bytes, chunks or tied_to) and io\n";

struct Row {
  std::string path, kind, dtype, shape, storage, value;
  uint64_t stored = 0, raw = 0, chunks = 0;
  std::string tied_to;  // path of the first node holding the same leaf
  Shape shape_dims;     // arrays: the shape (JSON prints it as numbers)
  bool has_shape = false;
};

std::vector<Row> rows_of(const Reader& r) {
  const Tree& t = r.tree();
  std::vector<Row> rows;
  for (uint32_t i = 0; i < t.nodes.size(); ++i) {
    const Node& n = t.nodes[i];
    const bool empty_container = n.kind != NodeKind::kLeaf && n.kind != NodeKind::kNone &&
                                 n.num_children == 0;
    if (n.kind != NodeKind::kLeaf && n.kind != NodeKind::kNone && !empty_container) continue;
    Row row;
    row.path = t.path(i);
    if (row.path.empty()) row.path = "(root)";
    if (n.kind == NodeKind::kNone) {
      row.kind = "None";
    } else if (empty_container) {
      row.kind = std::string(node_kind_name(n.kind)) + " (empty)";
    } else {
      const Leaf& l = t.leaves[n.leaf];
      row.kind = leaf_kind_name(l.kind);
      if (l.kind == LeafKind::kCustomLeaf) row.kind += " " + l.type_name;
      if (t.leaf_node(n.leaf) != i) {
        row.tied_to = t.path(t.leaf_node(n.leaf));
      } else {
        row.stored = leaf_stored_bytes(r, n.leaf);
        row.raw = leaf_raw_bytes(l);
        row.chunks = Tree::chunk_count(l);
      }
      if (l.kind == LeafKind::kArray) {
        row.dtype = dtype_name(l.dtype);
        row.shape = shape_string(l.shape);
        row.shape_dims = l.shape;
        row.has_shape = true;
      } else if (l.kind == LeafKind::kStr && l.storage == Storage::kInline) {
        row.value = quoted(l.inline_data, 40);
      } else if (l.is_payload()) {
        row.value = std::to_string(l.num_elements()) + " bytes";
      } else {
        row.value = scalar_value(l);
      }
      row.storage = storage_desc(l);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

void print_json(const Reader& r, const std::vector<Row>& rows, uint64_t stored, uint64_t raw) {
  Json j;
  j.begin_object();
  j.key("file").str(r.name());
  j.key("generation").num(r.info().generation);
  j.key("file_size").num(r.info().file_size);
  j.key("stored_bytes").num(stored);
  j.key("raw_bytes").num(raw);
  j.key("leaves").begin_array();
  for (const Row& row : rows) {
    j.begin_object();
    j.key("path").str(row.path);
    j.key("kind").str(row.kind);
    if (!row.dtype.empty()) j.key("dtype").str(row.dtype);
    if (row.has_shape) j.key("shape").shape(row.shape_dims);
    if (!row.value.empty()) j.key("value").str(row.value);
    if (!row.storage.empty()) j.key("storage").str(row.storage);
    if (!row.tied_to.empty()) {
      j.key("tied_to").str(row.tied_to);
    } else {
      j.key("stored_bytes").num(row.stored);
      j.key("raw_bytes").num(row.raw);
      j.key("chunks").num(row.chunks);
    }
    j.end_object();
  }
  j.end_array();
  const IoStats io = r.io_stats();
  j.key("io").begin_object();
  j.key("requests").num(io.read_requests);
  j.key("bytes_read").num(io.bytes_read);
  j.key("retries").num(io.retries);
  j.end_object();
  j.end_object();
  std::printf("%s\n", j.text().c_str());
}

}  // namespace

int cmd_ls(const Args& args) {
  CommonFlags f;
  std::string err;
  if (!parse_flags(args, &f, &err)) return usage_error(err, kUsage);
  if (f.help) return print_help(kUsage, (std::string(kHelp) + kRemoteHelp).c_str());
  if (f.positional.size() != 1) return usage_error("ls takes one FILE", kUsage);
  auto reader = Reader::open(f.positional[0], open_options(f));
  if (!reader.ok()) return fail(reader.status().message());
  const Reader& r = **reader;
  const std::vector<Row> rows = rows_of(r);
  uint64_t stored = 0, raw = 0;
  for (const Row& row : rows) stored += row.stored, raw += row.raw;
  if (f.json) {
    print_json(r, rows, stored, raw);
    return 0;
  }
  size_t w_path = 4, w_kind = 4, w_dtype = 5, w_shape = 5;
  for (const Row& row : rows) {
    w_path = std::max(w_path, row.path.size());
    w_kind = std::max(w_kind, row.kind.size());
    w_dtype = std::max(w_dtype, row.dtype.size());
    w_shape = std::max(w_shape, row.shape.size());
  }
  w_path = std::min<size_t>(w_path, 60);
  std::printf("%-*s  %-*s  %-*s  %-*s  %10s  %10s  %6s  %s\n", int(w_path), "KEY", int(w_kind),
              "KIND", int(w_dtype), "DTYPE", int(w_shape), "SHAPE", "STORED", "RAW", "RATIO",
              "STORAGE / VALUE");
  for (const Row& row : rows) {
    std::string tail = row.storage;
    if (!row.tied_to.empty()) tail = "tied to " + row.tied_to;
    if (!row.value.empty()) tail += (tail.empty() ? "" : "  ") + row.value;
    if (row.chunks > 1) tail += " (" + std::to_string(row.chunks) + " chunks)";
    const bool sized = row.tied_to.empty() && (row.raw > 0 || row.stored > 0);
    std::printf("%-*s  %-*s  %-*s  %-*s  %10s  %10s  %6s  %s\n", int(w_path), row.path.c_str(),
                int(w_kind), row.kind.c_str(), int(w_dtype), row.dtype.c_str(), int(w_shape),
                row.shape.c_str(), sized ? human_bytes(row.stored).c_str() : "",
                sized ? human_bytes(row.raw).c_str() : "",
                sized ? ratio_string(row.stored, row.raw).c_str() : "", tail.c_str());
  }
  const IoStats io = r.io_stats();
  std::printf("\n%zu entries, %s stored / %s raw (ratio %s), file %s, generation %llu\n",
              rows.size(), human_bytes(stored).c_str(), human_bytes(raw).c_str(),
              ratio_string(stored, raw).c_str(), human_bytes(r.info().file_size).c_str(),
              static_cast<unsigned long long>(r.info().generation));
  std::printf("read %llu requests, %s (of %s), %llu retries to list it\n",
              static_cast<unsigned long long>(io.read_requests), human_bytes(io.bytes_read).c_str(),
              human_bytes(r.info().file_size).c_str(),
              static_cast<unsigned long long>(io.retries));
  return 0;
}

}  // namespace jtree::cli
