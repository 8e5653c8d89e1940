// jtree._jtree.Reader: jtree::Reader for Python. The structure comes out as plain tuples (the
// Python layer builds objects from them); leaves are read straight into caller-allocated
// buffers (NumPy arrays, torch tensors: anything nb::ndarray imports) with the GIL released.
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <complex>
#include <memory>
#include <optional>
#include <vector>

#include "common.h"
#include "device_read.h"
#include "py_progress.h"
#include "py_source.h"
#include "shard_plan.h"
#include "tree_assembly.h"

namespace jtpy {

nb::object mapped_bytes_array(jtree::MappedLeaf m, bool writable) {
  auto* keep = new std::shared_ptr<const void>(std::move(m.owner));
  nb::capsule owner(keep, [](void* p) noexcept {
    delete static_cast<std::shared_ptr<const void>*>(p);
  });
  const size_t shape[1] = {m.bytes.size()};
  auto* data = reinterpret_cast<uint8_t*>(m.bytes.data());
  if (writable) {
    return nb::ndarray<nb::numpy, uint8_t, nb::ndim<1>>(data, 1, shape, owner).cast();
  }
  return nb::ndarray<nb::numpy, const uint8_t, nb::ndim<1>>(data, 1, shape, owner).cast();
}

namespace {

using ByteBuffer = nb::ndarray<uint8_t, nb::ndim<1>, nb::c_contig>;

nb::object bytes_or_none(std::string_view s, bool present) {
  if (!present) return nb::none();
  return nb::bytes(s.data(), s.size());
}

// Limits from a dict of field names (None or {}: the defaults).
jtree::Limits limits_from(const std::optional<nb::dict>& d) {
  jtree::Limits l;
  if (!d) return l;
  for (auto [k, v] : *d) {
    const std::string name = nb::cast<std::string>(k);
    if (name == "max_header_bytes") l.max_header_bytes = nb::cast<uint64_t>(v);
    else if (name == "max_index_bytes") l.max_index_bytes = nb::cast<uint64_t>(v);
    else if (name == "max_nodes") l.max_nodes = nb::cast<uint64_t>(v);
    else if (name == "max_leaves") l.max_leaves = nb::cast<uint64_t>(v);
    else if (name == "max_depth") l.max_depth = nb::cast<uint32_t>(v);
    else if (name == "max_rank") l.max_rank = nb::cast<uint32_t>(v);
    else if (name == "max_chunk_bytes") l.max_chunk_bytes = nb::cast<uint64_t>(v);
    else if (name == "max_string_bytes") l.max_string_bytes = nb::cast<uint64_t>(v);
    else if (name == "max_leaf_bytes") l.max_leaf_bytes = nb::cast<uint64_t>(v);
    else if (name == "max_total_bytes") l.max_total_bytes = nb::cast<uint64_t>(v);
    else raise_status(jtree::Status::invalid_argument("unknown limit '" + name + "'"));
  }
  return l;
}

// The node and leaf tuples: the protocol with python/jtree/_structure.py, specified field by
// field in ONE place, docs/architecture.md section 5 (change the code and that table together;
// the kind, flag and codec numbers reach Python as _jtree.NODE_KINDS... from rules.cc).
//
// A node as Python sees it: the node tuple (kind, key, num_children, type_name, aux, leaf).
nb::tuple node_tuple(const jtree::NodeView& n) {
  const bool named = n.kind == jtree::NodeKind::kNamedTuple || n.kind == jtree::NodeKind::kCustom;
  return nb::make_tuple(static_cast<int>(n.kind), key_to_py(n.key), n.num_children,
                        named ? nb::object(decode_utf8(n.type_name)) : nb::none(),
                        bytes_or_none(n.aux_data, n.kind == jtree::NodeKind::kCustom), n.leaf);
}

// A leaf as Python sees it: the leaf tuple (kind, flags, dtype, shape, storage, value,
// type_name, chunk_shape, codec, filter) of docs/architecture.md section 5.
nb::tuple leaf_tuple(const jtree::Leaf& l) {
  nb::object value = leaf_scalar_value(l, /*big_int_as_int=*/false);
  return nb::make_tuple(
      static_cast<int>(l.kind), l.flags, static_cast<int>(l.dtype), shape_tuple(l.shape),
      static_cast<int>(l.storage), value,
      l.kind == jtree::LeafKind::kCustomLeaf ? nb::object(decode_utf8(l.type_name))
                                             : nb::object(nb::none()),
      shape_tuple(l.chunk_shape), static_cast<int>(l.codec), static_cast<int>(l.filter));
}

class PyReader {
 public:
  explicit PyReader(std::shared_ptr<jtree::Reader> r) : r_(std::move(r)) {}

