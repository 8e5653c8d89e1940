#include "common.h"

#include <vector>

namespace jtpy {
namespace {

// Strong references to the exception classes, kept for the life of the process: they are
// deliberately never released (the module may be torn down after the interpreter's types).
std::vector<PyObject*>& error_classes() {
  static auto* v = new std::vector<PyObject*>();
  return *v;
}

}  // namespace

void set_error_classes(nb::handle classes) {
  std::vector<PyObject*> v;
  for (nb::handle c : classes) {
    auto* type = reinterpret_cast<PyTypeObject*>(c.ptr());
    if (!PyType_Check(c.ptr()) ||
        !PyType_IsSubtype(type, reinterpret_cast<PyTypeObject*>(PyExc_Exception))) {
      throw_type_error("_set_error_classes: expected exception classes");
    }
    v.push_back(c.inc_ref().ptr());
  }
  for (PyObject* old : error_classes()) Py_DECREF(old);
  error_classes() = std::move(v);
}

void raise_status(const jtree::Status& st) {
  const auto code = static_cast<size_t>(st.code());
  const auto& classes = error_classes();
  PyObject* cls = code < classes.size() ? classes[code] : PyExc_RuntimeError;
  nb::str msg = decode_utf8(st.message());
  PyObject* exc = PyObject_CallFunction(cls, "O", msg.ptr());
  if (exc == nullptr) throw nb::python_error();
  PyErr_SetObject(cls, exc);
  Py_DECREF(exc);
  throw nb::python_error();
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
