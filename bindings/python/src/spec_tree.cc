// LeafSpecs, made here for every caller: the one rule of what a leaf's LeafSpec is
// (LeafSpecMaker), used for a file's leaves (load_pytreedef's structure, built in one native
// pass over the Reader's nodes: SpecBuilder; FileLeaf.spec) and for a tree about to be saved
// (a nonblocking_save's structure), the last two through the batched _jtree.leaf_specs.
//
// The Python walk over the Reader's tuples cost a tuple per node and per leaf, then a Python
// frame per node and a Python call per LeafSpec: about 1.5 us a leaf. Here the containers and
// the LeafSpecs are made directly; only containers that need Python's registry or namedtuple
// classes (named tuples, OrderedDict, custom nodes) call back into Python.
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "common.h"
#include "tree_assembly.h"

namespace jtpy {
namespace {

// The product of the dimensions times the item size, exact (a Python int when over 64 bits).
nb::object byte_count(const jtree::Shape& shape, uint64_t item) {
  unsigned __int128 n = item;
  for (uint64_t d : shape) {
    n *= d;
    if (n > std::numeric_limits<uint64_t>::max()) {
      nb::object big = nb::int_(item);
      for (uint64_t e : shape) big = big * nb::int_(e);
      return big;
    }
  }
  return nb::int_(static_cast<uint64_t>(n));
}

// The LeafSpec of a leaf: `object.__new__(spec_cls)` with its six fields put in its __dict__
// at once (a frozen dataclass's __init__ costs an object.__setattr__ per field). An array
// leaf has its shape, spec dtype and scalar flag; any other leaf is its kind's name with
// shape (), no dtype and, for a custom leaf, its registered name. nbytes is given.
class LeafSpecMaker {
 public:
  // (spec dtype, item size) of a dtype code; nullopt when the code names no dtype.
  using DTypeInfo = std::optional<std::pair<nb::object, uint64_t>>;

  // (Cheap to make: _jtree.leaf_specs makes one per call, FileLeaf.spec one per leaf.)
  LeafSpecMaker(nb::handle spec_cls, nb::handle kind_names, nb::handle dtype_of)
      : spec_cls_(spec_cls), kind_names_(kind_names), dtype_of_(dtype_of) {}

  // `dtype_of(code)`, asked once per code (a file or a tree has few dtypes: a short list).
  DTypeInfo dtype(jtree::DType code) {
    for (const auto& [c, info] : dtypes_) {
      if (c == code) return info;
    }
    DTypeInfo info;
    nb::object d = dtype_of_(static_cast<int>(code));
    if (!d.is_none()) info.emplace(d[0], nb::cast<uint64_t>(d[1]));
    dtypes_.emplace_back(code, info);
    return info;
  }

  // `shape()` and `type_name()` make the shape tuple and the custom leaf's name, asked only
  // when the spec has them.
  template <class ShapeFn, class TypeNameFn>
  nb::object make(jtree::LeafKind kind, uint32_t flags, jtree::DType dtype_code,
                  const ShapeFn& shape, nb::handle nbytes, const TypeNameFn& type_name) {
    const Names& k = names();
    const bool array = kind == jtree::LeafKind::kArray;
    PyObject* cls = spec_cls_.ptr();
    nb::object s = nb::steal(PyObject_Vectorcall(k.object_new, &cls, 1, nullptr));
    if (!s.is_valid()) throw nb::python_error();
    PyObject* d = PyObject_GenericGetDict(s.ptr(), nullptr);
    if (d == nullptr) throw nb::python_error();
    nb::dict fields = nb::steal<nb::dict>(d);
    nb::object spec_dtype = nb::none();
    if (array) {
      const DTypeInfo dt = dtype(dtype_code);
      if (dt) spec_dtype = dt->first;
    }
    set(fields, k.kind, array ? nb::borrow(k.array) : kind_name(kind));
    set(fields, k.shape, array ? nb::object(shape()) : nb::object(nb::tuple()));
    set(fields, k.dtype, spec_dtype);
    set(fields, k.nbytes, nbytes);
    set(fields, k.scalar, nb::bool_(array && (flags & jtree::kLeafFlagScalar) != 0));
    set(fields, k.type_name,
        kind == jtree::LeafKind::kCustomLeaf ? nb::object(type_name()) : nb::none());
    return s;
  }

 private:
  // LeafSpec's field names (interned) and object.__new__, made once and kept for the life of
  // the process (as the interpreter keeps interned strings).
  struct Names {
    PyObject *kind, *shape, *dtype, *nbytes, *scalar, *type_name, *array, *object_new;
  };
  static const Names& names() {
    static const Names n = [] {
      auto intern = [](const char* s) {
        PyObject* o = PyUnicode_InternFromString(s);
        if (o == nullptr) throw nb::python_error();
        return o;
      };
      PyObject* object_new =
          PyObject_GetAttrString(reinterpret_cast<PyObject*>(&PyBaseObject_Type), "__new__");
      if (object_new == nullptr) throw nb::python_error();
      return Names{intern("kind"),   intern("shape"),     intern("dtype"), intern("nbytes"),
                   intern("scalar"), intern("type_name"), intern("array"), object_new};
    }();
    return n;
  }

  static void set(const nb::dict& fields, PyObject* name, nb::handle value) {
    if (PyDict_SetItem(fields.ptr(), name, value.ptr()) != 0) throw nb::python_error();
  }