  static PyReader open(const std::string& path, bool use_mmap, std::optional<nb::dict> limits,
                       bool allow_full_download, nb::handle remote) {
    jtree::OpenOptions o;
    o.use_mmap = use_mmap;
    o.limits = limits_from(limits);
    o.remote = remote_options(remote, path);
    if (allow_full_download) o.remote.http.allow_full_download = true;
    std::optional<jtree::Result<std::shared_ptr<jtree::Reader>>> r;
    {
      nb::gil_scoped_release release;
      r.emplace(jtree::Reader::open(path, o));
    }
    return PyReader(value_or_raise(std::move(*r), ErrorPlace{path, std::nullopt}));
  }

  // A file held by a Python object: a binary file object read with seek + readinto (bytes
  // [base, base + size)), or (fileobj false) a buffer such as bytes, held without a copy.
  static PyReader open_object(nb::object obj, bool fileobj, const std::string& name,
                              uint64_t base, uint64_t size, std::optional<nb::dict> limits) {
    jtree::OpenOptions o;
    o.use_mmap = false;
    o.limits = limits_from(limits);
    std::shared_ptr<jtree::Source> src = fileobj ? file_object_source(obj, name, base, size)
                                                 : buffer_source(obj, name);
    std::optional<jtree::Result<std::shared_ptr<jtree::Reader>>> r;
    {
      nb::gil_scoped_release release;
      r.emplace(jtree::Reader::open(std::move(src), o));
    }
    return PyReader(value_or_raise(std::move(*r), ErrorPlace{name, std::nullopt}));
  }

  const std::string& name() const { return r_->name(); }

  // [(kind, key, num_children, type_name | None, aux_data | None, leaf)] in preorder.
  nb::list nodes() const {
    nb::list out;
    for (uint32_t i = 0; i < r_->num_nodes(); ++i) out.append(node_tuple(r_->node(i)));
    return out;
  }

  // [(kind, flags, dtype, shape, storage, value, type_name | None, chunk_shape, codec, filter)]
  // value: int (Int: int64, or bytes when big_int), float, bool, complex; None for payloads.
  // (Each leaf decoded for its tuple and dropped: neither the Reader's kept leaves nor a
  // whole Tree are built for one pass.)
  nb::list leaves() const {
    nb::list out;
    for (uint32_t i = 0; i < r_->num_leaves(); ++i) out.append(leaf_tuple(r_->decode_leaf(i)));
    return out;
  }

  // A whole plain load (see jtpy::load_plain): (tree,) or None.
  nb::object load_plain(nb::handle plain, nb::handle container, bool verify, int threads,
                        const jtree::KeyPathPatterns* keys, bool prune, uint32_t first,
                        nb::handle parts) const {
    return jtpy::load_plain(*r_, plain, container, verify, threads, keys, prune, first, parts);
  }

  // load_pytreedef of the whole file (see jtpy::spec_tree).
  nb::object spec_tree(nb::handle spec_cls, nb::handle kind_names, nb::handle dtype_of,
                       nb::handle container) const {
    return jtpy::spec_tree(*r_, spec_cls, kind_names, dtype_of, container);
  }

  // The structure below node `node` with None for every leaf (see jtpy::assemble_tree): what
  // a load keeps of a part it does not load (a False mask, a subtree keys= cannot reach), made
  // without a Python frame per node.
  nb::object none_tree(uint32_t node, nb::handle container, nb::handle parts) const {
    check_node(node);
    return assemble_tree(*r_, container, [](uint32_t) { return nb::none(); }, node, parts);
  }

