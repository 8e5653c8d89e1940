// The library's decisions that the Python package asks for instead of making them itself
// (issue 21: one owner per decision): the memory budget of a load, key-path escaping, basic
// index resolution, key-path patterns (KeyPathPatterns), local path vs URL, the node/leaf/codec numbers, and which read settings
// are valid. Each function only
// translates between Python objects and the C++ call.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <climits>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common.h"
#include "jtree/key_path.h"
#include "jtree/key_path_pattern.h"

namespace jtpy {
namespace {

// Python str <-> UTF-8 bytes for key paths: "surrogatepass" both ways, so that any str
// (lone surrogates included, which a save refuses later with the key path in its message)
// goes through the C++ rule and comes back unchanged. Escapes are ASCII and never meet the
// bytes of a multi-byte sequence.
std::string str_bytes(nb::handle s) {
  Py_ssize_t n = 0;
  if (const char* p = PyUnicode_AsUTF8AndSize(s.ptr(), &n)) {  // (cached by the str: no copy)
    return std::string(p, static_cast<size_t>(n));
  }
  PyErr_Clear();  // lone surrogates: not UTF-8
  PyObject* b = PyUnicode_AsEncodedString(s.ptr(), "utf-8", "surrogatepass");
  if (b == nullptr) throw nb::python_error();
  std::string out(PyBytes_AsString(b), static_cast<size_t>(PyBytes_Size(b)));
  Py_DECREF(b);
  return out;
}

// The components of a path given as a sequence of str.
std::vector<std::string> path_parts(nb::handle parts) {
  std::vector<std::string> out;
  for (nb::handle p : parts) {
    if (!PyUnicode_Check(p.ptr())) throw_type_error("a key path's parts are str");
    out.push_back(str_bytes(p));
  }
  return out;
}

nb::str bytes_str(std::string_view s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "surrogatepass");
  if (o == nullptr) throw nb::python_error();
  return nb::steal<nb::str>(o);
}

// An int (with __index__) as int64, saturated: the bounds of every extent and position the
// library handles (resolve_index clamps slice bounds, and an int index past them is out of
// bounds either way).
int64_t saturated_int64(nb::handle v) {
  nb::object i = nb::steal(PyNumber_Index(v.ptr()));
  if (!i.is_valid()) throw nb::python_error();
  int overflow = 0;
  long long x = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  if (x == -1 && PyErr_Occurred()) throw nb::python_error();
  if (overflow > 0) return INT64_MAX;
  if (overflow < 0) return INT64_MIN;
  return x;
}

std::optional<int64_t> optional_int(nb::handle v) {
  if (v.is_none()) return std::nullopt;
  return saturated_int64(v);
}

// {name: number} of an enum whose values name_of names (names "unknown" are not values).
template <typename Enum, typename NameOf>
nb::dict enum_table(NameOf name_of) {
  nb::dict out;
  for (int v = 0; v < 256; ++v) {
    std::string_view name = name_of(static_cast<Enum>(v));
    if (name != "unknown") out[nb::str(name.data(), name.size())] = v;
  }
  return out;
}

}  // namespace

