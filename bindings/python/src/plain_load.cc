// A whole load of a plain file in one native pass: `jtree.load(path)` (or File.load(), or
// with framework="torch" on the CPU) with no cast, target, device or progress, the call users
// make most; the same of a part of the file (`jtree.load(f["params"])`, its subtree); and the
// same with a keys= selection (prune or not), whose rules node_selection.h decides from the
// same jtree::KeyPathPatterns the Python loader asks.
//
// Why here: the Python loader (python/jtree/_load.py) plans a load a leaf at a time (a
// FileNode and a FileLeaf per leaf, a plan thunk, a reservation, np.empty): about 6 us a leaf,
// so a tree of 20,000 tiny arrays loaded in twice safetensors' time. Here the same load is
// planned, read and built without a Python frame per leaf.
//
// The rules are the Python loader's, unchanged; it stays the one general path, and this one
// declines (returns None) whatever it does not do exactly as that loader would:
// The framework's part comes in one object, a jtree._load_adapter.PlainPass its adapter made
// for this load, whose attributes are read once per call:
// - arrays whose dtype NumPy has (`dtype_of(code)` gives the np.dtype, or None) come
//   back as NumPy arrays: views of the file's copy-on-write map where the library maps the
//   leaf (`mmap_mode` 1; 2: views made read-only; 0: never), else new arrays, all read in one
//   read_many; a saved scalar (FLAG_SCALAR, shape ()) is a NumPy scalar. With `wrap` (torch,
//   JAX) each array is `wrap(array, code)` instead (a tensor over the same memory; no scalars);
// - with `new_device` (a load to a device the direct path serves: jtree._load_plain) each
//   array is `new_device(shape, code)` instead, its destination in device memory (a torch
//   tensor; for JAX a jtree._device_jax.Dest), its dtype's item size still from
//   `dtype_of`, not read here: `fill([(leaf, None, destination)...])` fills them all
//   (jtree._device.read: pinned staging buffers; False declines), then `wrap(destination,
//   code)` (if given) makes each array's value (JAX: the array over the filled memory). The
//   device path's rules are the adapters' as_stored's;
// - Int/Float/Bool/Complex leaves are their values, Str/Bytes/ByteArray leaves their payloads
//   (str, bytes, bytearray);
// - a leaf referred to twice (tied weights) is one object;
// - every array and payload this load allocates is reserved first from a jtree::MemoryBudget
//   of the open's limits, in the Python loader's order;
// - containers as assemble_tree makes them (tree_assembly.h: dicts, lists, tuples here, the
//   others by Python's `container`);
// - with keys=, only the leaves the selection loads are planned and read; the patterns that
//   match nothing are returned before anything is read (the caller's NotFoundError).
// Declined: a pickled or custom leaf, a dtype without a NumPy type (bfloat16 without
// ml_dtypes), an array NumPy cannot represent, an allocation over the limits, a str leaf that
// is not UTF-8. It declines before anything Python can see has happened (the reads and maps
// are undone by dropping them), and the Python loader then loads the file, raising its own
// clear errors. Errors of the file itself (a damaged chunk) are raised here, as there.
#include <climits>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common.h"
#include "tree_assembly.h"

namespace jtpy {
namespace {

constexpr uint32_t kUnused = UINT32_MAX;

struct Entry {
  enum class How : uint8_t { kValue, kNewArray, kMapped, kPayload, kDevice };
  How how = How::kValue;
  uint32_t index = 0;  // the leaf's number in the file
  // The Reader's own decoded leaf (kept for its life, as read_many and map_leaves keep the
  // leaves they read: one decode per leaf, no copy of inline payloads).
  const jtree::Leaf* leaf = nullptr;
  nb::object dtype;    // arrays: the NumPy dtype
  uint64_t nbytes = 0;
  nb::object array;    // kNewArray: the new array; kDevice: its destination
  jtree::MappedLeaf mapped;
  std::string payload;
  nb::object value;    // what the tree holds
};

class PlainLoad {
 public:
  PlainLoad(const jtree::Reader& r, nb::handle plain, nb::handle container, bool verify,
            int threads, const jtree::KeyPathPatterns* keys, bool prune, uint32_t first,
            nb::handle parts)
      : r_(r),
        dtype_of_(plain.attr("dtype_of")),
        container_(container),
        wrap_(plain.attr("wrap")),
        new_device_(plain.attr("new_device")),
        fill_(plain.attr("fill")),
        mmap_mode_(nb::cast<int>(plain.attr("mmap_mode"))),
        budget_(r.options().limits),
        keys_(keys),
        prune_(prune),
        first_(first),
        parts_(parts) {
    options_.verify_checksums = verify;
    options_.threads = threads;
  }

