// jtree get FILE KEY[SLICE] [-o OUT]: a leaf or a slice of it, to .npy, raw bytes or stdout.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <vector>

#include "cli_util.h"
#include "commands.h"
#include "describe.h"
#include "npy.h"

namespace jtree::cli {
namespace {

constexpr const char* kUsage = "jtree get [-o OUT.npy|OUT.bin] [--no-verify] FILE 'KEY[SLICE]'";
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

// A large array summarized: its first and last 8 elements, read alone (not the array).
Status print_summary(const Reader& r, uint32_t leaf, DType dtype, const Shape& out_shape,
                     const Box& box, uint64_t n, const ReadOptions& ro) {
  const size_t item = dtype_info(dtype)->item_size;
  auto element = [&](uint64_t k, std::string* text) -> Status {
    std::byte buf[16];
    JTREE_RETURN_IF_ERROR(r.read_box(leaf, element_box(box, k), {buf, item}, ro));
    *text = format_element(dtype, buf);
    return Status::OK();
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
  return Status::OK();
}

// Memory for `bytes` of a leaf, or ResourceExhausted (a valid file may hold more than this
// machine has: that is an error, never an abort).
Status allocate(std::vector<std::byte>& buf, uint64_t bytes, const std::string& what) {
  try {
    buf.resize(static_cast<size_t>(bytes));
  } catch (const std::exception&) {
    return Status::ResourceExhausted(what + ": out of memory allocating " + human_bytes(bytes) +
                                     " (write it with -o FILE, which streams it)");
  }
  return Status::OK();
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
  if (total == 0) return Status::OK();
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
    if (report && !report(done, total)) return Status::Aborted(what + ": cancelled");
  }
  return Status::OK();
}

}  // namespace

int cmd_get(const Args& args) {
  CommonFlags f;
  std::string err;
  if (!parse_flags(args, &f, &err)) return usage_error(err, kUsage);
  if (f.positional.size() != 2) return usage_error("get takes FILE and KEY[SLICE]", kUsage);
  auto spec = parse_key_slice(f.positional[1]);
  if (!spec.ok()) return usage_error(spec.status().message(), kUsage);
  auto reader = Reader::Open(f.positional[0]);
  if (!reader.ok()) return fail(reader.status().message());
  const Reader& r = **reader;
  // (The accessors read the header in place: no Tree of the whole file is built for one leaf.)
  auto node = r.find(spec->path);
  if (!node.ok()) return fail(node.status().message());
  const NodeView n = r.node(*node);
  if (n.kind != NodeKind::kLeaf) {
    if (n.kind == NodeKind::kNone) {
      std::printf("None\n");
      return 0;
    }
    return fail(r.name() + ": '" + spec->path + "' is a " + std::string(node_kind_name(n.kind)) +
                " of " + std::to_string(n.num_children) + " children; 'jtree ls' lists them");
  }
  const Leaf& leaf = r.leaf(n.leaf);
  if (!leaf.is_payload()) {
    if (!spec->dims.empty()) return fail("a " + std::string(leaf_kind_name(leaf.kind)) + " cannot be sliced");
    std::printf("%s\n", scalar_value(leaf).c_str());
    return 0;
  }
  Shape out_shape;
  auto box = resolve_slice(*spec, leaf.shape, &out_shape);
  if (!box.ok()) return fail(r.name() + ": leaf " + spec->path + ": " + box.status().message());
  const uint64_t bytes = memory_bytes(leaf.dtype, box->num_elements());
  if (bytes > r.options().limits.max_leaf_bytes) {
    return fail(r.name() + ": leaf " + spec->path + ": " + human_bytes(bytes) +
                " is over the read limit");
  }
  const std::string what = r.name() + ": leaf " + spec->path;
  ReadOptions ro;
  ro.verify_checksums = f.verify;
  ro.threads = f.threads;
  Progress progress("reading", !f.quiet && bytes > (64u << 20));

  if (!f.output.empty()) {
    // Streamed: the header (.npy), then the box in slabs, each written as it is read.
    std::ofstream out(f.output, std::ios::binary | std::ios::trunc);
    if (!out) return fail(f.output + ": cannot create: " + std::strerror(errno));
    if (ends_with(f.output, ".npy")) {
      bool exact;
      npy_descr(leaf.dtype, &exact);
      if (!exact && !f.quiet) {
        std::fprintf(stderr, "jtree: note: NumPy has no %s; written as raw %zu-byte items "
                     "(with ml_dtypes: np.load(...).view(ml_dtypes.%s))\n",
                     std::string(dtype_name(leaf.dtype)).c_str(),
                     size_t{dtype_info(leaf.dtype)->item_size},
                     std::string(dtype_name(leaf.dtype)).c_str());
      }
      const std::string head = npy_header(leaf.dtype, out_shape);
      out.write(head.data(), static_cast<std::streamsize>(head.size()));
    }
    Status st = read_in_slabs(r, n.leaf, leaf.dtype, *box, ro, what, progress,
                              [&](std::span<const std::byte> slab) -> Status {
                                out.write(reinterpret_cast<const char*>(slab.data()),
                                          static_cast<std::streamsize>(slab.size()));
                                return out ? Status::OK()
                                           : Status::IOError(f.output + ": write failed");
                              });
    progress.finish();
    out.close();
    if (st.ok() && !out) st = Status::IOError(f.output + ": write failed");
    if (!st.ok()) {
      std::remove(f.output.c_str());  // no partial output
      return fail(st.message());
    }
    if (!f.quiet) {
      std::fprintf(stderr, "wrote %s %s%s (%s) to %s\n", std::string(dtype_name(leaf.dtype)).c_str(),
                   spec->path.c_str(), shape_string(out_shape).c_str(), human_bytes(bytes).c_str(),
                   f.output.c_str());
    }
    return 0;
  }
  if (leaf.kind != LeafKind::kArray && leaf.kind != LeafKind::kStr) {  // (nothing to read)
    std::printf("%s of %llu bytes (write them with -o FILE)\n",
                std::string(leaf_kind_name(leaf.kind)).c_str(),
                static_cast<unsigned long long>(bytes));
    return 0;
  }
  const uint64_t n_elements = box->num_elements();
  if (leaf.kind == LeafKind::kArray && n_elements > kMaxPrinted) {
    Status st = print_summary(r, n.leaf, leaf.dtype, out_shape, *box, n_elements, ro);
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
  if (leaf.kind == LeafKind::kStr) {
    std::fwrite(data.data(), 1, data.size(), stdout);
    std::printf("\n");
  } else {
    print_array(leaf.dtype, out_shape, data);
  }
  return 0;
}

}  // namespace jtree::cli
