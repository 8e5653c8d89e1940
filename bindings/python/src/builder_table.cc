// jtree._jtree.Builder.build: a whole flattened tree in one call (builder.h, "the table").
//
// The Python layer used to drive the Builder with one or two calls per node (begin, array,
// end, ...): 40,000 calls into the module for a 20,000-leaf save, each paying nanobind's
// argument conversion. Now it hands over one list of op tuples and this file replays it into
// the jtree::TreeBuilder. Arrays with the buffer protocol (NumPy, the common case) are taken
// through it directly (a pointer, shape and strides, the buffer held until the Builder goes);
// other arrays (torch tensors, anything with __dlpack__) through nb::ndarray as before.
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "builder.h"

namespace jtpy {
namespace {

// Element `i` of an op tuple (borrowed); the op's arity was checked by the caller.
nb::handle at(PyObject* op, Py_ssize_t i) { return nb::handle(NB_TUPLE_GET_ITEM(op, i)); }

int64_t as_int(nb::handle h) {
  const long long v = PyLong_AsLongLong(h.ptr());
  if (v == -1 && PyErr_Occurred()) throw nb::python_error();
  return v;
}

double as_double(nb::handle h) {
  const double v = PyFloat_AsDouble(h.ptr());
  if (v == -1.0 && PyErr_Occurred()) throw nb::python_error();
  return v;
}

std::optional<std::string> opt_str(nb::handle h) {
  if (h.is_none()) return std::nullopt;
  return nb::cast<std::string>(h);
}

std::optional<nb::bytes> opt_bytes(nb::handle h) {
  if (h.is_none()) return std::nullopt;
  return nb::cast<nb::bytes>(h);
}

// The number of elements of each op (its code first), indexed by TableOp.
constexpr Py_ssize_t kArity[] = {5, 1, 2, 3, 3, 3, 3, 5, 7, 6, 9, 3, 3};
constexpr const char* kOpNames[] = {"BEGIN", "END",      "NONE",     "INT",     "FLOAT",
                                    "BOOL",  "COMPLEX",  "PAYLOAD",  "ARRAY",   "DEFERRED",
                                    "SHARDED", "REUSE",  "TIED"};
static_assert(std::size(kArity) == static_cast<size_t>(TableOp::kCount));
static_assert(std::size(kOpNames) == static_cast<size_t>(TableOp::kCount));

}  // namespace

namespace {

// The same view of memory: shape and strides (the address, dtype and byte order are compared
// by the caller).
bool same_view(const Py_buffer& a, const Py_buffer& b) {
  if (a.ndim != b.ndim) return false;
  for (int i = 0; i < a.ndim; ++i) {
    if (a.shape[i] != b.shape[i] || a.strides[i] != b.strides[i]) return false;
  }
  return true;
}


// The key path of the node that op `index` of `table` writes (computed only for an error:
// the table keeps no paths): the parts of the containers open at it, then its own (its key,
// or its position in a list or tuple).
std::string table_key_path(PyObject* table, Py_ssize_t index) {
  struct Open {
    nb::object part;  // the container's own part (none for the root)
    Py_ssize_t children = 0;
  };
  std::vector<Open> stack;
  nb::object part;
  for (Py_ssize_t j = 0; j <= index; ++j) {
    PyObject* op = NB_LIST_GET_ITEM(table, j);
    const int64_t code = as_int(at(op, 0));
    if (code == static_cast<int64_t>(TableOp::kEnd)) {
      if (!stack.empty()) stack.pop_back();
      continue;
    }
    if (!stack.empty()) {
      Open& parent = stack.back();
      nb::handle key = NB_TUPLE_GET_SIZE(op) > 1 ? at(op, 1) : nb::none();
      part = key.is_none() ? nb::object(nb::int_(parent.children)) : nb::borrow(key);
      ++parent.children;
    }
    if (code == static_cast<int64_t>(TableOp::kBegin) && j < index) stack.push_back({part, 0});
  }
  nb::list parts;
  for (size_t k = 1; k < stack.size(); ++k) parts.append(stack[k].part);  // (not the root's)
  if (index > 0) parts.append(part);
  return key_path_of(parts);
}

// Raises a bad value the Builder met at op `index` (a TypeError, ValueError, OverflowError or
// UnicodeError, or a jtree error without a key path) again as a jtree error naming the file
// and the op's key path: InvalidArgumentError, or the jtree class it already had. Any other
// exception goes on as it is.
[[noreturn]] void raise_at_op(nb::python_error& e, PyObject* table, Py_ssize_t index,
                              const std::optional<std::string>& file) {
  const nb::handle base = error_base_class();
  if (base.ptr() == nullptr) throw;  // (jtree's classes not installed: nothing to map to)
  const bool jtree_error = e.matches(base);
  if (jtree_error && !e.value().attr("key_path").is_none()) throw;
  if (!jtree_error && !e.matches(PyExc_TypeError) && !e.matches(PyExc_ValueError) &&
      !e.matches(PyExc_OverflowError) && !e.matches(PyExc_UnicodeError)) {
    throw;
  }
  const nb::handle cls =
      jtree_error ? e.type() : error_class_of(jtree::StatusCode::kInvalidArgument);
  raise_error_at(cls, ErrorPlace{file, table_key_path(table, index)},
                 nb::cast<std::string>(nb::str(e.value())));
}
}  // namespace

uint32_t Builder::table_array(nb::handle key, nb::handle obj, int dtype_code, bool byteswap,
                              uint32_t flags, bool tie, int codec, std::optional<int> level) {
  if (!PyObject_CheckBuffer(obj.ptr())) {
    // torch tensors and other DLPack exporters: nanobind imports them (as Builder.array did).
    return array(key, nb::cast<AnyArray>(obj), dtype_code, byteswap, flags, {}, codec, level);
  }
  Py_buffer& v = buffers_.views.emplace_back();
  if (PyObject_GetBuffer(obj.ptr(), &v, PyBUF_STRIDES) != 0) {
    // An exporter that cannot describe itself with strides: let nanobind try.
    buffers_.views.pop_back();
    PyErr_Clear();
    return array(key, nb::cast<AnyArray>(obj), dtype_code, byteswap, flags, {}, codec, level);
  }
  // (Held from here on: released with the Builder, whatever happens next.)
  if (dtype_code < 0 || !jtree::dtype_known(static_cast<uint8_t>(dtype_code))) {
    throw_value_error("unknown jtree dtype code " + std::to_string(dtype_code));
  }
  const jtree::DType d = static_cast<jtree::DType>(dtype_code);
  const auto info = *jtree::dtype_info(d);
  if (static_cast<size_t>(v.itemsize) != info.item_size) {
    throw_value_error("array of " + std::to_string(v.itemsize) + "-byte elements for dtype " +
                      std::string(info.name) + " (" + std::to_string(info.item_size) +
                      " bytes)");
  }
  const auto address = reinterpret_cast<uintptr_t>(v.buf);
  if (tie) {
    auto [it, last] = ties_.equal_range(address);
    for (; it != last; ++it) {
      const TieEntry& e = it->second;
      if (e.dtype_code == dtype_code && e.byteswap == byteswap && same_view(*e.view, v)) {
        const uint32_t id = e.leaf;
        PyBuffer_Release(&v);  // the first one's view is held
        buffers_.views.pop_back();
        tied(key, id);
        return id;
      }
    }
  }
  std::vector<uint64_t> shape(static_cast<size_t>(v.ndim));
  std::vector<int64_t> strides(static_cast<size_t>(v.ndim));
  for (int i = 0; i < v.ndim; ++i) {
    shape[i] = static_cast<uint64_t>(v.shape[i]);
    strides[i] = static_cast<int64_t>(v.strides[i]);
  }
  auto in = std::make_shared<jtree::LeafInput>();
  in->source = jtree::ArrayView(v.buf, std::move(strides), byteswap);
  const uint32_t id =
      add(key, chunked_array(flags, d, std::move(shape), std::move(in), {}, codec, level));
  if (tie) ties_.emplace(address, TieEntry{&v, dtype_code, byteswap, id});
  return id;
}

void Builder::build(nb::handle table, int codec, std::optional<int> level,
                    nb::handle metadata, std::optional<std::string> file) {
  if (built_) throw_value_error("this Builder already holds a tree");
  built_ = true;
  if (!PyList_Check(table.ptr())) throw_type_error("build(): the table is a list of op tuples");
  const Py_ssize_t n = NB_LIST_GET_SIZE(table.ptr());
  // Leaf id of each leaf op, for TIED ops (which name the op of the leaf they share).
  std::vector<uint32_t> ids(static_cast<size_t>(n), UINT32_MAX);
  for (Py_ssize_t i = 0; i < n; ++i) {
    failed_op_ = i;
    try {
      ids[static_cast<size_t>(i)] = build_op(table.ptr(), i, ids, codec, level);
    } catch (nb::python_error& e) {
      raise_at_op(e, table.ptr(), i, file);
    }
  }
  failed_op_ = -1;
  add_metadata(metadata);
}

uint32_t Builder::build_op(PyObject* table, Py_ssize_t i, const std::vector<uint32_t>& ids,
                           int codec, std::optional<int> level) {
  constexpr uint32_t kNoLeaf = UINT32_MAX;
  {
    PyObject* op = NB_LIST_GET_ITEM(table, i);
    if (!PyTuple_Check(op) || NB_TUPLE_GET_SIZE(op) < 1) {
      throw_type_error("build(): op " + std::to_string(i) + " is not a tuple");
    }
    const int64_t code = as_int(at(op, 0));
    if (code < 0 || code >= static_cast<int64_t>(TableOp::kCount)) {
      throw_value_error("build(): unknown op code " + std::to_string(code));
    }
    if (NB_TUPLE_GET_SIZE(op) != kArity[code]) {
      throw_value_error(std::string("build(): a ") + kOpNames[code] + " op has " +
                        std::to_string(kArity[code]) + " elements");
    }
    uint32_t id = kNoLeaf;
    switch (static_cast<TableOp>(code)) {
      case TableOp::kBegin:
        begin(static_cast<int>(as_int(at(op, 2))), at(op, 1), opt_str(at(op, 3)),
              opt_bytes(at(op, 4)));
        break;
      case TableOp::kEnd:
        end();
        break;
      case TableOp::kNone:
        none(at(op, 1));
        break;
      case TableOp::kInt: {
        nb::handle v = at(op, 2);
        if (!PyLong_Check(v.ptr())) throw_type_error("an int leaf's value is not an int");
        int overflow = 0;
        const long long x = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
        if (overflow == 0) {
          if (x == -1 && PyErr_Occurred()) throw nb::python_error();
          id = int_value(at(op, 1), x);
        } else {
          // Beyond int64: two's complement little-endian, one sign bit to spare.
          const auto bits = nb::cast<int64_t>(v.attr("bit_length")());
          nb::object b = v.attr("to_bytes")((bits + 8) / 8, "little", nb::arg("signed") = true);
          id = big_int(at(op, 1), nb::borrow<nb::bytes>(b));
        }
        break;
      }
      case TableOp::kFloat:
        id = float_value(at(op, 1), as_double(at(op, 2)));
        break;
      case TableOp::kBool:
        id = bool_value(at(op, 1), PyObject_IsTrue(at(op, 2).ptr()) == 1);
        break;
      case TableOp::kComplex: {
        // (The Python layer emits this op for a value of type complex only.)
        nb::handle v = at(op, 2);
        if (!PyComplex_Check(v.ptr())) throw_type_error("a complex leaf's value is not a complex");
        id = complex_value(at(op, 1), PyComplex_RealAsDouble(v.ptr()),
                           PyComplex_ImagAsDouble(v.ptr()));
        break;
      }
      case TableOp::kPayload:
        id = payload(at(op, 1), static_cast<int>(as_int(at(op, 2))),
                     nb::cast<nb::bytes>(at(op, 3)), opt_str(at(op, 4)));
        break;
      case TableOp::kArray: {
        // (a tied one is a leaf op too: a later TIED may name it)
        id = table_array(at(op, 1), at(op, 2), static_cast<int>(as_int(at(op, 3))),
                         PyObject_IsTrue(at(op, 4).ptr()) == 1,
                         static_cast<uint32_t>(as_int(at(op, 5))),
                         PyObject_IsTrue(at(op, 6).ptr()) == 1, codec, level);
        break;
      }
      case TableOp::kDeferred:
        id = deferred(at(op, 1), static_cast<int>(as_int(at(op, 2))),
                      nb::cast<std::vector<uint64_t>>(at(op, 3)), nb::borrow(at(op, 4)),
                      static_cast<uint32_t>(as_int(at(op, 5))), {}, codec, level);
        break;
      case TableOp::kSharded:
        id = sharded(at(op, 1), static_cast<int>(as_int(at(op, 2))),
                     nb::cast<std::vector<uint64_t>>(at(op, 3)), nb::cast<nb::list>(at(op, 4)),
                     static_cast<uint32_t>(as_int(at(op, 5))), {}, codec, level,
                     nb::cast<std::vector<uint64_t>>(at(op, 6)),
                     PyObject_IsTrue(at(op, 7).ptr()) == 1,
                     nb::cast<std::vector<std::pair<std::vector<uint64_t>,
                                                    std::vector<uint64_t>>>>(at(op, 8)));
        break;
      case TableOp::kReuse:
        id = reuse(at(op, 1), static_cast<uint32_t>(as_int(at(op, 2))));
        break;
      case TableOp::kTied: {
        const int64_t of = as_int(at(op, 2));
        if (of < 0 || of >= i || ids[static_cast<size_t>(of)] == kNoLeaf) {
          throw_value_error("build(): a TIED op names op " + std::to_string(of) +
                            ", which is no earlier leaf");
        }
        id = ids[static_cast<size_t>(of)];
        tied(at(op, 1), id);
        break;
      }
      case TableOp::kCount:
        break;
    }
    return id;
  }
}

void Builder::add_metadata(nb::handle metadata) {
  if (!metadata.is_none()) {
    for (auto [k, v] : nb::cast<nb::dict>(metadata)) {
      if (PyUnicode_Check(v.ptr())) {  // (text: marked so, and given back as str)
        b_.text_metadata(nb::cast<std::string>(k), nb::cast<std::string>(v));
      } else {
        b_.metadata(nb::cast<std::string>(k), bytes_to_string(v));
      }
    }
  }
}

void register_builder_table(nb::class_<Builder>& cls) {
  nb::dict ops;
  for (int i = 0; i < static_cast<int>(TableOp::kCount); ++i) ops[kOpNames[i]] = i;
  cls.attr("OPS") = ops;
  cls.def("build", &Builder::build, nb::arg("table"), nb::arg("codec") = -1,
          nb::arg("level").none() = nb::none(), nb::arg("metadata").none() = nb::none(),
          nb::arg("file").none() = nb::none(),
          "Builds the whole tree from `table`, a list of op tuples in preorder (Builder.OPS "
          "names the codes; python/jtree/_save.py's Emitter writes them):\n"
          "  (BEGIN, key, node_kind, type_name, aux), (END,), (NONE, key),\n"
          "  (INT, key, int), (FLOAT, key, float), (BOOL, key, bool), (COMPLEX, key, complex),\n"
          "  (PAYLOAD, key, leaf_kind, bytes, type_name),\n"
          "  (ARRAY, key, array, dtype, byteswap, flags, tie),\n"
          "  (DEFERRED, key, dtype, shape, fetch, flags),\n"
          "  (SHARDED, key, dtype, shape, pieces, flags, shard_shape, segment, blocks),\n"
          "  (REUSE, key, old_leaf), (TIED, key, op_index_of_an_earlier_leaf_op).\n"
          "ARRAY with tie=True is stored once with any earlier tie=True ARRAY of the same "
          "memory, dtype, byte order, shape and strides. `metadata`: {str: bytes or str (text)}. Arrays are "
          "read later, in place, by the writer; the Builder keeps them alive. A value it cannot "
          "take raises InvalidArgumentError (or the jtree error it met) naming `file` and the "
          "op's key path, with .file and .key_path set; `failed_op` is the index of the op that "
          "raised. Called once per Builder.")
      .def_prop_ro("failed_op", [](const Builder& b) { return b.failed_op(); },
                   "Index of the op build() failed on, or -1.");
}

}  // namespace jtpy