  // ValueError where the PlainPass's hooks do not go together.
  void check_hooks() const {
    if (mmap_mode_ < 0 || mmap_mode_ > 2) throw_value_error("load_plain: mmap_mode is 0, 1 or 2");
    if (new_device_.is_none() != fill_.is_none()) {
      throw_value_error("load_plain: new_device and fill go together");
    }
  }

  // (tree, []) or, when keys= patterns matched nothing, (None, [their numbers]) with nothing
  // read; None when declined.
  nb::object run() {
    if (first_ >= r_.num_nodes()) throw_value_error("load_plain: no such node");
    end_ = subtree_end(r_, first_);
    if (keys_ != nullptr) {
      // (The patterns see the parts as str: positions and int keys in decimal.)
      std::vector<std::string> path;
      for (nb::handle p : parts_) {
        const nb::str text(p);
        Py_ssize_t len = 0;
        const char* c = PyUnicode_AsUTF8AndSize(text.ptr(), &len);
        if (c == nullptr) throw nb::python_error();
        path.emplace_back(c, static_cast<size_t>(len));
      }
      selection_.emplace(r_, *keys_, prune_, first_, std::move(path));
    }
    if (!plan() || !reserve_all()) return nb::none();
    // (After the reservations, as the Python loader reports a leaf over the limits before the
    // patterns that matched nothing; before anything is allocated or read.)
    if (selection_ && !selection_->all_matched()) {
      nb::list unmatched;
      for (size_t i = 0; i < selection_->matched.size(); ++i) {
        if (!selection_->matched[i]) unmatched.append(i);
      }
      return nb::make_tuple(nb::none(), unmatched);
    }
    allocate();
    if (!fill_devices() || !map()) return nb::none();
    read();
    if (!make_values()) return nb::none();
    nb::object tree = assemble_tree(
        r_, container_, [this](uint32_t leaf) { return entries_[slot_[leaf]].value; }, first_,
        parts_, selection_ ? &*selection_ : nullptr);
    return nb::make_tuple(tree, nb::list());
  }

 private:
  // Each leaf the tree refers to (that the selection loads), once, in preorder of its first
  // node (the Python loader's planning order), classified; false when one is declined.
  bool plan() {
    slot_.assign(r_.num_leaves(), kUnused);
    for (uint32_t i = first_; i < end_; ++i) {
      const jtree::NodeView n = r_.node(i);
      if (n.kind != jtree::NodeKind::kLeaf || slot_[n.leaf] != kUnused) continue;
      if (selection_ && selection_->state[i] != NodeSelection::kKeep) continue;
      slot_[n.leaf] = static_cast<uint32_t>(entries_.size());
      Entry& e = entries_.emplace_back();
      e.index = n.leaf;
      e.leaf = &r_.leaf(n.leaf);
      if (!classify(e)) return false;
    }
    return true;
  }

  bool classify(Entry& e) {
    const jtree::Leaf& l = *e.leaf;
    switch (l.kind) {
      case jtree::LeafKind::kInt:
      case jtree::LeafKind::kFloat:
      case jtree::LeafKind::kBool:
      case jtree::LeafKind::kComplex:
        e.value = leaf_scalar_value(l, /*big_int_as_int=*/true);
        return true;
      case jtree::LeafKind::kStr:
      case jtree::LeafKind::kBytes:
      case jtree::LeafKind::kByteArray:
        e.how = Entry::How::kPayload;  // (UInt8 of shape [n])
        return representable(l.shape, 1, &e.nbytes);
      case jtree::LeafKind::kArray: {
        const std::optional<std::pair<nb::object, uint64_t>> dt = dtype(l.dtype);
        if (!dt || !representable(l.shape, dt->second, &e.nbytes)) return false;
        e.dtype = dt->first;
        if (!new_device_.is_none()) {
          e.how = Entry::How::kDevice;
          return true;
        }
        const bool mappable = mmap_mode_ != 0 && l.storage == jtree::Storage::kChunked;
        e.how = mappable && e.nbytes > 0 ? Entry::How::kMapped : Entry::How::kNewArray;
        return true;
      }
      default:
        return false;  // pickles and custom leaves: Python's rules (allow_pickle, registry)
    }
  }

