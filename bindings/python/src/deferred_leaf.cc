// See deferred_leaf.h.
#include "deferred_leaf.h"

#include <nanobind/ndarray.h>

#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "piece_copy.h"

namespace jtpy {

using jtree::Box;
using jtree::Status;
using HeldArray = nb::ndarray<nb::ro, nb::c_contig>;

// One deferred leaf. Pool threads fill its chunks concurrently: the first one fetches the
// array (under the leaf's mutex, then the GIL: a thread never holds the GIL while it waits for
// a mutex, so no lock-order cycle), the last one to finish drops it. A chunk asked for after
// the drop fetches it again: slower, never wrong. Boxes are counted once each (by their
// origin), so a box asked for twice cannot make the leaf look done early.
struct DeferredState {
  PyObject* fetch = nullptr;  // borrowed (see deferred_fill)
  jtree::Shape shape;
  size_t item = 0;
  uint64_t total = 0;  // elements

  std::mutex mu;
  std::optional<HeldArray> held;  // released only with the GIL held
  Piece piece;
  uint64_t served = 0;  // elements of the distinct boxes copied out since the fetch
  std::set<jtree::Shape> boxes;  // their origins
  int users = 0;        // threads copying from `held` now
};

namespace {

// Calls fetch() and checks its result (GIL held).
Status fetch_array(DeferredState& st) {
  try {
    nb::object r = nb::borrow(st.fetch)();
    HeldArray a;
    if (!nb::try_cast(r, a)) {
      return Status::invalid_argument(
          "a deferred leaf's fetch() returned " +
          std::string(nb::type_name(r.type()).c_str()) +
          ", not a C-contiguous host array");
    }
    bool same = a.ndim() == st.shape.size() && a.itemsize() == st.item;
    for (size_t d = 0; same && d < st.shape.size(); ++d) same = a.shape(d) == st.shape[d];
    if (!same) {
      return Status::invalid_argument(
          "a deferred leaf's fetch() returned an array whose shape or element size differs "
          "from the leaf's");
    }
    st.piece.begin.assign(st.shape.size(), 0);
    st.piece.shape = st.shape;
    st.piece.data = static_cast<const std::byte*>(a.data());
    st.piece.strides.assign(st.shape.size(), 0);
    int64_t acc = static_cast<int64_t>(st.item);
    for (size_t d = st.shape.size(); d-- > 0;) {
      st.piece.strides[d] = acc;
      acc *= static_cast<int64_t>(st.shape[d]);
    }
    st.held.emplace(std::move(a));
    return Status::success();
  } catch (nb::python_error& e) {
    // The exception's type and message (what() would add the whole traceback).
    std::string what = nb::borrow<nb::str>(nb::str(e.type().attr("__name__"))).c_str();
    what += ": ";
    what += nb::str(e.value()).c_str();
    return Status::invalid_argument("a deferred leaf's fetch() raised " + what);
  } catch (const std::exception& e) {
    return Status::invalid_argument(std::string("a deferred leaf's fetch() failed: ") + e.what());
  }
}

}  // namespace

jtree::FillFn deferred_fill(nb::handle fetch, jtree::Shape shape, size_t item,
                            std::shared_ptr<DeferredState>* state) {
  auto st = std::make_shared<DeferredState>();
  st->fetch = fetch.ptr();
  st->total = Box::all(shape).num_elements();
  st->shape = std::move(shape);
  st->item = item;
  *state = st;
  return [st](const Box& box, std::span<std::byte> dst) -> Status {
    std::unique_lock lk(st->mu);
    if (!st->held) {
      nb::gil_scoped_acquire gil;
      Status s = fetch_array(*st);
      if (!s.ok()) return s;
    }
    ++st->users;
    const Piece piece = st->piece;
    lk.unlock();
    const uint64_t n = copy_from_piece(piece, box, st->item, dst.data());
    lk.lock();
    --st->users;
    if (st->boxes.insert(box.begin).second) st->served += n;
    if (st->served < st->total || st->users > 0) return Status::success();
    std::optional<HeldArray> done = std::move(st->held);
    st->held.reset();
    st->served = 0;
    st->boxes.clear();
    lk.unlock();
    nb::gil_scoped_acquire gil;
    done.reset();
    return Status::success();
  };
}

void release_deferred(DeferredState& st) {
  std::lock_guard lk(st.mu);
  st.held.reset();
  st.served = 0;
  st.boxes.clear();
}

}  // namespace jtpy
