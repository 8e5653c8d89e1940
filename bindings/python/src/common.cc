#include "common.h"

#include <vector>

#include "jtree/key_path.h"

namespace jtpy {
namespace {

// jtree's exception classes, installed by set_error_classes. Strong references kept for the
// life of the process: deliberately never released (the module may be torn down after the
// interpreter's types).
struct ErrorClasses {
  std::vector<PyObject*> by_code;
  PyObject* type_error = nullptr;
  PyObject* index_error = nullptr;
};
ErrorClasses& error_classes() {
  static auto* c = new ErrorClasses();
  return *c;
}

// A new strong reference to `c` when it is an exception class; TypeError otherwise (raised
// before any jtree class exists, so a builtin one).
PyObject* exception_class(nb::handle c) {
  if (!PyType_Check(c.ptr()) ||
      !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(c.ptr()),
                        reinterpret_cast<PyTypeObject*>(PyExc_Exception))) {
    throw nb::type_error("_set_error_classes: expected exception classes");
  }
  return c.inc_ref().ptr();
}

// `key_path` of `reader`'s leaf named at the start of `rest` ("<key path>: ..."): the first
// ": " that ends the name of a leaf of the file (a key may itself hold ": ").
std::optional<std::string> leaf_named_at(const jtree::Reader& reader, std::string_view rest) {
  for (size_t end = rest.find(": "); end != std::string_view::npos;
       end = rest.find(": ", end + 1)) {
    const std::string_view candidate = rest.substr(0, end);
    if (reader.find_leaf(candidate).ok()) return std::string(candidate);
  }
  return std::nullopt;
}

// A key or position as a key path component: a str or an int as it is; anything else (a key
// of a type a save refuses) as str() writes it, so that the error can name it.
void append_part(std::string& path, nb::handle key, bool first) {
  if (PyLong_Check(key.ptr()) && !PyBool_Check(key.ptr())) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(key.ptr(), &overflow);
    if (overflow == 0 && !(v == -1 && PyErr_Occurred())) {
      jtree::append_path_component(path, jtree::KeyView{jtree::Key::Kind::kInt, {}, v}, 0, first);
      return;
    }
    PyErr_Clear();
  }
  nb::str text = PyUnicode_Check(key.ptr()) ? nb::borrow<nb::str>(key) : nb::str(key);
  Py_ssize_t n = 0;
  const char* p = PyUnicode_AsUTF8AndSize(text.ptr(), &n);
  if (p == nullptr) {  // (lone surrogates: named by their repr)
    PyErr_Clear();
    text = nb::repr(key);
    p = PyUnicode_AsUTF8AndSize(text.ptr(), &n);
    if (p == nullptr) throw nb::python_error();
  }
  const std::string s(p, static_cast<size_t>(n));
  jtree::append_path_component(path, jtree::KeyView{jtree::Key::Kind::kStr, s, 0}, 0, first);
}

}  // namespace

void set_error_classes(nb::handle by_code, nb::handle type_error, nb::handle index_error) {
  ErrorClasses c;
  for (nb::handle h : by_code) c.by_code.push_back(exception_class(h));
  c.type_error = exception_class(type_error);
  c.index_error = exception_class(index_error);
  ErrorClasses& old = error_classes();
  for (PyObject* o : old.by_code) Py_DECREF(o);
  Py_XDECREF(old.type_error);
  Py_XDECREF(old.index_error);
  old = std::move(c);
}

nb::handle error_class_of(jtree::StatusCode code) {
  const auto i = static_cast<size_t>(code);
  const auto& v = error_classes().by_code;
  return i < v.size() ? v[i] : PyExc_RuntimeError;
}

nb::handle error_base_class() {
  const auto& v = error_classes().by_code;
  return v.empty() ? nb::handle() : nb::handle(v[0]);
}

ErrorPlace place_in(const jtree::Reader& reader, const jtree::Status& st) {
  ErrorPlace place{reader.name(), std::nullopt};
  const std::string lead = reader.name() + ": leaf ";
  const std::string& m = st.message();
  if (m.compare(0, lead.size(), lead) == 0) {
    place.key_path = leaf_named_at(reader, std::string_view(m).substr(lead.size()));
  }
  return place;
}

void raise_error(nb::handle cls, const std::string& message, const ErrorPlace& place) {
  const nb::handle base = error_base_class();
  const bool is_jtree_class =
      base.ptr() != nullptr && PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cls.ptr()),
                                                reinterpret_cast<PyTypeObject*>(base.ptr()));
  nb::object exc;
  if (is_jtree_class) {
    nb::object file = place.file ? nb::object(decode_utf8(*place.file)) : nb::none();
    nb::object key_path = place.key_path ? nb::object(decode_utf8(*place.key_path)) : nb::none();
    exc = cls(decode_utf8(message), nb::arg("file") = file, nb::arg("key_path") = key_path);
  } else {
    exc = cls(decode_utf8(message));  // (a builtin class: before jtree's are installed)
  }
  PyErr_SetObject(cls.ptr(), exc.ptr());
  throw nb::python_error();
}