  // Whether NumPy (and torch) can make an array of `shape`: even empty, the product of its
  // dimensions (zeros counted as ones) times the item size must stay below 2^63 (the Python
  // loader's NotSupportedError otherwise). `nbytes`: the array's bytes.
  static bool representable(const jtree::Shape& shape, uint64_t item, uint64_t* nbytes) {
    unsigned __int128 n = item, bytes = item;
    for (uint64_t d : shape) {
      n *= d == 0 ? 1 : d;
      bytes *= d;
      if (n >= (static_cast<unsigned __int128>(1) << 63)) return false;
    }
    *nbytes = static_cast<uint64_t>(bytes);
    return true;
  }

  // (np.dtype, item size) of a dtype code, asked of Python once per code; nullopt: none.
  std::optional<std::pair<nb::object, uint64_t>> dtype(jtree::DType code) {
    for (const auto& [c, info] : dtypes_) {
      if (c == code) return info;
    }
    std::optional<std::pair<nb::object, uint64_t>> info;
    nb::object d = dtype_of_(static_cast<int>(code));
    if (!d.is_none()) info.emplace(d, nb::cast<uint64_t>(d.attr("itemsize")));
    dtypes_.emplace_back(code, info);
    return info;
  }

  bool reserve(const Entry& e) { return budget_.reserve(e.nbytes, "").ok(); }

  // The allocations planned so far (new arrays, device tensors, payloads), reserved in order
  // before any is made, as the Python loader reserves them; the mapped leaves are not
  // allocations.
  bool reserve_all() {
    for (const Entry& e : entries_) {
      if ((e.how == Entry::How::kNewArray || e.how == Entry::How::kPayload ||
           e.how == Entry::How::kDevice) &&
          !reserve(e)) {
        return false;
      }
    }
    return true;
  }

  void allocate() {
    for (Entry& e : entries_) {
      if (e.how == Entry::How::kNewArray) {
        new_array(e);
      } else if (e.how == Entry::How::kDevice) {
        e.array = new_device_(shape_tuple(e.leaf->shape), static_cast<int>(e.leaf->dtype));
      } else if (e.how == Entry::How::kPayload) {
        e.payload.resize(e.nbytes);
      }
    }
  }

  void new_array(Entry& e) {
    if (!empty_.is_valid()) empty_ = nb::module_::import_("numpy").attr("empty");
    nb::tuple shape = shape_tuple(e.leaf->shape);
    PyObject* args[] = {shape.ptr(), e.dtype.ptr()};
    PyObject* a = PyObject_Vectorcall(empty_.ptr(), args, 2, nullptr);
    if (a == nullptr) throw nb::python_error();
    e.array = nb::steal(a);
  }

  // The mappable leaves from the file's map (checksums verified on all cores); those the
  // library does not map get new arrays, reserved as the Python loader reserves them.
  bool map() {
    std::vector<uint32_t> leaves;
    std::vector<Entry*> which;
    for (Entry& e : entries_) {
      if (e.how == Entry::How::kMapped) {
        leaves.push_back(e.index);
        which.push_back(&e);
      }
    }
    if (leaves.empty()) return true;
    jtree::Result<std::vector<jtree::MappedLeaf>> r =
        without_gil([&] { return r_.map_leaves(leaves, options_); });
    std::vector<jtree::MappedLeaf> maps = value_or_raise(std::move(r), r_);
    for (size_t k = 0; k < maps.size(); ++k) {
      Entry& e = *which[k];
      if (maps[k]) {
        e.mapped = std::move(maps[k]);
        continue;
      }
      e.how = Entry::How::kNewArray;
      if (!reserve(e)) return false;
      new_array(e);
    }
    return true;
  }

  // The device destinations filled by one call of `fill` (none without new_device); false
  // when it declines.
  bool fill_devices() {
    if (new_device_.is_none()) return true;
    nb::list requests;
    for (const Entry& e : entries_) {
      if (e.how == Entry::How::kDevice) {
        requests.append(nb::make_tuple(e.index, nb::none(), e.array));
      }
    }
    return nb::cast<bool>(fill_(requests));
  }

