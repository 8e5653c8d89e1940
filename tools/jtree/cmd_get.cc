// jtree get FILE KEY[SLICE] [-o OUT]: a leaf or a slice of it, to .npy, raw bytes or stdout.
#include <cstdio>
#include <fstream>

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

Status write_raw(const std::string& path, std::span<const std::byte> data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  out.close();
  if (!out) return Status::IOError(path + ": write failed");
  return Status::OK();
}

// Prints an array as nested lists (numpy-like); large arrays are summarized.
void print_array(DType dtype, const Shape& shape, std::span<const std::byte> data) {
  const size_t item = dtype_info(dtype)->item_size;
  const uint64_t n = data.size() / std::max<size_t>(item, 1);
  std::printf("%s %s\n", std::string(dtype_name(dtype)).c_str(), shape_string(shape).c_str());
  if (n > kMaxPrinted) {
    std::printf("first: ");
    for (uint64_t i = 0; i < 8; ++i) std::printf("%s ", format_element(dtype, data.data() + i * item).c_str());
    std::printf("...\nlast:  ... ");
    for (uint64_t i = n - 8; i < n; ++i) std::printf("%s ", format_element(dtype, data.data() + i * item).c_str());
    std::printf("\n(%llu elements; write them with -o out.npy)\n", static_cast<unsigned long long>(n));
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
  std::vector<std::byte> data(bytes);
  ReadOptions ro;
  ro.verify_checksums = f.verify;
  ro.threads = f.threads;
  Progress progress("reading", !f.quiet && bytes > (64u << 20));
  ro.progress = progress.fn();
  Status st = r.read_box(n.leaf, *box, data, ro);
  progress.finish();
  if (!st.ok()) return fail(st.message());

  if (!f.output.empty()) {
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
      st = write_npy(f.output, leaf.dtype, out_shape, data);
    } else {
      st = write_raw(f.output, data);
    }
    if (!st.ok()) return fail(st.message());
    if (!f.quiet) {
      std::fprintf(stderr, "wrote %s %s%s (%s) to %s\n", std::string(dtype_name(leaf.dtype)).c_str(),
                   spec->path.c_str(), shape_string(out_shape).c_str(), human_bytes(bytes).c_str(),
                   f.output.c_str());
    }
    return 0;
  }
  if (leaf.kind == LeafKind::kStr) {
    std::fwrite(data.data(), 1, data.size(), stdout);
    std::printf("\n");
  } else if (leaf.kind != LeafKind::kArray) {
    std::printf("%s of %zu bytes (write them with -o FILE)\n",
                std::string(leaf_kind_name(leaf.kind)).c_str(), data.size());
  } else {
    print_array(leaf.dtype, out_shape, data);
  }
  return 0;
}

}  // namespace jtree::cli
