// jtree diff A B: which entries of two files differ, and how — added, removed, changed in kind,
// dtype or shape, changed in value (the largest absolute difference for numbers). It reads only
// what it must: entries whose stored chunks have the same index entries in both files (size,
// encoding, checksum and checksum seed: the same stored bytes) are equal without reading their
// data, and inline values and scalars come from the headers. Exit status as diff(1): 0 equal,
// 1 different, 2 trouble.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cli_util.h"
#include "commands.h"
#include "describe.h"
#include "element.h"

namespace jtree::cli {
namespace {

constexpr const char* kUsage =
    "jtree diff [--json] [--no-verify] [-q] [--threads N] [--ignore-metadata]\n"
    "           [--allow-full-download] A B";
constexpr const char* kHelp =
    "Compares two .jtree files (paths or URLs) entry by entry: leaves, None values and empty\n"
    "containers, by key path. Reports entries added (+), removed (-) and changed (~): in kind,\n"
    "dtype or shape, or in value (for numbers the largest absolute difference and how many\n"
    "elements differ; for text and bytes that they differ). The files' user metadata (the\n"
    "key/value pairs of save(..., metadata=...)) is compared too: keys added (M+), removed\n"
    "(M-) and changed (M~).\n"
    "\n"
    "It reads only what it must: an array whose chunks have the same index entries in both\n"
    "files (same chunk grid, codec, sizes and checksums with the same seed: copies of one file,\n"
    "or leaves an append kept) is equal without reading its data; scalars and small inline\n"
    "values come from the headers; other arrays are read and compared in slabs of 64 MiB.\n"
    "Equal checksums are trusted as they are in the index ('jtree verify' checks the data).\n"
    "\n"
    "Exit status: 0 the files are equal, 1 they differ, 2 trouble (an unreadable file, a usage\n"
    "error).\n"
    "\n"
    "options:\n"
    "  --json       one JSON object: added, removed, changed (each with path and the two\n"
    "               sides' kind/dtype/shape/value; value changes with max_abs_diff,\n"
    "               differing_elements), equal_entries, compared (how equal entries were\n"
    "               decided: header, checksums, data), metadata (added, removed, changed:\n"
    "               key with a/b values), io per file and data_bytes_read\n"
    "  --ignore-metadata  compare the trees only (the metadata is neither shown nor counted)\n"
    "  --no-verify  do not verify the checksums of the chunks read\n"
    "  -q, --quiet  print nothing: the exit status says it\n"
    "  --threads N  decoding threads (0: all cores)\n";
constexpr uint64_t kSlabBytes = 64ull << 20;

int trouble(const std::string& message) {
  std::fprintf(stderr, "jtree: %s\n", message.c_str());
  return 2;
}

// What an entry is, for messages: kind, and dtype + shape or value.
struct Desc {
  std::string kind;   // "array", "int", "str", "None", "dict (empty)"...
  std::string dtype;  // arrays
  Shape shape;
  bool has_shape = false;
  std::string value;  // scalars and inline strings
};

Desc describe_node(const Tree& t, uint32_t i) {
  const Node& n = t.nodes[i];
  Desc d;
  if (n.kind == NodeKind::kNone) {
    d.kind = "None";
    return d;
  }
  if (n.kind != NodeKind::kLeaf) {
    d.kind = std::string(node_kind_name(n.kind)) + " (empty)";
    return d;
  }
  const Leaf& l = t.leaves[n.leaf];
  d.kind = leaf_kind_name(l.kind);
  if (l.kind == LeafKind::kCustomLeaf) d.kind += " " + l.type_name;
  if (l.kind == LeafKind::kArray) {
    d.dtype = dtype_name(l.dtype);
    d.shape = l.shape;
    d.has_shape = true;
  } else if (l.kind == LeafKind::kStr && l.storage == Storage::kInline) {
    d.value = quoted(l.inline_data, 40);
  } else if (l.is_payload()) {
    d.value = std::to_string(l.num_elements()) + " bytes";
  } else {
    d.value = scalar_value(l);
  }
  return d;
}

std::string desc_text(const Desc& d) {
  if (d.has_shape) return d.dtype + " " + shape_string(d.shape);
  return d.value.empty() ? d.kind : d.kind + " " + d.value;
}

void desc_json(Json& j, const Desc& d) {
  j.begin_object();
  j.key("kind").str(d.kind);
  if (d.has_shape) {
    j.key("dtype").str(d.dtype);
    j.key("shape").shape(d.shape);
  }
  if (!d.value.empty()) j.key("value").str(d.value);
  j.end_object();
}

// How an equal entry was found equal.
enum class How { kHeader, kChecksums, kData };

struct Change {
  std::string path;
  char sign = '~';     // '+', '-', '~'
  std::string change;  // "added", "removed", "kind", "dtype", "shape", "dtype and shape", "value"
  Desc a, b;
  // Value changes.
  bool numeric = false;
  double max_abs = 0;
  bool nan_mismatch = false;  // a NaN where the other file has a number
  uint64_t differing = 0, elements = 0;
};

// The outcome of comparing two leaves of the same kind, dtype and shape.
struct ValueResult {
  bool equal = true;
  How how = How::kHeader;
  bool numeric = false;
  double max_abs = 0;
  bool nan_mismatch = false;
  uint64_t differing = 0, elements = 0;
};

// The same stored bytes, chunk for chunk, as far as the two indexes tell: equal data without
// reading it. The seed (segment salt and offset) must match too: checksums of the same bytes
// under other seeds differ, so files written separately are compared by reading.
bool same_stored_chunks(const Reader& ra, const Leaf& la, const Reader& rb, const Leaf& lb) {
  if (la.storage != Storage::kChunked || lb.storage != Storage::kChunked) return false;
  if (la.chunk_shape != lb.chunk_shape || la.chunk_bounds != lb.chunk_bounds ||
      la.codec != lb.codec || la.filter != lb.filter) {
    return false;
  }
  const uint64_t n = Tree::chunk_count(la);
  if (n != Tree::chunk_count(lb)) return false;
  for (uint64_t k = 0; k < n; ++k) {
    const ChunkInfo ca = ra.chunk(la.first_chunk + k), cb = rb.chunk(lb.first_chunk + k);
    if (ca.absent || cb.absent || ca.stored_size != cb.stored_size ||
        ca.raw_size != cb.raw_size || ca.encoding != cb.encoding || ca.seed != cb.seed ||
        ca.checksum != cb.checksum) {
      return false;
    }
  }
  return true;
}

// Compares two slabs of `dtype` elements.
void compare_elements(DType dtype, std::span<const std::byte> a, std::span<const std::byte> b,
                      ValueResult* out) {
  if (std::memcmp(a.data(), b.data(), a.size()) == 0) return;
  const size_t item = dtype_info(dtype)->item_size;
  for (size_t off = 0; off < a.size(); off += item) {
    if (std::memcmp(a.data() + off, b.data() + off, item) == 0) continue;
    const auto x = decode_element(dtype, a.data() + off), y = decode_element(dtype, b.data() + off);
    if (!x || !y) {  // (every dtype jtree stores decodes; a byte difference all the same)
      ++out->differing;
      continue;
    }
    const double d = abs_difference(*x, *y);
    if (std::isnan(d)) {
      out->nan_mismatch = true;
      ++out->differing;
    } else if (d > 0) {
      out->max_abs = std::max(out->max_abs, d);
      ++out->differing;
    }  // else: equal values in other bits (+0 and -0, NaNs of other payloads)
  }
}

// Reads the whole of two array leaves of the same dtype and shape in slabs along their first
// dimension of extent > 1 (memory: two slabs), comparing as it goes.
Status compare_arrays(const Reader& ra, uint32_t leaf_a, const Reader& rb, uint32_t leaf_b,
                      const Leaf& l, const ReadOptions& ro, ValueResult* out) {
  const size_t rank = l.shape.size();
  Box box;
  box.begin.assign(rank, 0);
  box.end = l.shape;
  size_t d = 0;
  while (d + 1 < rank && l.shape[d] == 1) ++d;
  const uint64_t total = memory_bytes(l.dtype, l.num_elements());
  const uint64_t extent = rank ? l.shape[d] : 1;
  const uint64_t per_unit = total / extent;
  const uint64_t step = std::max<uint64_t>(1, kSlabBytes / std::max<uint64_t>(per_unit, 1));
  const uint64_t slab_bytes = std::min(extent, step) * per_unit;
  std::vector<std::byte> a, b;
  try {
    a.resize(static_cast<size_t>(slab_bytes));
    b.resize(static_cast<size_t>(slab_bytes));
  } catch (const std::exception&) {
    return Status::resource_exhausted(ra.leaf_path(leaf_a) + ": out of memory allocating " +
                                     human_bytes(2 * slab_bytes) + " to compare it");
  }
  for (uint64_t i = 0; i < extent; i += step) {
    Box slab = box;
    if (rank) {
      slab.begin[d] = i;
      slab.end[d] = std::min(extent, i + step);
    }
    const uint64_t bytes = memory_bytes(l.dtype, slab.num_elements());
    JTREE_RETURN_IF_ERROR(ra.read_box(leaf_a, slab, {a.data(), bytes}, ro));
    JTREE_RETURN_IF_ERROR(rb.read_box(leaf_b, slab, {b.data(), bytes}, ro));
    compare_elements(l.dtype, {a.data(), bytes}, {b.data(), bytes}, out);
  }
  return Status::success();
}

// Two payload leaves of the same kind, dtype and shape.
Result<ValueResult> compare_payloads(const Reader& ra, uint32_t leaf_a, const Reader& rb,
                                     uint32_t leaf_b, const ReadOptions& ro) {
  const Leaf& la = ra.leaf(leaf_a);
  const Leaf& lb = rb.leaf(leaf_b);
  ValueResult v;
  v.elements = la.num_elements();
  if (la.kind != LeafKind::kArray && lb.num_elements() != v.elements) {
    v.equal = false;  // text or bytes of another length
    return v;
  }
  if (v.elements == 0) return v;  // nothing stored: equal from the headers
  if (la.storage == Storage::kInline && lb.storage == Storage::kInline &&
      la.inline_data == lb.inline_data) {
    return v;  // the same stored bytes, in the headers
  }
  if (same_stored_chunks(ra, la, rb, lb)) {
    v.how = How::kChecksums;
    return v;
  }
  const bool both_inline = la.storage == Storage::kInline && lb.storage == Storage::kInline;
  v.how = both_inline ? How::kHeader : How::kData;
  if (la.kind == LeafKind::kArray) {
    v.numeric = true;
    JTREE_RETURN_IF_ERROR(compare_arrays(ra, leaf_a, rb, leaf_b, la, ro, &v));
    v.equal = v.differing == 0;
    return v;
  }
  // Text, bytes, custom and pickled leaves: equal bytes or not.
  JTREE_ASSIGN_OR_RETURN(std::string a, ra.read_bytes(leaf_a, ro));
  JTREE_ASSIGN_OR_RETURN(std::string b, rb.read_bytes(leaf_b, ro));
  v.equal = a == b;
  return v;
}

// Scalars (int, float, bool, complex, None-less leaves without payload).
ValueResult compare_scalars(const Leaf& la, const Leaf& lb) {
  ValueResult v;
  v.elements = 1;
  v.equal = la.bool_value == lb.bool_value && la.int_value == lb.int_value &&
            la.big_int == lb.big_int &&
            (la.real == lb.real || (std::isnan(la.real) && std::isnan(lb.real))) &&
            (la.imag == lb.imag || (std::isnan(la.imag) && std::isnan(lb.imag)));
  if (!v.equal) {
    v.differing = 1;
    if (la.kind == LeafKind::kFloat || la.kind == LeafKind::kComplex ||
        (la.kind == LeafKind::kInt && la.big_int.empty() && lb.big_int.empty())) {
      v.numeric = true;
      const double d =
          la.kind == LeafKind::kInt
              ? std::fabs(static_cast<double>(la.int_value) - static_cast<double>(lb.int_value))
              : std::hypot(la.real - lb.real, la.imag - lb.imag);
      if (std::isnan(d)) v.nan_mismatch = true;
      else v.max_abs = d;
    }
  }
  return v;
}

// The entries compared, by key path, in file order: leaves, None, empty containers (as ls).
std::vector<std::pair<std::string, uint32_t>> entries(const Tree& t) {
  std::vector<std::pair<std::string, uint32_t>> out;
  for (uint32_t i = 0; i < t.nodes.size(); ++i) {
    const Node& n = t.nodes[i];
    const bool container = n.kind != NodeKind::kLeaf && n.kind != NodeKind::kNone;
    if (container && n.num_children > 0) continue;
    std::string p = t.path(i);
    out.emplace_back(p.empty() ? "(root)" : std::move(p), i);
  }
  return out;
}

// A user metadata key that differs: absent on one side (sign '+' or '-') or changed ('~').
struct MetadataChange {
  char sign;
  std::string key;
  std::optional<std::string> a, b;
};

struct Outcome {
  std::vector<Change> changes;
  std::vector<MetadataChange> metadata;
  uint64_t equal = 0;
  uint64_t by_header = 0, by_checksums = 0, by_data = 0;

