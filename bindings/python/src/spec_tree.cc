// load_pytreedef's structure, built in one native pass over the Reader's nodes.
//
// The Python walk over the Reader's tuples cost a tuple per node and per leaf, then a Python
// frame per node and a Python call per LeafSpec: about 1.5 us a leaf. Here the containers and
// the LeafSpecs are made directly; only containers that need Python's registry or namedtuple
// classes (named tuples, OrderedDict, custom nodes) call back into Python.
#include <array>
#include <limits>
#include <optional>
#include <vector>

#include "common.h"

namespace jtpy {
namespace {

struct Frame {
  jtree::NodeView node;
  nb::object key;         // this node's key in its parent (None for a position)
  uint32_t position = 0;  // its position among its parent's children
  uint32_t done = 0;      // children handed up so far
  nb::object values;      // kDict: the dict; else the list of values
  nb::object keys;        // the children's keys, for containers built by Python
};

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

class SpecBuilder {
 public:
  SpecBuilder(const jtree::Reader& reader, nb::handle spec_cls, nb::handle kind_names,
              nb::handle dtype_of, nb::handle container)
      : r_(reader),
        spec_cls_(spec_cls),
        kind_names_(kind_names),
        dtype_of_(dtype_of),
        container_(container),
        object_new_(nb::module_::import_("builtins").attr("object").attr("__new__")),
        specs_(reader.num_leaves()) {}

  nb::object build() {
    std::vector<Frame> stack;
    nb::object result = nb::none();
    for (uint32_t i = 0; i < r_.num_nodes(); ++i) {
      const jtree::NodeView n = r_.node(i);
      nb::object key = key_to_py(n.key);
      const uint32_t position = stack.empty() ? 0 : stack.back().done;
      nb::object value;
      if (n.kind == jtree::NodeKind::kLeaf) {
        value = spec(n.leaf);
      } else if (n.kind == jtree::NodeKind::kNone) {
        value = nb::none();
      } else {
        Frame f{n, key, position, 0, nb::object(), nb::object()};
        f.values = n.kind == jtree::NodeKind::kDict ? nb::object(nb::dict()) : nb::object(nb::list());
        if (!native(n.kind)) f.keys = nb::list();
        if (n.num_children > 0) {
          stack.push_back(std::move(f));
          continue;
        }
        value = finish(f, stack);
      }
      // Hand the value up, finishing every container it completes.
      while (!stack.empty()) {
        Frame& top = stack.back();
        if (top.node.kind == jtree::NodeKind::kDict) {
          if (PyDict_SetItem(top.values.ptr(), key.ptr(), value.ptr()) != 0) {
            throw nb::python_error();
          }
        } else if (PyList_Append(top.values.ptr(), value.ptr()) != 0) {
          throw nb::python_error();
        }
        if (top.keys.is_valid() && PyList_Append(top.keys.ptr(), key.ptr()) != 0) {
          throw nb::python_error();
        }
        if (++top.done < top.node.num_children) break;
        Frame f = std::move(top);
        stack.pop_back();
        value = finish(f, stack);
        key = f.key;
      }
      if (stack.empty()) result = value;
    }
    return result;
  }

 private:
  static bool native(jtree::NodeKind k) {
    return k == jtree::NodeKind::kDict || k == jtree::NodeKind::kList ||
           k == jtree::NodeKind::kTuple;
  }