  // Node `node`: (node tuple, leaf tuple | None), the leaf tuple given for a Leaf node.
  nb::tuple node(uint32_t node) const {
    check_node(node);
    const jtree::NodeView n = r_->node(node);
    return nb::make_tuple(node_tuple(n), leaf_or_none(n));
  }

  // The children of node `node`: [(index, node tuple, leaf tuple | None)], the leaf tuple
  // given for Leaf nodes. What a Python tree built a container at a time asks for.
  nb::list children(uint32_t node) const {
    check_node(node);
    nb::list out;
    for (uint32_t c : r_->children(node)) {
      const jtree::NodeView n = r_->node(c);
      out.append(nb::make_tuple(c, node_tuple(n), leaf_or_none(n)));
    }
    return out;
  }

  nb::list metadata() const {
    nb::list out;
    const std::vector<std::string>& text = r_->metadata_text_keys();
    for (const auto& [k, v] : r_->metadata()) {
      const bool is_text = std::find(text.begin(), text.end(), k) != text.end();
      out.append(nb::make_tuple(decode_utf8(k), is_text ? nb::object(decode_utf8(v))
                                                        : nb::bytes(v.data(), v.size())));
    }
    return out;
  }

  nb::dict info() const {
    const jtree::FileInfo& i = r_->info();
    nb::dict d;
    d["file_size"] = i.file_size;
    d["generation"] = i.generation;
    d["writer"] = decode_utf8(i.writer);
    d["writer_version"] = i.writer_version;
    d["min_read_version"] = i.min_read_version;
    d["num_chunks"] = i.num_chunks;
    d["stored_bytes"] = i.stored_bytes;
    d["raw_bytes"] = i.raw_bytes;
    d["inline_bytes"] = i.inline_bytes;
    d["segments"] = i.segments.size();
    d["recovered"] = i.recovered;
    // What an append planned against this generation passes back (write(expect_...)).
    d["footer_offset"] = i.footer_offset;
    d["etag"] = r_->source()->etag();
    return d;
  }

  nb::dict io_stats() const {
    const jtree::IoStats s = r_->io_stats();
    nb::dict d;
    d["read_requests"] = s.read_requests;
    d["bytes_read"] = s.bytes_read;
    d["retries"] = s.retries;
    return d;
  }

  // [(file_offset, stored_size, raw_size)] of a chunked leaf's chunks.
  nb::list chunks(uint32_t leaf) const {
    if (leaf >= r_->num_leaves()) throw_index_error("leaf number out of range");
    const jtree::Leaf& l = r_->leaf(leaf);
    nb::list out;
    for (uint64_t k = 0; k < jtree::Tree::chunk_count(l); ++k) {
      const jtree::ChunkInfo c = r_->chunk(l.first_chunk + k);
      out.append(nb::make_tuple(c.file_offset, c.stored_size, c.raw_size));
    }
    return out;
  }

  // A rectilinear grid's chunk ends, one tuple per dimension (jtree::Tree::chunk_ends
  // decides the split); None for a regular grid or a leaf that is not chunked.
  nb::object chunk_bounds(uint32_t leaf) const {
    if (leaf >= r_->num_leaves()) throw_index_error("leaf number out of range");
    const std::vector<jtree::Shape> ends = jtree::Tree::chunk_ends(r_->leaf(leaf));
    if (ends.empty()) return nb::none();
    nb::list dims;
    for (const jtree::Shape& e : ends) {
      nb::list d;
      for (uint64_t v : e) d.append(v);
      dims.append(nb::tuple(d));
    }
    return nb::tuple(dims);
  }

  // (Keys are bytes in the file, not always UTF-8: decoded as nodes() decodes them.)
  nb::str path(uint32_t node) const {
    if (node >= r_->num_nodes()) throw_index_error("node number out of range");
    return decode_utf8(r_->path(node));
  }

  // (max_leaf_bytes, max_total_bytes) of the open's limits: the Python loader checks what it
  // allocates for its caller against them before allocating (python/jtree/_load.py).
  nb::tuple memory_limits() const {
    const jtree::Limits& l = r_->options().limits;
    return nb::make_tuple(l.max_leaf_bytes, l.max_total_bytes);
  }

