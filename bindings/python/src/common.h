// Shared helpers of the native module jtree._jtree: Status -> Python exception, keys and
// strings between Python and C++.
//
// The module only translates. Every format decision (inline or chunked, chunk grid, codecs,
// validation) is the C++ library's; the pure-Python layer (python/jtree) walks Python objects.
#pragma once

#include <nanobind/nanobind.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "jtree/jtree.h"
#include "jtree/key_path_pattern.h"

namespace nb = nanobind;

namespace jtpy {

/// Installs jtree's exception classes (jtree/_errors.py, once when the package is imported):
/// `by_code`, one per jtree::StatusCode (index = code); `type_error` and `index_error`, the
/// InvalidArgument classes that are also a TypeError and an IndexError.
void set_error_classes(nb::handle by_code, nb::handle type_error, nb::handle index_error);

/// Where an error happened: the exception's `file` and `key_path` (nullopt: not known).
struct ErrorPlace {
  std::optional<std::string> file;
  std::optional<std::string> key_path;
};

/// The place of an error `reader` returned: its file, and the key path of the leaf the message
/// names when it starts "<file>: leaf <key path>: " (as the library words errors about a leaf).
ErrorPlace place_in(const jtree::Reader& reader, const jtree::Status& st);

/// Raises the exception class of `st`'s code with its message and `place`. Call with the GIL
/// held.
[[noreturn]] void raise_status(const jtree::Status& st, const ErrorPlace& place = {});

inline void check(const jtree::Status& st, const ErrorPlace& place = {}) {
  if (!st.ok()) raise_status(st, place);
}
/// check() of a Status `reader` returned, raised with its place (place_in).
inline void check(const jtree::Status& st, const jtree::Reader& reader) {
  if (!st.ok()) raise_status(st, place_in(reader, st));
}

template <typename T>
T value_or_raise(jtree::Result<T>&& r, const ErrorPlace& place = {}) {
  if (!r.ok()) raise_status(r.status(), place);
  return std::move(r).value();
}
template <typename T>
T value_or_raise(jtree::Result<T>&& r, const jtree::Reader& reader) {
  if (!r.ok()) raise_status(r.status(), place_in(reader, r.status()));
  return std::move(r).value();
}

/// Misuse of the module itself (a malformed request tuple, an argument of the wrong type),
/// raised through the same classes as the library's errors: InvalidArgumentError (a
/// ValueError), its TypeError and its IndexError (IndexOutOfRangeError).
[[noreturn]] void throw_value_error(const std::string& m);
[[noreturn]] void throw_type_error(const std::string& m);
[[noreturn]] void throw_index_error(const std::string& m);

/// Raises `cls` (a jtree exception class) with `message` and `place`. Call with the GIL held.
[[noreturn]] void raise_error(nb::handle cls, const std::string& message,
                              const ErrorPlace& place);

/// The key path of `parts` (keys and positions), as jtree._keypath.join writes it: a part
/// that is neither str nor int as str() writes it. For an error's place.
std::string key_path_of(nb::handle parts);

/// Raises `cls` with `message` after the place, as the Python layer's jtree._errors.error
/// words it: "<file>: at '<key path>': <message>" ("at the root" for the empty key path).
[[noreturn]] void raise_error_at(nb::handle cls, const ErrorPlace& place,
                                 const std::string& message);

/// The class of StatusCode `code` (RuntimeError before the classes are installed).
nb::handle error_class_of(jtree::StatusCode code);

/// jtree.Error, the base of every jtree exception (null before the classes are installed).
nb::handle error_base_class();

/// Calls `f` with the GIL released and returns what it returns: the library's I/O, codec and
/// thread-pool work runs while other Python threads go on. `f` must not touch Python objects,
/// and neither may what it returns (that is made before the GIL is taken back).
template <typename F>
auto without_gil(F&& f) -> decltype(f()) {
  nb::gil_scoped_release release;
  return f();
}

/// A Python str from UTF-8 bytes read from a file. Invalid UTF-8 (a damaged or hostile file)
/// becomes lone surrogates (PEP 383) rather than an exception: keys stay printable.
nb::str decode_utf8(std::string_view s);

/// Python key (None, str or int) <-> jtree::Key. Raises TypeError for anything else; ints
/// outside int64 raise OverflowError (the Python layer checks both first, with the key path).
jtree::Key key_from_py(nb::handle key);
nb::object key_to_py(const jtree::KeyView& key);

/// Bytes of a Python bytes object as a std::string (a copy: the tree owns its payloads).
std::string bytes_to_string(nb::handle b);

/// A shape as a tuple of ints (made once per leaf of every open file: straight into the tuple,
/// without a list between).
nb::tuple shape_tuple(const jtree::Shape& s);

/// The Python value of an Int/Float/Bool/Complex leaf (None for every other kind). An int
/// beyond int64 is a Python int, or with `big_int_as_int` false its two's-complement
/// little-endian bytes (the leaf tuple's field, docs/architecture.md section 5).
nb::object leaf_scalar_value(const jtree::Leaf& l, bool big_int_as_int);

/// A flat uint8 NumPy array over a mapped leaf's bytes (reader.cc); its capsule holds a
/// reference to the mapping for as long as NumPy holds the array. `writable` false: read-only.
nb::object mapped_bytes_array(jtree::MappedLeaf m, bool writable);

/// load_pytreedef of a whole file in one preorder pass over `reader`'s nodes, without a Python
/// object per node: dicts, lists, tuples and None are made here, and each leaf's LeafSpec by
/// the one LeafSpec rule of spec_tree.cc (the one leaf_specs uses). `kind_names[kind]` names a
/// leaf kind, `dtype_of(code)`
/// gives (spec dtype, item size) or None (asked once per dtype), and every other container is
/// `container(kind, type_name, aux, keys, values, key_path_parts)`.
nb::object spec_tree(const jtree::Reader& reader, nb::handle spec_cls, nb::handle kind_names,
                     nb::handle dtype_of, nb::handle container);

/// The LeafSpec of each row (kind, flags, dtype code | None, shape, nbytes, type_name), by the
/// rule spec_tree follows: FileLeaf.spec and a nonblocking_save's structure (one call for all
/// of a tree's leaves). Registered as _jtree.leaf_specs by register_specs.
nb::list leaf_specs(nb::handle rows, nb::handle spec_cls, nb::handle kind_names,
                    nb::handle dtype_of);
void register_specs(nb::module_& m);

/// A whole load of a plain file in one native pass (plain_load.cc): (tree, []), or with `keys`
/// whose patterns match nothing (None, [their numbers]) with nothing read; None when the file
/// needs the general Python loader (see there). `plain`: the framework's part, a
/// jtree._load_adapter.PlainPass (its attributes read once: `dtype_of(code)` -> np.dtype or
/// None; `wrap` None for NumPy arrays, else `wrap(array or destination, code)` makes each
/// array's value; `mmap_mode` 0, 1 or 2; `new_device(shape, code)` and
/// `fill([(leaf, None, destination)...])` -> bool, both None on the host). ValueError when
/// its hooks do not go together. `keys` (or null): a keys= selection, `prune` its
/// prune=True. `first`: the node loaded with its subtree (0: the whole file), `parts` its key
/// path parts (keys and positions).
nb::object load_plain(const jtree::Reader& reader, nb::handle plain, nb::handle container,
                      bool verify, int threads, const jtree::KeyPathPatterns* keys, bool prune,
                      uint32_t first, nb::handle parts);

/// jtree::RemoteOptions from jtree.RemoteOptions's settings ({field: value}; None: the
/// defaults, from the environment), checked (remote_options.cc). InvalidArgumentError for an
/// unknown field, a bad value, or settings given for a local `path` (they would go unused).
jtree::RemoteOptions remote_options(nb::handle settings, const std::string& path);
void register_remote_options(nb::module_& m);

void register_builder(nb::module_& m);
void register_reader(nb::module_& m);
void register_writer(nb::module_& m);
/// The decisions Python asks the library for (rules.cc): budgets, key paths, indices, URLs.
void register_rules(nb::module_& m);
void register_device_array(nb::module_& m);

}  // namespace jtpy