  // The finished container of frame `f`, whose ancestors are `stack`.
  nb::object finish(const Frame& f, const std::vector<Frame>& stack) {
    switch (f.node.kind) {
      case jtree::NodeKind::kDict:
      case jtree::NodeKind::kList:
        return f.values;
      case jtree::NodeKind::kTuple: {
        PyObject* t = PyList_AsTuple(f.values.ptr());
        if (t == nullptr) throw nb::python_error();
        return nb::steal(t);
      }
      default:
        break;
    }
    // Its key path (for an error about it): each node's key, or its position in its parent,
    // from the root's child down (the root, stack[0], has no part).
    nb::list parts;
    auto add = [&](const Frame& g) {
      parts.append(g.key.is_none() ? nb::object(nb::int_(g.position)) : g.key);
    };
    for (size_t d = 1; d < stack.size(); ++d) add(stack[d]);
    if (!stack.empty()) add(f);
    const bool named = f.node.kind == jtree::NodeKind::kNamedTuple ||
                       f.node.kind == jtree::NodeKind::kCustom;
    nb::object type_name = named ? nb::object(decode_utf8(f.node.type_name)) : nb::none();
    nb::object aux = f.node.kind == jtree::NodeKind::kCustom
                         ? nb::object(nb::bytes(f.node.aux_data.data(), f.node.aux_data.size()))
                         : nb::none();
    return container_(static_cast<int>(f.node.kind), type_name, aux, f.keys, f.values,
                      nb::tuple(parts));
  }

  // (spec dtype, item size) of a dtype code, or nullopt when it has none; asked once per code.
  const std::optional<std::pair<nb::object, uint64_t>>& dtype(jtree::DType code) {
    const auto c = static_cast<uint8_t>(code);
    if (!dtype_asked_[c]) {
      nb::object d = dtype_of_(static_cast<int>(c));
      if (!d.is_none()) {
        dtypes_[c].emplace(d[0], nb::cast<uint64_t>(d[1]));
      }
      dtype_asked_[c] = true;
    }
    return dtypes_[c];
  }

  nb::object kind_name(jtree::LeafKind kind) {
    const auto k = static_cast<uint8_t>(kind);
    if (!kind_names_cache_[k].is_valid()) kind_names_cache_[k] = kind_names_[nb::int_(k)];
    return kind_names_cache_[k];
  }

  // The LeafSpec of leaf `i`, made once (a leaf referred to twice is one spec).
  nb::object spec(uint32_t i) {
    if (specs_[i].is_valid()) return specs_[i];
    const jtree::Leaf l = r_.decode_leaf(i);
    const auto& dt = dtype(l.dtype);
    const bool array = l.kind == jtree::LeafKind::kArray;
    nb::object s = object_new_(spec_cls_);
    PyObject* d = PyObject_GenericGetDict(s.ptr(), nullptr);
    if (d == nullptr) throw nb::python_error();
    nb::dict fields = nb::steal<nb::dict>(d);
    fields[k_kind_] = array ? nb::object(k_array_) : kind_name(l.kind);
    fields[k_shape_] = array ? nb::object(shape_tuple(l.shape)) : nb::object(nb::tuple());
    fields[k_dtype_] = array && dt ? dt->first : nb::none();
    fields[k_nbytes_] = dt ? byte_count(l.shape, dt->second) : nb::int_(0);
    fields[k_scalar_] = nb::bool_(array && (l.flags & jtree::kLeafFlagScalar) != 0);
    fields[k_type_name_] = l.kind == jtree::LeafKind::kCustomLeaf
                               ? nb::object(decode_utf8(l.type_name))
                               : nb::none();
    specs_[i] = s;
    return s;
  }

  const jtree::Reader& r_;
  nb::handle spec_cls_, kind_names_, dtype_of_, container_;
  nb::object object_new_;
  std::vector<nb::object> specs_;
  std::array<std::optional<std::pair<nb::object, uint64_t>>, 256> dtypes_{};
  std::array<bool, 256> dtype_asked_{};
  std::array<nb::object, 256> kind_names_cache_{};
  nb::str k_kind_{"kind"}, k_shape_{"shape"}, k_dtype_{"dtype"}, k_nbytes_{"nbytes"},
      k_scalar_{"scalar"}, k_type_name_{"type_name"}, k_array_{"array"};
};

}  // namespace

nb::object spec_tree(const jtree::Reader& reader, nb::handle spec_cls, nb::handle kind_names,
                     nb::handle dtype_of, nb::handle container) {
  return SpecBuilder(reader, spec_cls, kind_names, dtype_of, container).build();
}

}  // namespace jtpy