void register_rules(nb::module_& m) {
  // ---- memory budget: jtree::MemoryBudget (options.h), one per load ----------------------
  nb::class_<jtree::MemoryBudget>(
      m, "MemoryBudget",
      "jtree::MemoryBudget: what one load may allocate for its caller (SECURITY.md, Limits).")
      .def(nb::init<uint64_t, uint64_t>(), nb::arg("max_leaf_bytes"), nb::arg("max_total_bytes"))
      .def(
          "try_reserve",
          [](jtree::MemoryBudget& b, nb::handle nbytes) -> std::optional<std::string> {
            // (More than 2^64 - 1 bytes is over every limit: saturated.)
            int overflow = 0;
            unsigned long long n = PyLong_AsUnsignedLongLong(nbytes.ptr());
            if (n == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
              PyErr_Clear();
              overflow = 1;
            }
            jtree::Status st = b.reserve(overflow ? UINT64_MAX : n, "");
            if (st.ok()) return std::nullopt;
            return st.message();
          },
          nb::arg("nbytes"),
          "Reserves nbytes before they are allocated: None, or why not (a message naming "
          "the size and the limit, max_leaf_bytes or max_total_bytes; nothing reserved).")
      .def(
          "try_reserve_many",
          [](jtree::MemoryBudget& b, nb::handle sizes) -> nb::object {
            // One native call for a whole load's allocations (a 20,000-leaf load made 20,000
            // try_reserve calls): reserved in order, as that many try_reserve calls would.
            nb::object seq = nb::steal(PySequence_Fast(sizes.ptr(), "try_reserve_many: a sequence"));
            if (!seq.is_valid()) throw nb::python_error();
            // (an exact list or tuple; items borrowed, and nothing below runs Python code)
            const bool list = PyList_CheckExact(seq.ptr());
            const Py_ssize_t n =
                list ? NB_LIST_GET_SIZE(seq.ptr()) : NB_TUPLE_GET_SIZE(seq.ptr());
            for (Py_ssize_t i = 0; i < n; ++i) {
              PyObject* item =
                  list ? NB_LIST_GET_ITEM(seq.ptr(), i) : NB_TUPLE_GET_ITEM(seq.ptr(), i);
              unsigned long long v = PyLong_AsUnsignedLongLong(item);
              if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
                if (!PyErr_ExceptionMatches(PyExc_OverflowError)) throw nb::python_error();
                PyErr_Clear();  // (more than 2^64 - 1 bytes, or negative: over every limit)
                v = UINT64_MAX;
              }
              jtree::Status st = b.reserve(v, "");
              if (!st.ok()) return nb::make_tuple(static_cast<int64_t>(i), st.message());
            }
            return nb::none();
          },
          nb::arg("sizes"),
          "try_reserve for each of sizes in order, up to the first that does not fit: None "
          "when all were reserved, else (its index, why not); the ones before it stay "
          "reserved, it and the ones after it are not.")
      .def_prop_ro("reserved", &jtree::MemoryBudget::reserved, "Bytes reserved so far.");

  // ---- read settings: ReadOptions::check ------------------------------------------------
  m.def(
      "check_read_options",
      [](int threads, const std::string& name) {
        jtree::ReadOptions o;
        o.threads = threads;
        check(o.check().with_prefix(name));
      },
      nb::arg("threads"), nb::arg("name"),
      "Raises InvalidArgumentError for read settings the library refuses (jtree::ReadOptions::"
      "check): jtree.open checks them at once rather than at its first read.");

  // ---- key paths: jtree/key_path.h -----------------------------------------------------
  m.def(
      "key_path",
      [](nb::handle parts) {
        std::string out;
        bool first = true;
        for (nb::handle p : parts) {
          if (PyUnicode_Check(p.ptr())) {
            const std::string s = str_bytes(p);
            jtree::append_path_component(out, jtree::KeyView{jtree::Key::Kind::kStr, s, 0}, 0, first);
          } else if (PyLong_Check(p.ptr()) && !PyBool_Check(p.ptr())) {
            int overflow = 0;
            long long v = PyLong_AsLongLongAndOverflow(p.ptr(), &overflow);
            if (v == -1 && PyErr_Occurred()) throw nb::python_error();
            if (overflow == 0) {
              jtree::append_path_component(out, jtree::KeyView{jtree::Key::Kind::kInt, {}, v}, 0, first);
            } else {  // (no key of a file; a save refuses it, naming this path)
              const std::string s = str_bytes(nb::str(p));
              jtree::append_path_component(out, jtree::KeyView{jtree::Key::Kind::kStr, s, 0}, 0, first);
            }
          } else {
            throw_type_error("key_path: parts are str or int");
          }
          first = false;
        }
        return bytes_str(out);
      },
      nb::arg("parts"), "The key path of a sequence of keys (str) and positions or int keys.");
  // Key-path patterns (jtree/key_path_pattern.h): keys= selections ask it which paths they
  // select (jtree._keypath.PatternSet); the native load of a selection uses the same object.
  nb::class_<jtree::KeyPathPatterns>(m, "KeyPathPatterns",
                                     "Key-path patterns (jtree::KeyPathPatterns).")
      .def(
          "__init__",
          [](jtree::KeyPathPatterns* self, nb::handle patterns) {
            std::vector<std::string> texts;
            for (nb::handle p : patterns) {
              if (!PyUnicode_Check(p.ptr())) throw_type_error("KeyPathPatterns: str patterns");
              texts.push_back(str_bytes(p));
            }
            new (self) jtree::KeyPathPatterns(value_or_raise(jtree::KeyPathPatterns::make(texts)));
          },
          nb::arg("patterns"), "InvalidArgumentError for a pattern ending with '\\'.")
      .def("__len__", &jtree::KeyPathPatterns::size)
      .def(
          "selects", [](const jtree::KeyPathPatterns& k, nb::handle parts) {
            return k.selects(path_parts(parts));
          },
          nb::arg("parts"), "Whether a pattern matches the path `parts` (str) or a prefix.")
      .def(
          "matching",
          [](const jtree::KeyPathPatterns& k, nb::handle parts) {
            const std::vector<std::string> path = path_parts(parts);
            nb::list out;
            for (size_t i = 0; i < k.size(); ++i) {
              if (k.selects(i, path)) out.append(i);
            }
            return out;
          },
          nb::arg("parts"), "The numbers of the patterns that select the path `parts`.")
      .def(
          "may_select_below",
          [](const jtree::KeyPathPatterns& k, nb::handle parts) {
            return k.may_select_below(path_parts(parts));
          },
          nb::arg("parts"), "False when no pattern can select anything at or below `parts`.")
      .def("may_walk_everything", &jtree::KeyPathPatterns::may_walk_everything,
           "Whether a pattern is '' or has a wildcard in its first component.");
  m.def("glob_match", [](nb::handle glob, nb::handle text) {
        return jtree::glob_match(str_bytes(glob), str_bytes(text));
      }, nb::arg("glob"), nb::arg("text"), "One component matched as fnmatch.fnmatchcase does.");
  m.def(
      "split_key_path",
      [](nb::handle path) {
        if (!PyUnicode_Check(path.ptr())) throw_type_error("split_key_path: a str");
        auto parts = jtree::split_path(str_bytes(path));
        if (!parts.ok()) raise_status(parts.status());
        nb::list out;
        for (const std::string& p : *parts) out.append(bytes_str(p));
        return out;
      },
      nb::arg("path"),
      "The unescaped components of a key path; InvalidArgumentError for a trailing '\\'.");

  m.def(
      "nearest_paths",
      [](nb::handle path, nb::handle paths, size_t n) {
        std::vector<std::string> all;
        for (nb::handle p : paths) all.push_back(str_bytes(p));
        const std::string want = str_bytes(path);
        std::vector<std::string> got;
        {
          nb::gil_scoped_release release;
          got = jtree::nearest_paths(want, all, n);
        }
        nb::list out;
        for (const std::string& p : got) out.append(bytes_str(p));
        return out;
      },
      nb::arg("path"), nb::arg("paths"), nb::arg("n") = 3,
      "jtree::nearest_paths: the (at most) n of `paths` most like `path`, best first.");

  // ---- basic indexing: jtree/slice.h -------------------------------------------------------
  m.def(
      "resolve_index",
      [](nb::handle items, nb::handle shape) -> nb::object {
        std::vector<jtree::IndexItem> index;
        for (nb::handle it : items) {
          nb::tuple t = nb::borrow<nb::tuple>(it);
          jtree::IndexItem item;
          item.kind = static_cast<jtree::IndexItem::Kind>(nb::cast<int>(t[0]));
          item.start = optional_int(t[1]);
          item.stop = optional_int(t[2]);
          item.step = optional_int(t[3]);
          index.push_back(item);
        }
        jtree::Shape s;
        for (nb::handle d : shape) s.push_back(nb::cast<uint64_t>(d));
        auto r = jtree::resolve_index(index, s);
        if (!r.ok()) return nb::str(r.status().message().c_str());
        nb::list axes;
        for (const jtree::IndexAxis& a : r->axes) {
          axes.append(nb::make_tuple(static_cast<int>(a.kind), a.offset, a.step, a.count));
        }
        return nb::make_tuple(shape_tuple(r->box.begin), shape_tuple(r->box.end), axes);
      },
      nb::arg("items"), nb::arg("shape"),
      "jtree::resolve_index: items are (kind, start, stop, step) with IndexItem::Kind numbers "
      "(INDEX_INT, INDEX_SLICE, INDEX_ELLIPSIS, INDEX_NEWAXIS) and None for absent values "
      "(ints saturate to int64). Gives (begin, end, [(kind, offset, step, count)] per result "
      "axis), or a str saying why the index is refused.");
  m.attr("INDEX_INT") = static_cast<int>(jtree::IndexItem::Kind::kInt);
  m.attr("INDEX_SLICE") = static_cast<int>(jtree::IndexItem::Kind::kSlice);
  m.attr("INDEX_ELLIPSIS") = static_cast<int>(jtree::IndexItem::Kind::kEllipsis);
  m.attr("INDEX_NEWAXIS") = static_cast<int>(jtree::IndexItem::Kind::kNewAxis);

  // ---- local path vs URL: jtree::is_local_path (io.h) ---------------------------------------
  m.def(
      "local_path",
      [](const std::string& path_or_url) -> std::optional<std::string> {
        std::string local;
        if (!jtree::is_local_path(path_or_url, &local)) return std::nullopt;
        return local;
      },
      nb::arg("path_or_url"),
      "The file system path that path_or_url names (file:// URLs decoded), or None for a URL "
      "of another scheme (http(s)://, s3://...). 'runs/a://b' is a path.");

  // ---- the numbers of the node/leaf tuples (docs/architecture.md, section 5) -----------------
  m.attr("NODE_KINDS") = enum_table<jtree::NodeKind>(jtree::node_kind_name);
  m.attr("LEAF_KINDS") = enum_table<jtree::LeafKind>(jtree::leaf_kind_name);
  m.attr("CODECS") = enum_table<jtree::Codec>(jtree::codec_name);
  m.attr("FILTERS") = enum_table<jtree::Filter>(jtree::filter_name);
  m.attr("LEAF_FLAG_SCALAR") = jtree::kLeafFlagScalar;
  m.attr("STORAGE_CHUNKED") = static_cast<int>(jtree::Storage::kChunked);
}

}  // namespace jtpy