  // Every new array and payload in one read_many, the GIL released.
  void read() {
    std::vector<jtree::ReadRequest> reqs;
    for (Entry& e : entries_) {
      if (e.nbytes == 0) continue;
      std::span<std::byte> dst;
      if (e.how == Entry::How::kNewArray) {
        Py_buffer view;
        if (PyObject_GetBuffer(e.array.ptr(), &view, PyBUF_WRITABLE) != 0) {
          throw nb::python_error();
        }
        dst = {static_cast<std::byte*>(view.buf), static_cast<size_t>(view.len)};
        PyBuffer_Release(&view);  // (e.array keeps the memory)
        if (dst.size() != e.nbytes) throw_value_error("load_plain: an array of the wrong size");
      } else if (e.how == Entry::How::kPayload) {
        dst = std::as_writable_bytes(std::span<char>(e.payload));
      } else {
        continue;
      }
      reqs.push_back(jtree::ReadRequest{e.index, std::nullopt, dst});
    }
    if (reqs.empty()) return;
    const jtree::Status st = without_gil([&] { return r_.read_many(reqs, options_); });
    check(st, r_);
  }

  // Each entry's value; false when one is declined (a str that is not UTF-8: the Python
  // loader's CorruptionError names its key path).
  bool make_values() {
    const nb::tuple scalar_index;
    for (Entry& e : entries_) {
      switch (e.how) {
        case Entry::How::kValue:
          continue;
        case Entry::How::kPayload:
          if (!payload_value(e)) return false;
          continue;
        case Entry::How::kNewArray:
        case Entry::How::kDevice:  // (filled by fill_devices)
          e.value = std::move(e.array);
          break;
        case Entry::How::kMapped:
          e.value = mapped_value(e);
          break;
      }
      if (!wrap_.is_none()) {
        e.value = wrap_(e.value, static_cast<int>(e.leaf->dtype));
      } else if (e.how == Entry::How::kDevice) {
        continue;  // (a tensor of its shape already)
      } else if ((e.leaf->flags & jtree::kLeafFlagScalar) != 0 && e.leaf->shape.empty()) {
        PyObject* s = PyObject_GetItem(e.value.ptr(), scalar_index.ptr());
        if (s == nullptr) throw nb::python_error();
        e.value = nb::steal(s);
      }
    }
    return true;
  }

  // The mapped bytes as an array of the leaf's dtype and shape (read-only with mmap "r", as
  // the Python loader makes it: the flag on the array, its base writable).
  nb::object mapped_value(Entry& e) {
    nb::object a = mapped_bytes_array(std::move(e.mapped), /*writable=*/true)
                       .attr("view")(e.dtype)
                       .attr("reshape")(shape_tuple(e.leaf->shape));
    if (mmap_mode_ == 2) a.attr("flags").attr("writeable") = false;
    return a;
  }

  bool payload_value(Entry& e) {
    const std::string& p = e.payload;
    const auto n = static_cast<Py_ssize_t>(p.size());
    PyObject* v = nullptr;
    switch (e.leaf->kind) {
      case jtree::LeafKind::kStr:
        v = PyUnicode_DecodeUTF8(p.data(), n, "strict");
        if (v == nullptr) {
          PyErr_Clear();
          return false;
        }
        break;
      case jtree::LeafKind::kBytes: v = PyBytes_FromStringAndSize(p.data(), n); break;
      default: v = PyByteArray_FromStringAndSize(p.data(), n); break;
    }
    if (v == nullptr) throw nb::python_error();
    e.value = nb::steal(v);
    e.payload = std::string();
    return true;
  }

  const jtree::Reader& r_;
  // The PlainPass's hooks (None where it has none); container_: the caller's.
  nb::object dtype_of_;
  nb::handle container_;
  nb::object wrap_, new_device_, fill_;
  int mmap_mode_;
  jtree::MemoryBudget budget_;
  jtree::ReadOptions options_;
  nb::object empty_;
  std::vector<uint32_t> slot_;   // leaf number -> entry (kUnused: not in the tree)
  std::vector<Entry> entries_;
  std::vector<std::pair<jtree::DType, std::optional<std::pair<nb::object, uint64_t>>>> dtypes_;
  const jtree::KeyPathPatterns* keys_;  // a keys= selection, or null
  bool prune_;
  uint32_t first_;     // the node loaded (0: the whole file)
  nb::handle parts_;   // its key path parts (keys and positions)
  uint32_t end_ = 0;   // the node after its subtree
  std::optional<NodeSelection> selection_;
};

}  // namespace

nb::object load_plain(const jtree::Reader& reader, nb::handle plain, nb::handle container,
                      bool verify, int threads, const jtree::KeyPathPatterns* keys, bool prune,
                      uint32_t first, nb::handle parts) {
  if (prune && keys == nullptr) throw_value_error("load_plain: prune without keys");
  PlainLoad load(reader, plain, container, verify, threads, keys, prune, first, parts);
  load.check_hooks();
  return load.run();
}

}  // namespace jtpy