  // requests: [(leaf, begin | None, end | None, dst)], dst a 1-d C-contiguous uint8 buffer of
  // exactly the bytes the leaf (or box) takes in memory. One pass: chunk ranges of all requests
  // are coalesced and fetched and decoded in parallel, the GIL released.
  void read_many(nb::list requests, bool verify, int threads, uint64_t max_bytes_in_flight,
                 std::optional<nb::object> progress) const {
    std::vector<jtree::ReadRequest> reqs;
    std::vector<ByteBuffer> keep;
    reqs.reserve(requests.size());
    keep.reserve(requests.size());
    for (nb::handle h : requests) {
      auto t = nb::cast<nb::tuple>(h);
      if (t.size() != 4) throw_value_error("read_many: requests are (leaf, begin, end, dst)");
      jtree::ReadRequest r;
      r.leaf = nb::cast<uint32_t>(t[0]);
      if (!t[1].is_none()) {
        jtree::Box b;
        b.begin = nb::cast<std::vector<uint64_t>>(t[1]);
        b.end = nb::cast<std::vector<uint64_t>>(t[2]);
        r.box = std::move(b);
      }
      ByteBuffer dst = nb::cast<ByteBuffer>(t[3]);
      if (dst.device_type() != nb::device::cpu::value) {
        throw_value_error("read_many: destination is not in host memory");
      }
      r.dst = std::span<std::byte>(reinterpret_cast<std::byte*>(dst.data()), dst.shape(0));
      keep.push_back(std::move(dst));
      reqs.push_back(std::move(r));
    }
    jtree::ReadOptions o;
    o.verify_checksums = verify;
    o.threads = threads;
    if (max_bytes_in_flight > 0) o.max_bytes_in_flight = max_bytes_in_flight;
    PyProgress report(std::move(progress));
    o.progress = report.fn();
    jtree::Status st;
    {
      nb::gil_scoped_release release;
      st = r_->read_many(reqs, o);
    }
    report.rethrow();
    check(st, *r_);
  }

  // [uint8 array | None] per leaf: the leaf's bytes in place in the file's copy-on-write
  // mapping (jtree::Reader::map_leaves), None where the leaf cannot be mapped. Each array keeps
  // the mapping alive (not the Reader); `writable` false gives read-only arrays. Checksums are
  // verified in parallel, the GIL released.
  nb::list map_leaves(const std::vector<uint32_t>& leaves, bool verify, int threads,
                      bool writable, std::optional<nb::object> progress) const {
    jtree::ReadOptions o;
    o.verify_checksums = verify;
    o.threads = threads;
    PyProgress report(std::move(progress));
    o.progress = report.fn();
    std::optional<jtree::Result<std::vector<jtree::MappedLeaf>>> r;
    {
      nb::gil_scoped_release release;
      r.emplace(r_->map_leaves(leaves, o));
    }
    report.rethrow();
    std::vector<jtree::MappedLeaf> mapped = value_or_raise(std::move(*r), *r_);
    nb::list out;
    for (jtree::MappedLeaf& m : mapped) {
      if (!m) {
        out.append(nb::none());
        continue;
      }
      out.append(mapped_bytes_array(std::move(m), writable));
    }
    return out;
  }

  // (uint8 array, box_order) | None: the box [begin, end) of a leaf in place in the file's
  // copy-on-write mapping: jtree::Reader::mapped_box (box_order False: from the box's first
  // element to one past its last, its elements at the leaf's C-order strides), else, for a
  // box that is exactly one raw chunk, jtree::Reader::mapped_chunk (box_order True: the box's
  // own C-order array); None where neither maps it. Only the chunks the box overlaps are
  // verified, the GIL released. The array keeps the mapping alive; `writable` false gives a
  // read-only array.
  nb::object map_box(uint32_t leaf, std::vector<uint64_t> begin, std::vector<uint64_t> end,
                     bool verify, int threads, bool writable) const {
    jtree::ReadOptions o;
    o.verify_checksums = verify;
    o.threads = threads;
    const jtree::Box box{std::move(begin), std::move(end)};
    std::optional<jtree::Result<jtree::MappedLeaf>> r;
    bool box_order = false;
    {
      nb::gil_scoped_release release;
      r.emplace(r_->mapped_box(leaf, box, o));
      if (r->ok() && !**r) {
        r.emplace(r_->mapped_chunk(leaf, box, o));
        box_order = true;
      }
    }
    jtree::MappedLeaf m = value_or_raise(std::move(*r), *r_);
    if (!m) return nb::none();
    return nb::make_tuple(mapped_bytes_array(std::move(m), writable), box_order);
  }