  nb::object kind_name(jtree::LeafKind kind) {
    for (const auto& [k, name] : kind_names_cache_) {
      if (k == kind) return name;
    }
    nb::int_ code(static_cast<int>(kind));
    PyObject* found = PyObject_GetItem(kind_names_.ptr(), code.ptr());
    if (found == nullptr) {
      PyErr_Clear();
      throw_value_error("LeafSpec of an unknown leaf kind " +
                        std::to_string(static_cast<int>(kind)));
    }
    nb::object name = nb::steal(found);
    kind_names_cache_.emplace_back(kind, name);
    return name;
  }

  nb::handle spec_cls_, kind_names_, dtype_of_;
  std::vector<std::pair<jtree::DType, DTypeInfo>> dtypes_;
  std::vector<std::pair<jtree::LeafKind, nb::object>> kind_names_cache_;
};

class SpecBuilder {
 public:
  SpecBuilder(const jtree::Reader& reader, nb::handle spec_cls, nb::handle kind_names,
              nb::handle dtype_of, nb::handle container)
      : r_(reader),
        container_(container),
        maker_(spec_cls, kind_names, dtype_of),
        specs_(reader.num_leaves()) {}

  nb::object build() {
    return assemble_tree(r_, container_, [this](uint32_t leaf) { return spec(leaf); });
  }

 private:
  // The LeafSpec of leaf `i`, made once (a leaf referred to twice is one spec). Its nbytes:
  // the payload's bytes in memory (a payload leaf is UInt8 of shape [n]), 0 for a scalar.
  nb::object spec(uint32_t i) {
    if (specs_[i].is_valid()) return specs_[i];
    const jtree::Leaf l = r_.decode_leaf(i);
    const LeafSpecMaker::DTypeInfo dt = maker_.dtype(l.dtype);
    nb::object nbytes = dt ? byte_count(l.shape, dt->second) : nb::int_(0);
    specs_[i] = maker_.make(
        l.kind, l.flags, l.dtype, [&] { return shape_tuple(l.shape); }, nbytes,
        [&] { return decode_utf8(l.type_name); });
    return specs_[i];
  }

  const jtree::Reader& r_;
  nb::handle container_;
  LeafSpecMaker maker_;
  std::vector<nb::object> specs_;
};

}  // namespace

nb::object spec_tree(const jtree::Reader& reader, nb::handle spec_cls, nb::handle kind_names,
                     nb::handle dtype_of, nb::handle container) {
  return SpecBuilder(reader, spec_cls, kind_names, dtype_of, container).build();
}

}  // namespace jtpy

namespace jtpy {
namespace {

// An int field of a leaf_specs row, checked to lie in [0, max].
uint32_t row_int(nb::handle v, uint32_t max, const char* what) {
  if (!PyLong_Check(v.ptr())) {
    throw_type_error(std::string("leaf_specs: ") + what + " must be an int");
  }
  const long long n = PyLong_AsLongLong(v.ptr());
  if (n == -1 && PyErr_Occurred()) throw nb::python_error();
  if (n < 0 || static_cast<unsigned long long>(n) > max) {
    throw_value_error(std::string("leaf_specs: ") + what + " out of range");
  }
  return static_cast<uint32_t>(n);
}

}  // namespace

nb::list leaf_specs(nb::handle rows, nb::handle spec_cls, nb::handle kind_names,
                    nb::handle dtype_of) {
  LeafSpecMaker maker(spec_cls, kind_names, dtype_of);
  nb::list out;
  for (nb::handle row : rows) {
    if (!PyTuple_Check(row.ptr()) || NB_TUPLE_GET_SIZE(row.ptr()) != 6) {
      throw_type_error(
          "leaf_specs: each row must be a tuple (kind, flags, dtype, shape, nbytes, type_name)");
    }
    nb::handle kind = NB_TUPLE_GET_ITEM(row.ptr(), 0), flags = NB_TUPLE_GET_ITEM(row.ptr(), 1),
               dtype = NB_TUPLE_GET_ITEM(row.ptr(), 2), shape = NB_TUPLE_GET_ITEM(row.ptr(), 3),
               nbytes = NB_TUPLE_GET_ITEM(row.ptr(), 4), type_name = NB_TUPLE_GET_ITEM(row.ptr(), 5);
    const auto code = dtype.is_none() ? jtree::DType::kInvalid
                                      : static_cast<jtree::DType>(row_int(dtype, 255, "dtype"));
    out.append(maker.make(
        static_cast<jtree::LeafKind>(row_int(kind, 255, "kind")),
        row_int(flags, UINT32_MAX, "flags"), code,
        [&] {
          if (PyTuple_CheckExact(shape.ptr())) return nb::borrow<nb::tuple>(shape);
          PyObject* t = PySequence_Tuple(shape.ptr());
          if (t == nullptr) throw nb::python_error();
          return nb::steal<nb::tuple>(t);
        },
        nbytes, [&] { return nb::borrow(type_name); }));
  }
  return out;
}

void register_specs(nb::module_& m) {
  m.def("leaf_specs", &leaf_specs, nb::arg("rows"), nb::arg("spec_cls"), nb::arg("kind_names"),
        nb::arg("dtype_of"),
        "The LeafSpec of each row (kind, flags, dtype code | None, shape, nbytes, type_name):\n"
        "the rule load_pytreedef's structure follows, for FileLeaf.spec and for the structure\n"
        "of a tree about to be saved (one call for all its leaves). ``kind_names[kind]`` names\n"
        "a leaf kind, ``dtype_of(code)`` gives (spec dtype, item size) or None.");
}

}  // namespace jtpy