std::string key_path_of(nb::handle parts) {
  std::string path;
  bool first = true;
  for (nb::handle part : parts) {
    append_part(path, part, first);
    first = false;
  }
  return path;
}

void raise_error_at(nb::handle cls, const ErrorPlace& place, const std::string& message) {
  std::string where = place.file ? *place.file : std::string();
  if (place.key_path) {
    if (!where.empty()) where += ": ";
    where += place.key_path->empty() ? "at the root" : "at '" + *place.key_path + "'";
  }
  raise_error(cls, where.empty() ? message : where + ": " + message, place);
}

void raise_status(const jtree::Status& st, const ErrorPlace& place) {
  raise_error(error_class_of(st.code()), st.message(), place);
}

namespace {

// The class a misuse of the module raises: `installed`, or `builtin` before jtree's classes
// are installed.
nb::handle misuse_class(PyObject* installed, PyObject* builtin) {
  return installed != nullptr ? installed : builtin;
}

}  // namespace

void throw_value_error(const std::string& m) {
  const bool installed = !error_classes().by_code.empty();
  raise_error(installed ? error_class_of(jtree::StatusCode::kInvalidArgument)
                        : nb::handle(PyExc_ValueError),
              m, {});
}

void throw_type_error(const std::string& m) {
  raise_error(misuse_class(error_classes().type_error, PyExc_TypeError), m, {});
}

void throw_index_error(const std::string& m) {
  raise_error(misuse_class(error_classes().index_error, PyExc_IndexError), m, {});
}

nb::str decode_utf8(std::string_view s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()),
                                     "surrogateescape");
  if (o == nullptr) throw nb::python_error();
  return nb::steal<nb::str>(o);
}

jtree::Key key_from_py(nb::handle key) {
  if (key.is_none()) return jtree::Key{};
  if (PyUnicode_Check(key.ptr())) {
    Py_ssize_t n = 0;
    const char* p = PyUnicode_AsUTF8AndSize(key.ptr(), &n);
    if (p == nullptr) throw nb::python_error();
    return jtree::Key::string(std::string(p, static_cast<size_t>(n)));
  }
  if (PyLong_Check(key.ptr()) && !PyBool_Check(key.ptr())) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(key.ptr(), &overflow);
    if (overflow != 0) throw_value_error("dict key outside the int64 range");
    if (v == -1 && PyErr_Occurred()) throw nb::python_error();
    return jtree::Key::integer(v);
  }
  throw_type_error("keys must be None, str or int");
}

nb::object key_to_py(const jtree::KeyView& key) {
  switch (key.kind) {
    case jtree::Key::Kind::kStr:
      return decode_utf8(key.str);
    case jtree::Key::Kind::kInt:
      return nb::int_(key.i);
    default:
      return nb::none();
  }
}

nb::object leaf_scalar_value(const jtree::Leaf& l, bool big_int_as_int) {
  switch (l.kind) {
    case jtree::LeafKind::kInt: {
      if (l.big_int.empty()) return nb::int_(l.int_value);
      nb::bytes b(l.big_int.data(), l.big_int.size());
      if (!big_int_as_int) return b;
      nb::object from_bytes =
          nb::borrow(reinterpret_cast<PyObject*>(&PyLong_Type)).attr("from_bytes");
      return from_bytes(b, "little", nb::arg("signed") = true);
    }
    case jtree::LeafKind::kFloat: return nb::float_(l.real);
    case jtree::LeafKind::kBool: return nb::bool_(l.bool_value);
    case jtree::LeafKind::kComplex: {
      PyObject* c = PyComplex_FromDoubles(l.real, l.imag);
      if (c == nullptr) throw nb::python_error();
      return nb::steal(c);
    }
    default: return nb::none();
  }
}

nb::tuple shape_tuple(const jtree::Shape& s) {
  PyObject* t = PyTuple_New(static_cast<Py_ssize_t>(s.size()));
  if (t == nullptr) throw nb::python_error();
  nb::tuple out = nb::steal<nb::tuple>(t);
  for (size_t i = 0; i < s.size(); ++i) {
    PyObject* e = PyLong_FromUnsignedLongLong(s[i]);
    if (e == nullptr) throw nb::python_error();
    NB_TUPLE_SET_ITEM(t, static_cast<Py_ssize_t>(i), e);  // (steals e)
  }
  return out;
}

std::string bytes_to_string(nb::handle b) {
  char* p = nullptr;
  Py_ssize_t n = 0;
  if (PyBytes_AsStringAndSize(b.ptr(), &p, &n) != 0) throw nb::python_error();
  return std::string(p, static_cast<size_t>(n));
}

}  // namespace jtpy