  // Loads to device memory (device_read.cc): [(leaf, box | None, dst_address, nbytes)].
  nb::dict read_to_device(nb::list requests, const DeviceReadArgs& a) const {
    return jtpy::read_to_device(*r_, requests, a);
  }
  nb::dict read_staged_host_for_tests(nb::list requests, const DeviceReadArgs& a) const {
    return jtpy::read_staged_host_for_tests(*r_, requests, a);
  }

  // {"ok": bool, "chunks_checked", "bytes_checked", "dead_bytes", "problems": [(where, msg)],
  //  "notes": [...]}
  nb::dict verify(int threads, std::optional<nb::object> progress) const {
    jtree::ReadOptions o;
    o.threads = threads;
    PyProgress report(std::move(progress));
    o.progress = report.fn();
    std::optional<jtree::Result<jtree::VerifyReport>> r;
    {
      nb::gil_scoped_release release;
      r.emplace(r_->verify(o));
    }
    report.rethrow();
    jtree::VerifyReport rep = value_or_raise(std::move(*r), *r_);
    nb::dict d;
    d["ok"] = rep.ok();
    d["chunks_checked"] = rep.chunks_checked;
    d["bytes_checked"] = rep.bytes_checked;
    d["dead_bytes"] = rep.dead_bytes;
    nb::list problems;
    for (const auto& p : rep.problems) {
      problems.append(nb::make_tuple(decode_utf8(p.where), decode_utf8(p.status.to_string())));
    }
    d["problems"] = problems;
    nb::list notes;
    for (const auto& n : rep.notes) notes.append(decode_utf8(n));
    d["notes"] = notes;
    return d;
  }

  nb::list shard_plan(uint32_t rank, uint32_t world, bool expert_parallel,
                      nb::object rules) const {
    return jtpy::shard_plan(*r_, rank, world, expert_parallel, std::move(rules));
  }

 private:
  void check_node(uint32_t node) const {
    if (node >= r_->num_nodes()) {
      raise_status(jtree::Status::invalid_argument(name() + ": node number out of range"));
    }
  }
  // The leaf tuple of a Leaf node, else None.
  nb::object leaf_or_none(const jtree::NodeView& n) const {
    if (n.kind != jtree::NodeKind::kLeaf) return nb::none();
    return leaf_tuple(r_->leaf(n.leaf));
  }