  bool same() const { return changes.empty() && metadata.empty(); }
};

// The keys of the two files' user metadata that differ, in key order.
std::vector<MetadataChange> compare_metadata(const Tree& ta, const Tree& tb) {
  const std::map<std::string, std::string> a(ta.metadata.begin(), ta.metadata.end());
  const std::map<std::string, std::string> b(tb.metadata.begin(), tb.metadata.end());
  std::vector<MetadataChange> out;
  for (const auto& [k, v] : a) {
    auto it = b.find(k);
    if (it == b.end()) out.push_back({'-', k, v, std::nullopt});
    else if (it->second != v) out.push_back({'~', k, v, it->second});
  }
  for (const auto& [k, v] : b) {
    if (!a.contains(k)) out.push_back({'+', k, std::nullopt, v});
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const MetadataChange& x, const MetadataChange& y) { return x.key < y.key; });
  return out;
}

// A metadata value for the text output: quoted text, or its size when it is binary.
std::string metadata_text(const std::string& v) {
  for (unsigned char c : v) {
    if (c < 0x20 && c != '\n' && c != '\t') return "<" + std::to_string(v.size()) + " bytes>";
  }
  return quoted(v, 60);
}

Status compare(const Reader& ra, const Reader& rb, const ReadOptions& ro, Outcome* out) {
  const Tree& ta = ra.tree();
  const Tree& tb = rb.tree();
  const auto ea = entries(ta), eb = entries(tb);
  std::unordered_map<std::string, uint32_t> in_b;
  for (const auto& [p, i] : eb) in_b.emplace(p, i);
  std::unordered_map<std::string, bool> in_a;
  for (const auto& [p, i] : ea) in_a.emplace(p, true);
  // Tied leaves (one leaf at several paths) are compared once.
  std::map<std::pair<uint32_t, uint32_t>, ValueResult> done;

  for (const auto& [path, na] : ea) {
    auto it = in_b.find(path);
    if (it == in_b.end()) {
      Change c;
      c.path = path;
      c.sign = '-';
      c.change = "removed";
      c.a = describe_node(ta, na);
      out->changes.push_back(std::move(c));
      continue;
    }
    const uint32_t nb = it->second;
    const Node& a = ta.nodes[na];
    const Node& b = tb.nodes[nb];
    Change c;
    c.path = path;
    c.a = describe_node(ta, na);
    c.b = describe_node(tb, nb);
    if (a.kind != b.kind || c.a.kind != c.b.kind) {
      c.change = "kind";
      out->changes.push_back(std::move(c));
      continue;
    }
    if (a.kind != NodeKind::kLeaf) {  // None, or empty containers of one kind
      ++out->equal;
      ++out->by_header;
      continue;
    }
    const Leaf& la = ta.leaves[a.leaf];
    const Leaf& lb = tb.leaves[b.leaf];
    // (Text and bytes of other lengths are a change of value, below.)
    if (la.kind == LeafKind::kArray && (la.dtype != lb.dtype || la.shape != lb.shape)) {
      c.change = la.dtype != lb.dtype && la.shape != lb.shape ? "dtype and shape"
                 : la.dtype != lb.dtype                      ? "dtype"
                                                             : "shape";
      out->changes.push_back(std::move(c));
      continue;
    }
    ValueResult v;
    if (!la.is_payload()) {
      v = compare_scalars(la, lb);
    } else if (auto d = done.find({a.leaf, b.leaf}); d != done.end()) {
      v = d->second;
    } else {
      JTREE_ASSIGN_OR_RETURN(v, compare_payloads(ra, a.leaf, rb, b.leaf, ro));
      done.emplace(std::make_pair(a.leaf, b.leaf), v);
    }
    if (v.equal) {
      ++out->equal;
      if (v.how == How::kHeader) ++out->by_header;
      else if (v.how == How::kChecksums) ++out->by_checksums;
      else ++out->by_data;
      continue;
    }
    c.change = "value";
    c.numeric = v.numeric;
    c.max_abs = v.max_abs;
    c.nan_mismatch = v.nan_mismatch;
    c.differing = v.differing;
    c.elements = v.elements;
    out->changes.push_back(std::move(c));
  }
  for (const auto& [path, nb] : eb) {
    if (in_a.count(path)) continue;
    Change c;
    c.path = path;
    c.sign = '+';
    c.change = "added";
    c.b = describe_node(tb, nb);
    out->changes.push_back(std::move(c));
  }
  return Status::success();
}

std::string fmt_number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string change_text(const Change& c) {
  if (c.change == "added") return desc_text(c.b);
  if (c.change == "removed") return desc_text(c.a);
  if (c.change != "value") return c.change + ": " + desc_text(c.a) + " -> " + desc_text(c.b);
  if (!c.numeric) {
    // Small text values are shown; other payloads only differ.
    if (!c.a.value.empty() && c.a.kind == "str" && c.a.value.front() == '\'') {
      return "value: " + c.a.value + " -> " + c.b.value;
    }
    return "value: differs (" + desc_text(c.a) + ")";
  }
  if (c.elements == 1 && !c.a.value.empty()) {  // a scalar
    return "value: " + c.a.value + " -> " + c.b.value + " (abs diff " +
           (c.nan_mismatch ? std::string("nan") : fmt_number(c.max_abs)) + ")";
  }
  std::string s = "value: max abs diff " + fmt_number(c.max_abs);
  if (c.nan_mismatch) s += ", and NaN where the other has a number";
  return s + " (" + std::to_string(c.differing) + " of " + std::to_string(c.elements) +
         " elements differ)";
}

void io_json(Json& j, const Reader& r) {
  const IoStats io = r.io_stats();
  j.begin_object();
  j.key("requests").num(io.read_requests);
  j.key("bytes_read").num(io.bytes_read);
  j.key("retries").num(io.retries);
  j.end_object();
}

void print_json(const Reader& ra, const Reader& rb, const Outcome& o, uint64_t data_bytes) {
  Json j;
  j.begin_object();
  j.key("a").str(ra.name());
  j.key("b").str(rb.name());
  j.key("equal").boolean(o.same());
  for (const char* list : {"added", "removed", "changed"}) {
    j.key(list).begin_array();
    for (const Change& c : o.changes) {
      const bool mine = (c.sign == '+') == (std::strcmp(list, "added") == 0) &&
                        (c.sign == '-') == (std::strcmp(list, "removed") == 0);
      if (!mine) continue;
      j.begin_object();
      j.key("path").str(c.path);
      if (c.sign == '+') {
        j.key("b");
        desc_json(j, c.b);
      } else if (c.sign == '-') {
        j.key("a");
        desc_json(j, c.a);
      } else {
        j.key("change").str(c.change);
        j.key("a");
        desc_json(j, c.a);
        j.key("b");
        desc_json(j, c.b);
        if (c.change == "value") {
          j.key("max_abs_diff");
          if (!c.numeric) j.str("differs");
          else if (c.nan_mismatch) j.str("nan");
          else j.num(c.max_abs);
          j.key("differing_elements").num(c.differing);
          j.key("elements").num(c.elements);
        }
      }
      j.end_object();
    }
    j.end_array();
  }
  j.key("metadata").begin_object();
  for (const char sign : {'+', '-', '~'}) {
    j.key(sign == '+' ? "added" : sign == '-' ? "removed" : "changed").begin_array();
    for (const MetadataChange& m : o.metadata) {
      if (m.sign != sign) continue;
      j.begin_object();
      j.key("key").str(m.key);
      if (m.a) j.key("a").str(*m.a);
      if (m.b) j.key("b").str(*m.b);
      j.end_object();
    }
    j.end_array();
  }
  j.end_object();
  j.key("equal_entries").num(o.equal);
  j.key("compared").begin_object();
  j.key("header").num(o.by_header);
  j.key("checksums").num(o.by_checksums);
  j.key("data").num(o.by_data);
  j.end_object();
  j.key("io").begin_object();
  j.key("a");
  io_json(j, ra);
  j.key("b");
  io_json(j, rb);
  j.end_object();
  j.key("data_bytes_read").num(data_bytes);
  j.end_object();
  std::printf("%s\n", j.text().c_str());
}

uint64_t bytes_read(const Reader& r) { return r.io_stats().bytes_read; }

}  // namespace

