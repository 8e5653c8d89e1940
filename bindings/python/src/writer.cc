// jtree._jtree.save / append / compact: the writer for Python, the GIL released while writing.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <optional>

#include "builder.h"

namespace jtpy {
namespace {

// WriteOptions from keyword arguments (None: the library's default).
struct WriteArgs {
  std::optional<int> codec;
  std::optional<int> level;
  std::optional<uint64_t> chunk_bytes;
  std::optional<uint64_t> inline_threshold;
  int threads = 0;
  std::optional<uint64_t> max_bytes_in_flight;
  bool overwrite = true;
  bool overwrite_foreign = false;
  bool sync = true;

  jtree::WriteOptions options() const {
    jtree::WriteOptions o;
    if (codec) o.codec = static_cast<jtree::Codec>(*codec);
    if (level) o.level = *level;
    if (chunk_bytes) o.target_chunk_bytes = *chunk_bytes;
    if (inline_threshold) o.inline_threshold = *inline_threshold;
    o.threads = threads;
    if (max_bytes_in_flight) o.max_bytes_in_flight = *max_bytes_in_flight;
    o.overwrite = overwrite;
    o.overwrite_foreign = overwrite_foreign;
    o.sync = sync;
    o.writer = "jtree-python " + std::string(jtree::version_string());
    return o;
  }
};

nb::dict stats_dict(const jtree::WriteStats& s) {
  nb::dict d;
  d["leaves"] = s.leaves;
  d["chunks"] = s.chunks;
  d["raw_bytes"] = s.raw_bytes;
  d["stored_bytes"] = s.stored_bytes;
  d["file_size"] = s.file_size;
  d["generation"] = s.generation;
  return d;
}

enum class Op { kSave, kAppend };

nb::dict write(Op op, Builder& b, const std::string& path, const WriteArgs& args) {
  jtree::Tree tree = b.take();
  const jtree::WriteOptions o = args.options();
  std::optional<jtree::Result<jtree::WriteStats>> r;
  {
    nb::gil_scoped_release release;
    r.emplace(op == Op::kSave ? jtree::save(std::move(tree), path, o)
                              : jtree::append(path, std::move(tree), o));
  }
  return stats_dict(value_or_raise(std::move(*r)));
}

}  // namespace

void register_writer(nb::module_& m) {
  auto save = [](Builder& b, const std::string& path, std::optional<int> codec,
                 std::optional<int> level, std::optional<uint64_t> chunk_bytes,
                 std::optional<uint64_t> inline_threshold, int threads,
                 std::optional<uint64_t> max_bytes_in_flight, bool overwrite,
                 bool overwrite_foreign, bool sync, bool append) {
    WriteArgs a{codec, level, chunk_bytes, inline_threshold, threads, max_bytes_in_flight,
                overwrite, overwrite_foreign, sync};
    return write(append ? Op::kAppend : Op::kSave, b, path, a);
  };
  m.def("write", save, nb::arg("builder"), nb::arg("path"), nb::kw_only(),
        nb::arg("codec").none() = nb::none(), nb::arg("level").none() = nb::none(),
        nb::arg("chunk_bytes").none() = nb::none(),
        nb::arg("inline_threshold").none() = nb::none(), nb::arg("threads") = 0,
        nb::arg("max_bytes_in_flight").none() = nb::none(), nb::arg("overwrite") = true,
        nb::arg("overwrite_foreign") = false, nb::arg("sync") = true, nb::arg("append") = false,
        "Writes the builder's tree to a path or URL (jtree::save), or as a new generation of an "
        "existing local file (jtree::append, append=True). Returns the write statistics.");

  m.def(
      "compact",
      [](const std::string& path, const std::string& out_path, bool sync) {
        jtree::WriteOptions o;
        o.sync = sync;
        std::optional<jtree::Result<jtree::WriteStats>> r;
        {
          nb::gil_scoped_release release;
          r.emplace(jtree::compact(path, out_path, o));
        }
        return stats_dict(value_or_raise(std::move(*r)));
      },
      nb::arg("path"), nb::arg("out_path") = "", nb::arg("sync") = true,
      "Rewrites a file without dead bytes (jtree::compact); in place when out_path is empty.");
}

}  // namespace jtpy
