// jtree._jtree.Builder: a jtree::TreeBuilder driven from Python, plus the arrays it points at.
// Python hands it the whole tree in one call, build(table) (builder_table.cc), which replays
// the table through the per-node members below.
//
// Arrays arrive as nb::ndarray: nanobind imports NumPy arrays, PyTorch tensors, JAX arrays,
// CuPy arrays and anything else with __dlpack__ (or the buffer protocol) as a pointer, shape,
// strides and dtype without copying, whatever the framework. That is why the module uses
// nanobind: one code path for every framework, no copies, no framework headers. The Builder
// keeps each ndarray (and so its owner) alive until the tree has been written; the writer then
// reads the elements straight from the caller's memory (strided and byte-swapped as needed).
// Objects with the buffer protocol (NumPy arrays, the common case) skip nanobind's DLPack
// import: build() takes their buffer directly and holds it until the Builder goes.
#pragma once

#include <nanobind/ndarray.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common.h"
#include "deferred_leaf.h"

namespace jtpy {

using AnyArray = nb::ndarray<nb::ro>;

/// The ops of Builder::build's table (builder_table.cc), exported as Builder.OPS.
enum class TableOp : int {
  kBegin, kEnd, kNone, kInt, kFloat, kBool, kComplex, kPayload, kArray, kDeferred, kSharded,
  kReuse, kTied, kCount
};

/// A chunked array leaf whose data comes from `in` (a view, shards or a fill function); the
/// writer decides between inline and chunked.
jtree::Leaf chunked_array(uint32_t flags, jtree::DType d, std::vector<uint64_t> shape,
                          std::shared_ptr<jtree::LeafInput> in,
                          std::vector<uint64_t> chunk_shape, int codec, std::optional<int> level);

/// Buffer-protocol exports held while the writer reads from them (released with the GIL
/// held, when the Builder goes). A deque: the views stay where they are as it grows.
struct HeldBuffers {
  HeldBuffers() = default;
  HeldBuffers(const HeldBuffers&) = delete;
  HeldBuffers& operator=(const HeldBuffers&) = delete;
  ~HeldBuffers() {
    for (Py_buffer& v : views) PyBuffer_Release(&v);
  }
  std::deque<Py_buffer> views;
};

/// An array of build() stored once per memory: the same address, dtype, byte order, shape
/// and strides is the same leaf (a tie). Its shape and strides are those of its held view.
struct TieEntry {
  const Py_buffer* view;
  int dtype_code;
  bool byteswap;
  uint32_t leaf;
};

class Builder {
 public:
  Builder() = default;
  Builder(const Builder&) = delete;
  Builder& operator=(const Builder&) = delete;
  ~Builder();

  /// The whole tree from one table of ops (builder_table.cc; the Python save's one call).
  /// A value it cannot take raises a jtree error naming `file` and the op's key path.
  void build(nb::handle table, int codec, std::optional<int> level, nb::handle metadata,
             std::optional<std::string> file);
  /// The index of the op build() raised on, or -1.
  Py_ssize_t failed_op() const { return failed_op_; }
  /// The finished tree, taken once (the writer consumes it).
  jtree::Tree take();

 private:
  // Op `i` of `table` into the tree; returns its leaf id (UINT32_MAX for ops that add none).
  // `ids`: the leaf id of each earlier op, for TIED ops.
  uint32_t build_op(PyObject* table, Py_ssize_t i, const std::vector<uint32_t>& ids, int codec,
                    std::optional<int> level);
  // build()'s `metadata` ({str: bytes or str}) into the tree.
  void add_metadata(nb::handle metadata);
  // One node each: build() calls them for its ops.
  void begin(int kind, nb::handle key, std::optional<std::string> type_name,
             std::optional<nb::bytes> aux);
  void end();
  void none(nb::handle key);
  uint32_t int_value(nb::handle key, int64_t v);
  uint32_t big_int(nb::handle key, nb::bytes twos_complement_le);
  uint32_t float_value(nb::handle key, double v);
  uint32_t bool_value(nb::handle key, bool v);
  uint32_t complex_value(nb::handle key, double re, double im);
  /// Str, Bytes, ByteArray, CustomLeaf, Pickle: the payload is copied into the tree.
  uint32_t payload(nb::handle key, int kind, nb::bytes data, std::optional<std::string> type_name);
  /// An array leaf whose elements the writer reads from the array's memory.
  uint32_t array(nb::handle key, AnyArray a, int dtype_code, bool byteswap, uint32_t flags,
                 std::vector<uint64_t> chunk_shape, int codec, std::optional<int> level);
  /// A sharded array given as its shards: `pieces` is a list of (begin, ndarray), each the part
  /// of the global array starting at `begin`. Every chunk is filled from the shards it overlaps
  /// (exactly one when `chunk_shape` divides the shard shape), so the global array is never
  /// assembled in memory. With `segment` (one process's part of a multi-process save), the
  /// pieces are this process's shards only (jtree::LeafInput::shards, possibly none) and
  /// `shard_shape` the sharding's shard shape, the same in every process. `blocks`: the
  /// (begin, end) boxes of every block of the array in every process (jtree::LeafInput::blocks),
  /// from which the library cuts the chunk grid when `chunk_shape` is empty.
  uint32_t sharded(nb::handle key, int dtype_code, std::vector<uint64_t> shape, nb::list pieces,
                   uint32_t flags, std::vector<uint64_t> chunk_shape, int codec,
                   std::optional<int> level, std::vector<uint64_t> shard_shape, bool segment,
                   std::vector<std::pair<std::vector<uint64_t>, std::vector<uint64_t>>> blocks);
  /// An array leaf whose data `fetch()` returns when the writer reaches it (a C-contiguous,
  /// native-order array of `shape`); dropped once its chunks are written (deferred_leaf.h).
  uint32_t deferred(nb::handle key, int dtype_code, std::vector<uint64_t> shape, nb::object fetch,
                    uint32_t flags, std::vector<uint64_t> chunk_shape, int codec,
                    std::optional<int> level);
  /// A leaf keeping leaf #old_leaf of the file being appended to (partial writes).
  uint32_t reuse(nb::handle key, uint32_t old_leaf);
  void tied(nb::handle key, uint32_t leaf);

  void set_key(nb::handle key);
  uint32_t add(nb::handle key, jtree::Leaf l);
  /// An ARRAY op: through the buffer protocol where the object has it, else nb::ndarray;
  /// with `tie`, stored once per (memory, dtype, byte order, shape, strides).
  uint32_t table_array(nb::handle key, nb::handle obj, int dtype_code, bool byteswap,
                       uint32_t flags, bool tie, int codec, std::optional<int> level);

  jtree::TreeBuilder b_;
  std::vector<AnyArray> arrays_;  // keeps the arrays' owners alive while the tree is written
  std::vector<nb::object> fetches_;  // deferred leaves' callables, alive as long as the tree
  std::vector<std::shared_ptr<DeferredState>> deferred_;
  HeldBuffers buffers_;  // buffer-protocol arrays (build()), held like arrays_
  std::unordered_multimap<uintptr_t, TieEntry> ties_;  // by address (build())
  Py_ssize_t failed_op_ = -1;
  bool built_ = false;
  bool taken_ = false;
};

/// Adds Builder.build, Builder.failed_op and Builder.OPS (builder_table.cc).
void register_builder_table(nb::class_<Builder>& cls);

}  // namespace jtpy
