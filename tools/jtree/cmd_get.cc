// jtree get FILE KEY[SLICE] [-o OUT]: a leaf or a slice of it, to .npy, raw bytes or stdout.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <vector>

#include "cli_util.h"
#include "commands.h"
#include "describe.h"
#include "element.h"
#include "nearest.h"
#include "npy.h"

namespace jtree::cli {
namespace {

constexpr const char* kUsage =
    "jtree get [-o OUT.npy|OUT.bin] [--json] [--no-verify] [-q] [--allow-full-download] "
    "FILE 'KEY[SLICE]'";
constexpr const char* kHelp =
    "Reads one leaf of a .jtree file (a path or a URL), or a slice of an array leaf in NumPy\n"
    "syntax ('params/emb[1000:2000, :64]', negative indices, a bare index drops the\n"
    "dimension), touching only the chunks the slice overlaps. Scalars, strings and arrays of\n"
    "up to 1000 elements are printed; larger arrays are summarized (their first and last\n"
    "elements): write them with -o.\n"
    "\n"
    "options:\n"
    "  -o, --output OUT  write the leaf or slice: OUT.npy as NumPy (ml_dtypes types as raw\n"
    "               items), any other name as raw bytes in C order; streamed in slabs\n"
    "  --json       one JSON object: file, key, kind, and value (scalars, strings), or dtype,\n"
    "               shape (an array of numbers) and data (nested lists; NaN and infinities\n"
    "               as the strings \"nan\", \"inf\", \"-inf\"; complex as [re, im]), or for\n"
    "               large arrays elements, first and last; with -o: bytes and output\n"
    "  --no-verify  do not verify the checksums of the chunks read\n"
    "  -q, --quiet  no progress bar, no notes\n"
    "  --threads N  decoding threads (0: all cores)\n";
constexpr uint64_t kMaxPrinted = 1000;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Prints a small array (at most kMaxPrinted elements) as nested lists, numpy-like.
void print_array(DType dtype, const Shape& shape, std::span<const std::byte> data) {
  const size_t item = dtype_info(dtype)->item_size;
  std::printf("%s %s\n", std::string(dtype_name(dtype)).c_str(), shape_string(shape).c_str());
  if (data.empty()) {  // (any dimension may be huge when another is 0: nothing to walk)
    std::printf("[] (no elements)\n");
    return;
  }
  std::string out;
  uint64_t idx = 0;
  // Recursive nesting by dimension.
  auto rec = [&](auto&& self, size_t d) -> void {
    if (d == shape.size()) {
      out += format_element(dtype, data.data() + idx++ * item);
      return;
    }
    out += '[';
    for (uint64_t i = 0; i < shape[d]; ++i) {
      if (i) out += d + 1 == shape.size() ? ", " : ",\n" + std::string(d + 1, ' ');
      self(self, d + 1);
    }
    out += ']';
  };
  rec(rec, 0);
  std::printf("%s\n", out.c_str());
}

// The single-element box of element `k` (C order) of `box`.
Box element_box(const Box& box, uint64_t k) {
  Box e = box;
  for (size_t d = box.begin.size(); d-- > 0;) {
    const uint64_t extent = box.end[d] - box.begin[d];
    e.begin[d] = box.begin[d] + k % extent;
    e.end[d] = e.begin[d] + 1;
    k /= extent;
  }
  return e;
}

// The start of get's JSON object: file, key, kind.
Json json_head(const Reader& r, const std::string& key, std::string_view kind) {
  Json j;
  j.begin_object().key("file").str(r.name()).key("key").str(key).key("kind").str(kind);
  return j;
}

void json_finish(Json& j) {
  j.end_object();
  std::printf("%s\n", j.text().c_str());
}

// A scalar leaf's value as JSON: ints exactly (beyond int64 as a decimal string), floats as
// numbers ("nan", "inf", "-inf" as strings), complex as [re, im].
void json_scalar(Json& j, const Leaf& l) {
  auto real = [&](double v) {
    if (std::isnan(v)) j.str("nan");
    else if (std::isinf(v)) j.str(v > 0 ? "inf" : "-inf");
    else j.num(v);
  };
  switch (l.kind) {
    case LeafKind::kInt:
      if (l.big_int.empty()) j.num(l.int_value);
      else j.str(scalar_value(l));
      break;
    case LeafKind::kFloat: real(l.real); break;
    case LeafKind::kBool: j.boolean(l.bool_value); break;
    case LeafKind::kComplex:
      j.begin_array();
      real(l.real);
      real(l.imag);
      j.end_array();
      break;
    default: j.str(scalar_value(l)); break;
  }
}

// An array's elements as nested JSON lists (a bare element for rank 0).
void json_array(Json& j, DType dtype, const Shape& shape, std::span<const std::byte> data) {
  const size_t item = dtype_info(dtype)->item_size;
  uint64_t idx = 0;
  auto rec = [&](auto&& self, size_t d) -> void {
    if (d == shape.size()) {
      if (data.empty()) return;
      if (auto e = decode_element(dtype, data.data() + idx++ * item)) json_element(j, *e);
      else j.null();
      return;
    }
    j.begin_array();
    // (No elements: any dimension may be huge when another is 0; nothing to walk.)
    for (uint64_t i = 0; i < shape[d] && !data.empty(); ++i) self(self, d + 1);
    j.end_array();
  };
  rec(rec, 0);
}

// A large array summarized: its first and last 8 elements, read alone (not the array).
Status print_summary(const Reader& r, uint32_t leaf, DType dtype, const Shape& out_shape,
                     const Box& box, uint64_t n, const ReadOptions& ro, Json* json) {
  const size_t item = dtype_info(dtype)->item_size;
  if (json != nullptr) {
    std::byte buf[16];
    json->key("dtype").str(dtype_name(dtype)).key("shape").shape(out_shape);
    json->key("elements").num(n);
    for (const char* part : {"first", "last"}) {
      json->key(part).begin_array();
      const uint64_t from = part[0] == 'f' ? 0 : n - 8;
      for (uint64_t k = from; k < from + 8; ++k) {
        JTREE_RETURN_IF_ERROR(r.read_box(leaf, element_box(box, k), {buf, item}, ro));
        if (auto e = decode_element(dtype, buf)) json_element(*json, *e);
        else json->null();
      }
      json->end_array();
    }
    json_finish(*json);
    return Status::success();
  }
  auto element = [&](uint64_t k, std::string* text) -> Status {
    std::byte buf[16];
    JTREE_RETURN_IF_ERROR(r.read_box(leaf, element_box(box, k), {buf, item}, ro));
    *text = format_element(dtype, buf);
    return Status::success();
  };
  std::string first, last, e;
  for (uint64_t k = 0; k < 8; ++k) {
    JTREE_RETURN_IF_ERROR(element(k, &e));
    first += e + " ";
  }
  for (uint64_t k = n - 8; k < n; ++k) {
    JTREE_RETURN_IF_ERROR(element(k, &e));
    last += e + " ";
  }
  std::printf("%s %s\nfirst: %s...\nlast:  ... %s\n(%llu elements; write them with -o out.npy)\n",
              std::string(dtype_name(dtype)).c_str(), shape_string(out_shape).c_str(),
              first.c_str(), last.c_str(), static_cast<unsigned long long>(n));
  return Status::success();
}

// Memory for `bytes` of a leaf, or ResourceExhausted (a valid file may hold more than this
// machine has: that is an error, never an abort).
Status allocate(std::vector<std::byte>& buf, uint64_t bytes, const std::string& what) {
  try {
    buf.resize(static_cast<size_t>(bytes));
  } catch (const std::exception&) {
    return Status::resource_exhausted(what + ": out of memory allocating " + human_bytes(bytes) +
                                     " (write it with -o FILE, which streams it)");
  }
  return Status::success();
}

// Reads `box` in slabs of about kSlabBytes along its first dimension of extent > 1 (the dims
// before it have extent 1, so the slabs in order are the box in C order) and hands each slab
// to `sink`: memory stays about one slab whatever the size.
constexpr uint64_t kSlabBytes = 64ull << 20;

Status read_in_slabs(const Reader& r, uint32_t leaf, DType dtype, const Box& box,
                     const ReadOptions& ro, const std::string& what, Progress& progress,
                     const std::function<Status(std::span<const std::byte>)>& sink) {
  const size_t rank = box.begin.size();
  size_t d = 0;
  while (d + 1 < rank && box.end[d] - box.begin[d] == 1) ++d;
  const uint64_t total = memory_bytes(dtype, box.num_elements());
  if (total == 0) return Status::success();
  const uint64_t extent = rank ? box.end[d] - box.begin[d] : 1;
  const uint64_t per_unit = total / extent;  // bytes of one index along d
  const uint64_t step = std::max<uint64_t>(1, kSlabBytes / std::max<uint64_t>(per_unit, 1));
  std::vector<std::byte> buf;
  JTREE_RETURN_IF_ERROR(allocate(buf, std::min(extent, step) * per_unit, what));
  ProgressFn report = progress.fn();
  uint64_t done = 0;
  for (uint64_t i = 0; i < extent; i += step) {
    Box slab = box;
    if (rank) {
      slab.begin[d] = box.begin[d] + i;
      slab.end[d] = box.begin[d] + std::min(extent, i + step);
    }
    const uint64_t bytes = memory_bytes(dtype, slab.num_elements());
    JTREE_RETURN_IF_ERROR(r.read_box(leaf, slab, {buf.data(), bytes}, ro));
    JTREE_RETURN_IF_ERROR(sink({buf.data(), bytes}));
    done += bytes;
    if (report && !report(done, total)) return Status::aborted(what + ": cancelled");
  }
  return Status::success();
}

}  // namespace

int cmd_get(const Args& args) {
  CommonFlags f;
  std::string err;
  if (!parse_flags(args, &f, &err)) return usage_error(err, kUsage);
  if (f.help) return print_help(kUsage, (std::string(kHelp) + kRemoteHelp).c_str());
  if (f.positional.size() != 2) return usage_error("get takes FILE and KEY[SLICE]", kUsage);
  auto spec = parse_key_slice(f.positional[1]);
  if (!spec.ok()) return usage_error(spec.status().message(), kUsage);
  auto reader = Reader::open(f.positional[0], open_options(f));
  if (!reader.ok()) return fail(reader.status().message());
  const Reader& r = **reader;
  // (The accessors read the header in place: no Tree of the whole file is built for one leaf.)
  auto node = r.find(spec->path);
  if (!node.ok()) {
    // A typo in a key: the file's paths nearest the one asked for.
    if (!node.status().is_not_found()) return fail(node.status().message());
    return fail(with_nearest(node.status().message(), spec->path, r));
  }
  const NodeView n = r.node(*node);
  if (n.kind != NodeKind::kLeaf) {
    if (n.kind == NodeKind::kNone) {
      if (f.json) {
        Json j = json_head(r, spec->path, "None");
        j.key("value").null();
        json_finish(j);
      } else {
        std::printf("None\n");
      }
      return 0;
    }
    return fail(r.name() + ": '" + spec->path + "' is a " + std::string(node_kind_name(n.kind)) +
                " of " + std::to_string(n.num_children) + " children; 'jtree ls' lists them");
  }
  const Leaf& leaf = r.leaf(n.leaf);
  if (!leaf.is_payload()) {
    if (!spec->dims.empty()) return fail("a " + std::string(leaf_kind_name(leaf.kind)) + " cannot be sliced");
    if (f.json) {
      Json j = json_head(r, spec->path, leaf_kind_name(leaf.kind));
      j.key("value");
      json_scalar(j, leaf);
      json_finish(j);
    } else {
      std::printf("%s\n", scalar_value(leaf).c_str());
    }
    return 0;
  }
  Shape out_shape;
  auto box = resolve_slice(*spec, leaf.shape, &out_shape);
  if (!box.ok()) return fail(r.name() + ": leaf " + spec->path + ": " + box.status().message());
  const uint64_t bytes = memory_bytes(leaf.dtype, box->num_elements());
  // The same rule as every read that allocates for its caller: this command is one call with
  // one budget (jtree::MemoryBudget, from the open's limits).
  MemoryBudget budget(r.options().limits);
  if (Status st = budget.reserve(bytes, r.name() + ": leaf " + spec->path); !st.ok()) {
    return fail(st.message());
  }
  const std::string what = r.name() + ": leaf " + spec->path;
  ReadOptions ro;
  ro.verify_checksums = f.verify;
  ro.threads = f.threads;
  Progress progress("reading", !f.quiet && !f.json && bytes > (64u << 20));

  if (!f.output.empty()) {
    // Streamed: the header (.npy), then the box in slabs, each written as it is read.
    std::ofstream out(f.output, std::ios::binary | std::ios::trunc);
    if (!out) return fail(f.output + ": cannot create: " + std::strerror(errno));
    if (ends_with(f.output, ".npy")) {
      bool exact;
      npy_descr(leaf.dtype, &exact);
      if (!exact && !f.quiet && !f.json) {
        std::fprintf(stderr, "jtree: note: NumPy has no %s; written as raw %zu-byte items "
                     "(with ml_dtypes: np.load(...).view(ml_dtypes.%s))\n",
                     std::string(dtype_name(leaf.dtype)).c_str(),
                     size_t{dtype_info(leaf.dtype)->item_size},
                     std::string(dtype_name(leaf.dtype)).c_str());
      }
      const std::string head = npy_header(leaf.dtype, out_shape);
      out.write(head.data(), static_cast<std::streamsize>(head.size()));
    }
    const bool widen4 = leaf.dtype == DType::kInt4 && ends_with(f.output, ".npy");
    std::vector<std::byte> widened;  // int4 slabs as int8 values for the .npy
    Status st = read_in_slabs(r, n.leaf, leaf.dtype, *box, ro, what, progress,
                              [&](std::span<const std::byte> slab) -> Status {
                                if (widen4) {
                                  widened.assign(slab.begin(), slab.end());
                                  npy_widen4(leaf.dtype, widened);
                                  slab = widened;
                                }
                                out.write(reinterpret_cast<const char*>(slab.data()),
                                          static_cast<std::streamsize>(slab.size()));
                                return out ? Status::success()
                                           : Status::io_error(f.output + ": write failed");
                              });
    progress.finish();
    out.close();
    if (st.ok() && !out) st = Status::io_error(f.output + ": write failed");
    if (!st.ok()) {
      std::remove(f.output.c_str());  // no partial output
      return fail(st.message());
    }
    if (f.json) {
      Json j = json_head(r, spec->path, leaf_kind_name(leaf.kind));
      j.key("dtype").str(dtype_name(leaf.dtype)).key("shape").shape(out_shape);
      j.key("bytes").num(bytes).key("output").str(f.output);
      json_finish(j);
    } else if (!f.quiet) {
      std::fprintf(stderr, "wrote %s %s%s (%s) to %s\n", std::string(dtype_name(leaf.dtype)).c_str(),
                   spec->path.c_str(), shape_string(out_shape).c_str(), human_bytes(bytes).c_str(),
                   f.output.c_str());
    }
    return 0;
  }
  if (leaf.kind != LeafKind::kArray && leaf.kind != LeafKind::kStr) {  // (nothing to read)
    if (f.json) {
      Json j = json_head(r, spec->path, leaf_kind_name(leaf.kind));
      j.key("bytes").num(bytes);
      json_finish(j);
      return 0;
    }
    std::printf("%s of %llu bytes (write them with -o FILE)\n",
                std::string(leaf_kind_name(leaf.kind)).c_str(),
                static_cast<unsigned long long>(bytes));
    return 0;
  }
  const uint64_t n_elements = box->num_elements();
  if (leaf.kind == LeafKind::kArray && n_elements > kMaxPrinted) {
    Json j = json_head(r, spec->path, leaf_kind_name(leaf.kind));
    Status st =
        print_summary(r, n.leaf, leaf.dtype, out_shape, *box, n_elements, ro, f.json ? &j : nullptr);
    return st.ok() ? 0 : fail(st.message());
  }
  std::vector<std::byte> data;
  Status st = allocate(data, bytes, what);
  if (st.ok()) {
    ro.progress = progress.fn();
    st = r.read_box(n.leaf, *box, data, ro);
    progress.finish();
  }
  if (!st.ok()) return fail(st.message());
  if (f.json) {
    Json j = json_head(r, spec->path, leaf_kind_name(leaf.kind));
    if (leaf.kind == LeafKind::kStr) {
      j.key("value").str(std::string_view(reinterpret_cast<const char*>(data.data()), data.size()));
    } else {
      j.key("dtype").str(dtype_name(leaf.dtype)).key("shape").shape(out_shape).key("data");
      json_array(j, leaf.dtype, out_shape, data);
    }
    json_finish(j);
    return 0;
  }
  if (leaf.kind == LeafKind::kStr) {
    std::fwrite(data.data(), 1, data.size(), stdout);
    std::printf("\n");
  } else {
    print_array(leaf.dtype, out_shape, data);
  }
  return 0;
}

}  // namespace jtree::cli
