// jtree._jtree.save / append / compact: the writer for Python, the GIL released while writing.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <optional>

#include "builder.h"
#include "py_progress.h"
#include "py_source.h"
#include "shard_plan.h"
#include "jtree/io.h"
#include "jtree/multihost.h"

namespace jtpy {
namespace {

// A Python int for one of the library's unsigned sizes. A negative one is refused naming the
// option (InvalidArgumentError), as the library refuses other values out of range; as an
// unsigned parameter it would fail nanobind's overload match with a TypeError about the call.
std::optional<uint64_t> size_arg(std::optional<int64_t> v, const char* name) {
  if (!v) return std::nullopt;
  if (*v < 0) {
    check(jtree::Status::invalid_argument(std::string(name) + " must be >= 0, not " +
                                         std::to_string(*v)));
  }
  return static_cast<uint64_t>(*v);
}

// WriteOptions from keyword arguments (None: the library's default). The library checks the
// values (check_write_options).
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
  std::optional<jtree::ShardSpec> shard_layout;
  jtree::RemoteOptions remote;

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
    o.shard_layout = shard_layout;
    o.remote = remote;
    o.writer = "jtree-python " + std::string(jtree::version_string());
    return o;
  }
};

// WriteOptions::shard_layout from None or (world, expert_parallel, rules | None).
std::optional<jtree::ShardSpec> layout_arg(nb::handle layout) {
  if (layout.is_none()) return std::nullopt;
  auto [world, expert_parallel, rules] = nb::cast<std::tuple<uint32_t, bool, nb::object>>(layout);
  return shard_spec(0, world, expert_parallel, rules);
}

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

// Writes to `path`, or (fileobj given) into a binary file object named `path` in messages.
nb::dict write(Op op, Builder& b, const std::string& path, const WriteArgs& args,
               std::optional<nb::object> progress, std::optional<nb::object> fileobj,
               std::optional<jtree::AppendBase> base) {
  jtree::Tree tree = b.take();
  jtree::WriteOptions o = args.options();
  o.append_base = std::move(base);
  PyProgress report(std::move(progress));
  o.progress = report.fn();
  std::unique_ptr<jtree::Sink> sink;
  if (fileobj) sink = file_object_sink(*fileobj, path);
  jtree::Result<jtree::WriteStats> r = without_gil([&] {
    if (sink) return jtree::save(std::move(tree), *sink, o);
    if (op == Op::kSave) return jtree::save(std::move(tree), path, o);
    return jtree::append(path, std::move(tree), o);
  });
  sink.reset();  // (its file object is released with the GIL held: here)
  report.rethrow();
  return stats_dict(value_or_raise(std::move(r), ErrorPlace{path, std::nullopt}));
}

}  // namespace