  std::shared_ptr<jtree::Reader> r_;
};

}  // namespace

void register_reader(nb::module_& m) {
  nb::class_<PyReader>(m, "Reader", "An open .jtree file (jtree::Reader); thread-safe.")
      .def_static("open", &PyReader::open, nb::arg("path"), nb::arg("use_mmap") = true,
                  nb::arg("limits").none() = nb::none(), nb::arg("allow_full_download") = false,
                  nb::arg("remote").none() = nb::none(),
                  "Opens a path or URL: reads the header and index, no chunk data. "
                  "allow_full_download: an http(s) server that ignores Range requests is "
                  "refused (NotSupported) unless set; then the file is downloaded once, whole. "
                  "remote: {RemoteOptions field: value} for a URL (None: the environment's).")
      .def_static("open_object", &PyReader::open_object, nb::arg("obj"), nb::arg("fileobj"),
                  nb::arg("name"), nb::arg("base") = 0, nb::arg("size") = 0,
                  nb::arg("limits").none() = nb::none(),
                  "Opens a file held by a Python object: a seekable binary file object "
                  "(fileobj=True: bytes [base, base + size) read with seek + readinto, under "
                  "the GIL, one at a time) or a buffer such as bytes (held, not copied).")
      .def_prop_ro("name", &PyReader::name)
      .def("nodes", &PyReader::nodes,
           "The nodes in preorder: [(kind, key, num_children, type_name, aux_data, leaf)].")
      .def("node", &PyReader::node, nb::arg("node"),
           "One node: (node tuple as in nodes(), leaf tuple as in leaves() | None).")
      .def("children", &PyReader::children, nb::arg("node"),
           "The children of a node: [(index, node tuple as in nodes(), leaf tuple as in "
           "leaves() | None)].")
      .def("leaves", &PyReader::leaves,
           "The leaves: [(kind, flags, dtype, shape, storage, value, type_name, chunk_shape, "
           "codec, filter)].")
      .def("spec_tree", &PyReader::spec_tree, nb::arg("spec_cls"), nb::arg("kind_names"),
           nb::arg("dtype_of"), nb::arg("container"),
           "The whole structure with a spec_cls object per leaf, in one pass: dicts, lists, "
           "tuples and None made natively, other containers by container(kind, type_name, "
           "aux, keys, values, key_path_parts); dtype_of(code) -> (dtype, item size) | None.")
      .def("none_tree", &PyReader::none_tree, nb::arg("node"), nb::arg("container"),
           nb::arg("parts"),
           "The structure below node `node` with None for each leaf, in one pass: dicts, "
           "lists, tuples and None made natively, other containers by container(kind, "
           "type_name, aux, keys, values, key_path_parts), whose parts begin with `parts` "
           "(node's own key path parts).")
      .def("load_plain", &PyReader::load_plain, nb::arg("plain"), nb::arg("container"),
           nb::arg("verify") = true, nb::arg("threads") = 0,
           nb::arg("keys").none() = nb::none(), nb::arg("prune") = false,
           nb::arg("first") = 0, nb::arg("parts") = nb::tuple(),
           "The whole file (or the subtree of node `first`, whose key path parts are `parts`) "
           "loaded in one pass (jtree.load with no cast, target or progress; keys: a "
           "KeyPathPatterns selection or None, prune its prune=True): (tree, []), (None, "
           "[numbers of the keys patterns that match nothing]) with nothing read, or None "
           "where the general loader must do it (pickled or custom leaves, a dtype the "
           "framework lacks, the memory limits). `plain` is the framework's part, a "
           "jtree._load_adapter.PlainPass, its attributes read once: dtype_of(code) -> "
           "np.dtype | None; wrap None, or wrap(array or destination, code) -> each array's "
           "value; mmap_mode 0 copies, 1 copy-on-write views of mapped leaves, 2 read-only "
           "views; new_device and fill None, or new_device(shape, code) -> each array's "
           "device destination and fill([(leaf, None, destination)...]) -> bool filling them "
           "(False declines). Containers other than dict/list/tuple by container(kind, "
           "type_name, aux, keys, values, parts).")
      .def("metadata", &PyReader::metadata, "User metadata: [(key, value: str where saved as text, else bytes)].")
      .def("info", &PyReader::info, "Facts about the file (jtree::FileInfo) as a dict.")
      .def("io_stats", &PyReader::io_stats, "The storage backend's counters since opening.")
      .def("chunks", &PyReader::chunks, nb::arg("leaf"),
           "[(file_offset, stored_size, raw_size)] of a chunked leaf's chunks.")
      .def("chunk_bounds", &PyReader::chunk_bounds, nb::arg("leaf"),
           "A rectilinear grid's chunk end positions, one tuple per dimension; None for a "
           "regular grid (chunk_shape) or a leaf that is not chunked.")
      .def("path", &PyReader::path, nb::arg("node"), "The key path of a node (jtree::Tree::path).")
      .def(
          "shard_plan",
          &PyReader::shard_plan,
          nb::arg("rank"), nb::arg("world"), nb::arg("expert_parallel") = false,
          nb::arg("rules").none() = nb::none(),
          "A rank's part of every array leaf (jtree::plan_shard): [(leaf, kind, load, "
          "begin | None, end | None, key path)]; rules [(pattern, kind, dim)] or None for the "
          "defaults.")
      .def("memory_limits", &PyReader::memory_limits,
           "(max_leaf_bytes, max_total_bytes): what loads may allocate for their caller.")
      .def("read_many", &PyReader::read_many, nb::arg("requests"), nb::arg("verify") = true,
           nb::arg("threads") = 0, nb::arg("max_bytes_in_flight") = 0,
           nb::arg("progress").none() = nb::none(),
           "Reads leaves or boxes into byte buffers in one pass, the GIL released; "
           "progress(done, total) in fetched bytes (an exception it raises cancels).")
      .def("map_leaves", &PyReader::map_leaves, nb::arg("leaves"), nb::arg("verify") = true,
           nb::arg("threads") = 0, nb::arg("writable") = true,
           nb::arg("progress").none() = nb::none(),
           "[uint8 array | None] per leaf: its bytes in place in the file's copy-on-write map "
           "(None where the leaf is not stored as its array), checksums verified in parallel.")
      .def("map_box", &PyReader::map_box, nb::arg("leaf"), nb::arg("begin"), nb::arg("end"),
           nb::arg("verify") = true, nb::arg("threads") = 0, nb::arg("writable") = true,
           "uint8 array | None: the box [begin, end) of a leaf in place in the file's "
           "copy-on-write map, from its first element to one past its last (elements at the "
           "leaf's C-order strides); None where the leaf is not stored as its array. Only the "
           "chunks the box overlaps are verified.")
      .def(
          "read_to_device",
          [](const PyReader& r, nb::list requests, int device,
             std::optional<uint64_t> staging_bytes, std::optional<int64_t> staging_buffers,
             std::string direct_io, bool verify, int threads,
             std::optional<nb::object> progress, std::string zero_copy) {
            return r.read_to_device(requests, {device, staging_bytes, staging_buffers,
                                               std::move(direct_io), verify, threads,
                                               std::move(progress), std::move(zero_copy)});
          },
          nb::arg("requests"), nb::kw_only(), nb::arg("device") = 0,
          nb::arg("staging_bytes").none() = nb::none(),
          nb::arg("staging_buffers").none() = nb::none(), nb::arg("direct_io") = "auto",
          nb::arg("verify") = true, nb::arg("threads") = 0,
          nb::arg("progress").none() = nb::none(), nb::arg("zero_copy") = "off",
          "Reads [(leaf, (begin, end) | None, dst_address, nbytes)] straight into CUDA device "
          "memory (jtree::read_many_to_device), the GIL released; staging_bytes/buffers None: "
          "the defaults; direct_io and zero_copy 'auto', 'on' or 'off'. Returns the load's "
          "stats {direct_bytes, buffered_bytes, direct_io_note, zero_copy_bytes, "
          "zero_copy_note}. NotSupported without CUDA support or without a device.")
      .def(
          "_read_staged_host_for_tests",
          [](const PyReader& r, nb::list requests, std::optional<uint64_t> staging_bytes,
             std::optional<int64_t> staging_buffers, std::string direct_io, bool verify,
             int threads, std::optional<nb::object> progress, std::string zero_copy) {
            return r.read_staged_host_for_tests(
                requests, {0, staging_bytes, staging_buffers, std::move(direct_io), verify,
                           threads, std::move(progress), std::move(zero_copy)});
          },
          nb::arg("requests"), nb::kw_only(), nb::arg("staging_bytes").none() = nb::none(),
          nb::arg("staging_buffers").none() = nb::none(), nb::arg("direct_io") = "auto",
          nb::arg("verify") = true, nb::arg("threads") = 0,
          nb::arg("progress").none() = nb::none(), nb::arg("zero_copy") = "off",
          "TESTS ONLY: read_to_device through jtree's host-memory stand-in copy engine, every "
          "dst_address a host address; returns the engine's counters and the load's stats. "
          "Not a public API.")
      .def("verify", &PyReader::verify, nb::arg("threads") = 0,
           nb::arg("progress").none() = nb::none(),
           "Checks every checksum and decodes every chunk (jtree::Reader::verify); "
           "progress(done, total) in stored bytes checked (an exception it raises cancels).");
}

}  // namespace jtpy