int cmd_diff(const Args& args) {
  // (--ignore-metadata is diff's own flag: taken out before the common ones are parsed.)
  bool ignore_metadata = false;
  Args common;
  for (const std::string& a : args) {
    if (a == "--ignore-metadata") ignore_metadata = true;
    else common.push_back(a);
  }
  CommonFlags f;
  std::string err;
  if (!parse_flags(common, &f, &err)) return usage_error(err, kUsage);
  if (f.help) return print_help(kUsage, (std::string(kHelp) + kRemoteHelp).c_str());
  if (f.positional.size() != 2) return usage_error("diff takes two files, A and B", kUsage);
  if (!f.output.empty()) return usage_error("diff writes no file (-o)", kUsage);
  const OpenOptions oo = open_options(f);
  auto ra = Reader::open(f.positional[0], oo);
  if (!ra.ok()) return trouble(ra.status().message());
  auto rb = Reader::open(f.positional[1], oo);
  if (!rb.ok()) return trouble(rb.status().message());
  const Reader& a = **ra;
  const Reader& b = **rb;
  // What opening cost; the rest is leaf data read to compare it.
  const uint64_t opened = bytes_read(a) + bytes_read(b);
  ReadOptions ro;
  ro.verify_checksums = f.verify;
  ro.threads = f.threads;
  Outcome o;
  Status st = compare(a, b, ro, &o);
  if (!st.ok()) return trouble(st.message());
  if (!ignore_metadata) o.metadata = compare_metadata(a.tree(), b.tree());
  const uint64_t data_bytes = bytes_read(a) + bytes_read(b) - opened;
  if (f.json) {
    print_json(a, b, o, data_bytes);
  } else if (!f.quiet) {
    size_t width = 4;
    for (const Change& c : o.changes) width = std::max(width, std::min<size_t>(c.path.size(), 60));
    for (const Change& c : o.changes) {
      std::printf("%c %-*s  %s\n", c.sign, static_cast<int>(width), c.path.c_str(),
                  change_text(c).c_str());
    }
    for (const MetadataChange& m : o.metadata) {
      std::string text = m.sign == '+'   ? metadata_text(*m.b)
                         : m.sign == '-' ? metadata_text(*m.a)
                                         : metadata_text(*m.a) + " -> " + metadata_text(*m.b);
      std::printf("M%c %s = %s\n", m.sign, m.key.c_str(), text.c_str());
    }
    uint64_t added = 0, removed = 0;
    for (const Change& c : o.changes) added += c.sign == '+', removed += c.sign == '-';
    if (o.changes.empty()) {
      std::printf("%s: %llu entries", o.metadata.empty() ? "equal" : "equal trees, other metadata",
                  static_cast<unsigned long long>(o.equal));
    } else {
      std::printf("differ: %llu added, %llu removed, %llu changed, %llu equal",
                  static_cast<unsigned long long>(added), static_cast<unsigned long long>(removed),
                  static_cast<unsigned long long>(o.changes.size() - added - removed),
                  static_cast<unsigned long long>(o.equal));
      if (!o.metadata.empty()) std::printf(", %zu metadata keys differ", o.metadata.size());
    }
    std::printf(" (%llu by checksums without reading data, %llu from the headers, %llu by "
                "reading)\n",
                static_cast<unsigned long long>(o.by_checksums),
                static_cast<unsigned long long>(o.by_header),
                static_cast<unsigned long long>(o.by_data));
    std::printf("read %s of leaf data; %s from A, %s from B in all\n",
                human_bytes(data_bytes).c_str(), human_bytes(bytes_read(a)).c_str(),
                human_bytes(bytes_read(b)).c_str());
  }
  return o.same() ? 0 : 1;
}

}  // namespace jtree::cli