void register_writer(nb::module_& m) {
  auto save = [](Builder& b, const std::string& path, std::optional<int> codec,
                 std::optional<int> level, std::optional<int64_t> chunk_bytes,
                 std::optional<int64_t> inline_threshold, int threads,
                 std::optional<int64_t> max_bytes_in_flight, bool overwrite,
                 bool overwrite_foreign, bool sync, bool append, std::optional<nb::object> progress,
                 std::optional<nb::object> fileobj, std::optional<uint64_t> expect_generation,
                 std::optional<uint64_t> expect_footer_offset, std::string expect_etag,
                 nb::object shard_layout, nb::object remote) {
    WriteArgs a{codec, level, size_arg(chunk_bytes, "chunk_bytes"),
                size_arg(inline_threshold, "inline_threshold"), threads,
                size_arg(max_bytes_in_flight, "max_bytes_in_flight"), overwrite,
                overwrite_foreign, sync, layout_arg(shard_layout), remote_options(remote, path)};
    if (fileobj && append) throw_value_error("write: append=True into a file object");
    if (expect_generation.has_value() != expect_footer_offset.has_value()) {
      throw_value_error("write: expect_generation and expect_footer_offset go together");
    }
    std::optional<jtree::AppendBase> base;
    if (expect_generation) base = jtree::AppendBase{*expect_generation, *expect_footer_offset,
                                                    std::move(expect_etag)};
    return write(append ? Op::kAppend : Op::kSave, b, path, a, std::move(progress),
                 std::move(fileobj), std::move(base));
  };
  m.def("write", save, nb::arg("builder"), nb::arg("path"), nb::kw_only(),
        nb::arg("codec").none() = nb::none(), nb::arg("level").none() = nb::none(),
        nb::arg("chunk_bytes").none() = nb::none(),
        nb::arg("inline_threshold").none() = nb::none(), nb::arg("threads") = 0,
        nb::arg("max_bytes_in_flight").none() = nb::none(), nb::arg("overwrite") = true,
        nb::arg("overwrite_foreign") = false, nb::arg("sync") = true, nb::arg("append") = false,
        nb::arg("progress").none() = nb::none(), nb::arg("fileobj").none() = nb::none(),
        nb::arg("expect_generation").none() = nb::none(),
        nb::arg("expect_footer_offset").none() = nb::none(), nb::arg("expect_etag") = "",
        nb::arg("shard_layout").none() = nb::none(), nb::arg("remote").none() = nb::none(),
        "Writes the builder's tree to a path or URL (jtree::save), or as a new generation of an "
        "existing local file (jtree::append, append=True), or (fileobj given) sequentially "
        "into a binary file object with write() (`path` names it in messages). "
        "progress(done, total) in raw bytes (an exception it raises cancels: nothing is "
        "committed). expect_generation/expect_footer_offset/expect_etag (appends): the file "
        "state (File.info()) the tree was planned against; another one is refused with "
        "AbortedError, nothing written (WriteOptions::append_base). shard_layout: None or "
        "(world, expert_parallel, rules | None), WriteOptions::shard_layout. remote: "
        "{RemoteOptions field: value} for a URL (None: the environment's). Returns the "
        "write statistics.");

  m.def(
      "save_segment",
      [](Builder& b, const std::string& path, uint32_t process_index, uint32_t process_count,
         uint64_t save_id, std::optional<int> codec, std::optional<int> level,
         std::optional<int64_t> chunk_bytes, std::optional<int64_t> inline_threshold,
         int threads, bool sync, nb::object shard_layout, nb::object remote) {
        WriteArgs a{codec, level, size_arg(chunk_bytes, "chunk_bytes"),
                    size_arg(inline_threshold, "inline_threshold"), threads, std::nullopt,
                    true, false, sync, layout_arg(shard_layout), remote_options(remote, path)};
        jtree::Tree tree = b.take();
        const jtree::WriteOptions o = a.options();
        jtree::SegmentOptions so;
        so.process_index = process_index;
        so.process_count = process_count;
        so.save_id = save_id;
        return stats_dict(value_or_raise(
            without_gil([&] { return jtree::save_segment(std::move(tree), path, so, o); })));
      },
      nb::arg("builder"), nb::arg("path"), nb::kw_only(), nb::arg("process_index"),
      nb::arg("process_count"), nb::arg("save_id"), nb::arg("codec").none() = nb::none(),
      nb::arg("level").none() = nb::none(), nb::arg("chunk_bytes").none() = nb::none(),
      nb::arg("inline_threshold").none() = nb::none(), nb::arg("threads") = 0,
      nb::arg("sync") = true, nb::arg("shard_layout").none() = nb::none(),
      nb::arg("remote").none() = nb::none(),
      "Writes this process's segment of a multi-process save of `path` (jtree::save_segment).");

  m.def(
      "commit_segments",
      [](const std::string& path, uint32_t process_count, bool overwrite, bool overwrite_foreign,
         bool sync, bool keep_segments, bool verify_chunks, std::optional<nb::callable> progress,
         nb::object remote) {
        jtree::CommitOptions o;
        o.write.remote = remote_options(remote, path);
        o.keep_segments = keep_segments;
        o.verify_chunks = verify_chunks;
        o.write.overwrite = overwrite;
        o.write.overwrite_foreign = overwrite_foreign;
        o.write.sync = sync;
        o.write.writer = "jtree-python " + std::string(jtree::version_string());
        // progress(done, total) runs in the writing thread: it takes the GIL for the call; an
        // exception it raises cancels the commit and is raised again here.
        std::optional<nb::python_error> raised;
        if (progress) {
          o.write.progress = [&progress, &raised](uint64_t done, uint64_t total) {
            nb::gil_scoped_acquire gil;
            try {
              nb::object r = (*progress)(done, total);
              return r.is_none() || nb::cast<bool>(r);
            } catch (nb::python_error& e) {
              raised.emplace(std::move(e));
              return false;
            }
          };
        }
        jtree::Result<jtree::WriteStats> r =
            without_gil([&] { return jtree::commit_segments(path, process_count, o); });
        if (raised) throw std::move(*raised);
        return stats_dict(value_or_raise(std::move(r)));
      },
      nb::arg("path"), nb::arg("process_count"), nb::kw_only(), nb::arg("overwrite") = true,
      nb::arg("overwrite_foreign") = false, nb::arg("sync") = true,
      nb::arg("keep_segments") = false, nb::arg("verify_chunks") = false,
      nb::arg("progress").none() = nb::none(), nb::arg("remote").none() = nb::none(),
      "Assembles `path` from its process_count segments (jtree::commit_segments); "
      "progress(done, total) after each segment copied (False or an exception cancels).");

  m.def(
      "check_save_target",
      [](const std::string& path, bool overwrite_foreign, nb::object remote) {
        jtree::WriteOptions o;
        o.overwrite_foreign = overwrite_foreign;
        o.remote = remote_options(remote, path);
        jtree::Status st;
        {
          nb::gil_scoped_release release;
          st = jtree::check_save_target(path, o);
        }
        if (!st.ok()) raise_status(st);
      },
      nb::arg("path"), nb::kw_only(), nb::arg("overwrite_foreign") = false,
      nb::arg("remote").none() = nb::none(),
      "Raises what a commit to `path` would (jtree::check_save_target): a foreign file or "
      "object is refused unless overwrite_foreign.");

  m.def(
      "remove_object",
      [](const std::string& path, nb::handle remote) {
        const jtree::RemoteOptions o = remote_options(remote, path);
        const jtree::Status st = without_gil([&] { return jtree::remove_object(path, o); });
        if (!st.ok() && !st.is_not_found()) raise_status(st);
        return st.ok();
      },
      nb::arg("path"), nb::arg("remote").none() = nb::none(),
      "Deletes a file or remote object (jtree::remove_object) with `remote` (RemoteOptions' "
      "settings, refused for a local path); False when it did not exist.");

  m.def(
      "segment_path",
      [](const std::string& path, uint32_t index, uint32_t count) {
        return jtree::segment_path(path, index, count);
      },
      nb::arg("path"), nb::arg("index"), nb::arg("count"),
      "The path of segment `index` of `count` of `path` (jtree::segment_path).");

  m.def(
      "compact",
      [](const std::string& path, const std::string& out_path, bool sync, nb::object remote) {
        jtree::WriteOptions o;
        o.sync = sync;
        o.remote = remote_options(remote, path);
        return stats_dict(
            value_or_raise(without_gil([&] { return jtree::compact(path, out_path, o); })));
      },
      nb::arg("path"), nb::arg("out_path") = "", nb::arg("sync") = true,
      nb::arg("remote").none() = nb::none(),
      "Rewrites a file without dead bytes (jtree::compact); in place when out_path is empty.");
}

}  // namespace jtpy
