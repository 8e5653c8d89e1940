// jtree._jtree.Builder (see builder.h).
//
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "builder.h"
#include "dlpack_dtype.h"
#include "piece_copy.h"

namespace jtpy {
namespace {

using jtree::Box;
using jtree::DType;
using jtree::Shape;
using jtree::Status;


// Resolves the dtype (given by the Python layer, or from DLPack) and checks the element size.
DType array_dtype(const AnyArray& a, int dtype_code) {
  if (a.device_type() != nb::device::cpu::value) {
    throw_value_error("array is not in host memory (DLPack device type " +
                          std::to_string(a.device_type()) + "); copy it to the CPU first");
  }
  std::optional<DType> d;
  if (dtype_code >= 0) {
    if (!jtree::dtype_known(static_cast<uint8_t>(dtype_code))) {
      throw_value_error("unknown jtree dtype code " + std::to_string(dtype_code));
    }
    d = static_cast<DType>(dtype_code);
  } else {
    d = dtype_from_dlpack(a.dtype());
    if (!d) {
      throw_type_error("DLPack dtype (code " + std::to_string(a.dtype().code) + ", " +
                           std::to_string(a.dtype().bits) + " bits) has no jtree dtype");
    }
  }
  const auto info = *jtree::dtype_info(*d);
  if (a.itemsize() != info.item_size) {
    throw_value_error("array of " + std::to_string(a.itemsize()) + "-byte elements for dtype " +
                          std::string(info.name) + " (" + std::to_string(info.item_size) +
                          " bytes)");
  }
  return *d;
}

Shape shape_of(const AnyArray& a) {
  Shape s(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) s[i] = a.shape(i);
  return s;
}

// dlpack_info: (dtype code, shape) of `obj` imported as an array; where it cannot be (not an
// array nanobind imports, not in host memory, a dtype jtree lacks), InvalidArgumentError
// "cannot save a <type> through DLPack: <why>" at `file` and the key path of `path` (its
// keys and positions, joined only for the error).
nb::tuple dlpack_info(nb::handle obj, std::optional<std::string> file, nb::handle path) {
  std::string why;
  try {
    AnyArray a = nb::cast<AnyArray>(obj);
    const DType d = array_dtype(a, -1);
    return nb::make_tuple(static_cast<int>(d), shape_of(a));
  } catch (nb::python_error& e) {
    why = nb::cast<std::string>(nb::str(e.value()));
  } catch (const nb::cast_error&) {
    why = "it is not an array that DLPack or the buffer protocol can import";
  }
  const std::string type_name = nb::cast<std::string>(nb::str(obj.type().attr("__qualname__")));
  const std::optional<std::string> key_path =
      path.is_none() ? std::nullopt : std::optional<std::string>(key_path_of(path));
  raise_error_at(error_class_of(jtree::StatusCode::kInvalidArgument), ErrorPlace{file, key_path},
                 "cannot save a " + type_name + " through DLPack: " + why);
}

std::vector<int64_t> byte_strides(const AnyArray& a) {
  std::vector<int64_t> s(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) s[i] = a.stride(i) * static_cast<int64_t>(a.itemsize());
  return s;
}

jtree::Leaf scalar(jtree::LeafKind kind) {
  jtree::Leaf l;
  l.kind = kind;
  l.storage = jtree::Storage::kNone;
  return l;
}

jtree::LeafOptions leaf_options(std::vector<uint64_t> chunk_shape, int codec,
                               std::optional<int> level) {
  jtree::LeafOptions o;
  o.chunk_shape = std::move(chunk_shape);
  if (codec >= 0) o.codec = static_cast<jtree::Codec>(codec);
  o.level = level;
  return o;
}

}  // namespace

jtree::Leaf chunked_array(uint32_t flags, DType d, std::vector<uint64_t> shape,
                          std::shared_ptr<jtree::LeafInput> in, std::vector<uint64_t> chunk_shape,
                          int codec, std::optional<int> level) {
  jtree::Leaf l;
  l.kind = jtree::LeafKind::kArray;
  l.flags = flags;
  l.dtype = d;
  l.shape = std::move(shape);
  l.storage = jtree::Storage::kChunked;  // the writer decides between inline and chunked
  in->options = leaf_options(std::move(chunk_shape), codec, level);
  l.input = std::move(in);
  return l;
}

void Builder::set_key(nb::handle key) {
  jtree::Key k = key_from_py(key);
  if (k.kind == jtree::Key::Kind::kStr) b_.key(std::move(k.str));
  if (k.kind == jtree::Key::Kind::kInt) b_.key(k.i);
}

uint32_t Builder::add(nb::handle key, jtree::Leaf l) {
  set_key(key);
  uint32_t id = 0;
  b_.leaf(std::move(l), &id);
  return id;
}

void Builder::begin(int kind, nb::handle key, std::optional<std::string> type_name,
                    std::optional<nb::bytes> aux) {
  set_key(key);
  switch (static_cast<jtree::NodeKind>(kind)) {
    case jtree::NodeKind::kDict: b_.dict(); break;
    case jtree::NodeKind::kList: b_.list(); break;
    case jtree::NodeKind::kTuple: b_.tuple(); break;
    case jtree::NodeKind::kOrderedDict: b_.ordered_dict(); break;
    case jtree::NodeKind::kNamedTuple: b_.named_tuple(type_name.value_or("")); break;
    case jtree::NodeKind::kCustom:
      b_.custom(type_name.value_or(""), aux ? bytes_to_string(*aux) : std::string());
      break;
    default:
      throw_value_error("begin(): not a container kind: " + std::to_string(kind));
  }
}

void Builder::end() { b_.end(); }

void Builder::none(nb::handle key) {
  set_key(key);
  b_.none();
}

uint32_t Builder::int_value(nb::handle key, int64_t v) {
  jtree::Leaf l = scalar(jtree::LeafKind::kInt);
  l.int_value = v;
  return add(key, std::move(l));
}

uint32_t Builder::big_int(nb::handle key, nb::bytes twos_complement_le) {
  jtree::Leaf l = scalar(jtree::LeafKind::kInt);
  l.big_int = bytes_to_string(twos_complement_le);
  return add(key, std::move(l));
}

uint32_t Builder::float_value(nb::handle key, double v) {
  jtree::Leaf l = scalar(jtree::LeafKind::kFloat);
  l.real = v;
  return add(key, std::move(l));
}

uint32_t Builder::bool_value(nb::handle key, bool v) {
  jtree::Leaf l = scalar(jtree::LeafKind::kBool);
  l.bool_value = v;
  return add(key, std::move(l));
}

uint32_t Builder::complex_value(nb::handle key, double re, double im) {
  jtree::Leaf l = scalar(jtree::LeafKind::kComplex);
  l.real = re;
  l.imag = im;
  return add(key, std::move(l));
}

uint32_t Builder::payload(nb::handle key, int kind, nb::bytes data,
                          std::optional<std::string> type_name) {
  const auto k = static_cast<jtree::LeafKind>(kind);
  if (k < jtree::LeafKind::kStr || k > jtree::LeafKind::kPickle) {
    throw_value_error("payload(): not a payload leaf kind: " + std::to_string(kind));
  }
  jtree::Leaf l;
  l.kind = k;
  l.dtype = DType::kUInt8;
  l.storage = jtree::Storage::kInline;  // the writer moves large payloads into chunks
  l.inline_data = bytes_to_string(data);
  l.shape = {l.inline_data.size()};
  if (type_name) l.type_name = *type_name;
  return add(key, std::move(l));
}

uint32_t Builder::array(nb::handle key, AnyArray a, int dtype_code, bool byteswap,
                        uint32_t flags, std::vector<uint64_t> chunk_shape, int codec,
                        std::optional<int> level) {
  const DType d = array_dtype(a, dtype_code);
  auto in = std::make_shared<jtree::LeafInput>();
  in->source = jtree::ArrayView(a.data(), byte_strides(a), byteswap);
  jtree::Leaf l = chunked_array(flags, d, shape_of(a), std::move(in), std::move(chunk_shape),
                                codec, level);
  arrays_.push_back(std::move(a));
  return add(key, std::move(l));
}

uint32_t Builder::sharded(nb::handle key, int dtype_code, std::vector<uint64_t> shape,
                          nb::list pieces, uint32_t flags, std::vector<uint64_t> chunk_shape,
                          int codec, std::optional<int> level, std::vector<uint64_t> shard_shape,
                          bool segment,
                          std::vector<std::pair<std::vector<uint64_t>, std::vector<uint64_t>>>
                              blocks) {
  if (dtype_code < 0 || !jtree::dtype_known(static_cast<uint8_t>(dtype_code))) {
    throw_value_error("sharded(): unknown dtype code " + std::to_string(dtype_code));
  }
  const DType d = static_cast<DType>(dtype_code);
  const size_t item = jtree::dtype_info(d)->item_size;
  auto ps = std::make_shared<std::vector<Piece>>();
  for (nb::handle h : pieces) {
    auto t = nb::cast<nb::tuple>(h);
    if (t.size() != 2) throw_value_error("sharded(): pieces are (begin, array) pairs");
    AnyArray a = nb::cast<AnyArray>(t[1]);
    array_dtype(a, dtype_code);
    Piece p;
    p.begin = nb::cast<std::vector<uint64_t>>(t[0]);
    p.shape = shape_of(a);
    if (p.begin.size() != shape.size() || p.shape.size() != shape.size()) {
      throw_value_error("sharded(): a shard's rank differs from the array's");
    }
    for (size_t i = 0; i < shape.size(); ++i) {
      if (p.begin[i] > shape[i] || p.shape[i] > shape[i] - p.begin[i]) {
        throw_value_error("sharded(): a shard lies outside the array");
      }
    }
    p.data = static_cast<const std::byte*>(a.data());
    p.strides = byte_strides(a);
    ps->push_back(std::move(p));
    arrays_.push_back(std::move(a));
  }
  if (segment) {
    // This process's shards, read in place by the writer; chunks in no shard held here are
    // written by the processes that hold them.
    std::vector<jtree::Shard> shards;
    for (const Piece& p : *ps) {
      jtree::Shard sh;
      sh.box.begin = p.begin;
      sh.box.end.resize(p.begin.size());
      for (size_t i = 0; i < p.begin.size(); ++i) sh.box.end[i] = p.begin[i] + p.shape[i];
      sh.view = jtree::ArrayView(p.data, p.strides);
      shards.push_back(std::move(sh));
    }
    auto in = std::make_shared<jtree::LeafInput>();
    in->shards = std::move(shards);
    in->shard_shape = std::move(shard_shape);
    for (auto& [b, e] : blocks) in->blocks.push_back(jtree::Box{std::move(b), std::move(e)});
    return add(key, chunked_array(flags, d, std::move(shape), std::move(in),
                                  std::move(chunk_shape), codec, level));
  }
  jtree::FillFn fill = [ps, item](const Box& box, std::span<std::byte> dst) -> Status {
    uint64_t covered = 0;
    for (const Piece& p : *ps) covered += copy_from_piece(p, box, item, dst.data());
    if (covered != box.num_elements()) {
      return Status::invalid_argument("the shards held by this process cover " +
                                     std::to_string(covered) + " of the " +
                                     std::to_string(box.num_elements()) +
                                     " elements of a chunk");
    }
    return Status::success();
  };
  auto in = std::make_shared<jtree::LeafInput>();
  in->fill = std::move(fill);
  for (auto& [b, e] : blocks) in->blocks.push_back(jtree::Box{std::move(b), std::move(e)});
  return add(key, chunked_array(flags, d, std::move(shape), std::move(in), std::move(chunk_shape),
                                codec, level));
}

uint32_t Builder::deferred(nb::handle key, int dtype_code, std::vector<uint64_t> shape,
                           nb::object fetch, uint32_t flags, std::vector<uint64_t> chunk_shape,
                           int codec, std::optional<int> level) {
  if (dtype_code < 0 || !jtree::dtype_known(static_cast<uint8_t>(dtype_code))) {
    throw_value_error("deferred(): unknown dtype code " + std::to_string(dtype_code));
  }
  const DType d = static_cast<DType>(dtype_code);
  const auto info = *jtree::dtype_info(d);
  auto in = std::make_shared<jtree::LeafInput>();
  std::shared_ptr<DeferredState> state;
  in->fill = deferred_fill(fetch, shape, info.item_size, &state);
  fetches_.push_back(std::move(fetch));
  deferred_.push_back(std::move(state));
  return add(key, chunked_array(flags, d, std::move(shape), std::move(in), std::move(chunk_shape),
                                codec, level));
}

Builder::~Builder() {
  // (Python destroys the Builder with the GIL held: a leaf a failed save left fetched is
  // dropped here.)
  for (auto& s : deferred_) release_deferred(*s);
}

uint32_t Builder::reuse(nb::handle key, uint32_t old_leaf) {
  return add(key, jtree::Leaf::reused(old_leaf));
}

void Builder::tied(nb::handle key, uint32_t leaf) {
  set_key(key);
  b_.tied(leaf);
}

jtree::Tree Builder::take() {
  if (taken_) throw_value_error("this Builder's tree was already written");
  taken_ = true;
  return value_or_raise(std::move(b_).finish());
}

void register_builder(nb::module_& m) {
  m.def("dlpack_info", &dlpack_info, nb::arg("array"), nb::arg("file").none() = nb::none(),
        nb::arg("path").none() = nb::none(),
        "(dtype code, shape) of an array imported through DLPack or the buffer protocol. "
        "InvalidArgumentError naming `file` and the key path of `path` (the leaf's keys and "
        "positions in a save) when it cannot be saved that way.");
  // A snapshot save copies each memory once (the copies stay tied): it keys arrays by their
  // memory, all of them in one call. A buffer export is a fifth of the cost of NumPy's
  // __array_interface__ (which builds a dict and a dtype description).
  m.def(
      "data_addresses",
      [](nb::handle arrays) {
        nb::list out;
        for (nb::handle array : arrays) {
          Py_buffer view;
          if (PyObject_GetBuffer(array.ptr(), &view, PyBUF_STRIDES) != 0) {
            throw nb::python_error();
          }
          const auto address = reinterpret_cast<uintptr_t>(view.buf);
          PyBuffer_Release(&view);
          out.append(address);
        }
        return out;
      },
      nb::arg("arrays"),
      "The address of the first element of each object (with the buffer protocol, strided "
      "too) of an iterable.");
  auto cls = nb::class_<Builder>(m, "Builder",
                                 "Builds a tree for save/append (see jtree::TreeBuilder) from "
                                 "one table of ops: build(); keys are None, str or int.")
                  .def(nb::init<>());
  register_builder_table(cls);
}

}  // namespace jtpy
