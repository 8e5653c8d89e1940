"""The execution of a load: what the plan queued (reads into host buffers, whole leaves to
take from the file's memory map, device requests, memory reservations) and the read that
carries it out (``Execution.read``: the map, one ``read_many``, one device pass).

Planning (jtree._load_plan, jtree._load_arrays) and the framework adapters
(jtree._load_adapter) queue through these methods; nothing here walks the tree or knows a
framework.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import _device, _device_options, _dtypes, _jtree
from . import _keypath as kp
from ._errors import NotSupportedError, ResourceExhaustedError, error
from ._index import mapped_box
from ._load_adapter import Thunk
from ._progress import Phases, finish
from ._structure import FileLeaf

# Execution.cache key of _device.overlap()'s answer for the load.
_OVERLAP = ("device overlap",)


class Execution:
    """One load's queues and budget, and the read that empties them."""

    def __init__(self, file: Any, opts: Any):
        self.file = file            # a jtree.File
        self.name = file.name
        self.o = opts               # the load's jtree._load.LoadOptions
        self.requests: List[Tuple[int, Any, Any, Any]] = []
        # Whole leaves to take from the file's memory map: (leaf, dtype or None for flat
        # bytes, path, slot).
        self.to_map: List[Tuple[FileLeaf, Optional[np.dtype], Tuple[Any, ...],
                                List[np.ndarray]]] = []
        self.cache: Dict[Any, Thunk] = {}
        # Tensors to fill straight in device memory (jtree._device): (leaf, box, tensor).
        self.device_requests: List[_device.Request] = []
        # The device requests already being read while the plan goes on (device_planned), and
        # the bytes planned since the last batch of them.
        self.early: Optional[_device.EarlyReads] = None
        self.unread_device_bytes = 0
        self.early_declined = False  # (a batch's destinations could not be placed early)
        # Why the first array bound for a device went through host memory instead (when
        # device_options are given: see check_device_options).
        self.host_path_reason: Optional[str] = None
        self.budget: Any = None  # this load's _jtree.MemoryBudget, made on first use (reserve)
        # Reservations not yet asked of the budget, in plan order: (bytes, path, allocate or
        # None). Asked in one native call (flush_reservations) before anything of them is
        # allocated, so a load's native calls do not grow with its leaves.
        self.reservations: List[Tuple[int, Tuple[Any, ...], Optional[Callable[[], None]]]] = []

    def err(self, cls: type, path: Tuple[Any, ...], msg: str):
        return error(cls, self.name, kp.join(path), msg)

    def reserve(self, nbytes: int, path: Tuple[Any, ...],
                allocate: Optional[Callable[[], None]] = None) -> None:
        """Reserves ``nbytes`` this load is about to allocate for its caller, before
        allocating them; ResourceExhaustedError naming the leaf when that is over the open
        file's limits. The rule is jtree::MemoryBudget's (lib/include/jtree/options.h,
        SECURITY.md "Limits"): each allocation within ``max_leaf_bytes``, all of one load's
        within ``max_total_bytes``. This load is one call with one budget; buffers the caller
        passed (``out=``) are not reserved.

        Without ``allocate`` the reservation is made now (with every one queued before it, in
        one native call): the caller allocates when this returns. With it, the reservation is
        queued and ``allocate()`` runs once it has been made (flush_reservations, at the
        latest when the plan is done): a load of many leaves asks the budget once."""
        self.reservations.append((nbytes, path, allocate))
        if allocate is None:
            self.flush_reservations()

    def flush_reservations(self, allocate: bool = True) -> None:
        """Makes the queued reservations in one native call (MemoryBudget.try_reserve_many),
        in the order they were queued, then runs their allocations (``allocate`` True);
        ResourceExhaustedError naming the first leaf that does not fit (nothing of the queue
        allocated)."""
        todo, self.reservations = self.reservations, []
        if not todo:
            return
        if self.budget is None:
            self.budget = _jtree.MemoryBudget(*self.file._reader.memory_limits())
        failed = self.budget.try_reserve_many([n for n, _, _ in todo])
        if failed is not None:
            i, why = failed
            raise self.err(ResourceExhaustedError, todo[i][1], f"the leaf {why}") from None
        if allocate:
            for _, _, alloc in todo:
                if alloc is not None:
                    alloc()

    def reserve_array(self, shape: Sequence[int], itemsize: int, path: Tuple[Any, ...],
                      allocate: Optional[Callable[[], None]] = None) -> None:
        """reserve() for an array of ``shape``, which must be one NumPy (and torch) can make:
        an empty array (a zero dimension) may have other dimensions whose product is no
        machine integer, which the file format allows and array libraries refuse."""
        n = itemsize
        for d in shape:
            n *= max(d, 1)
        if n >= 2 ** 63:
            raise self.err(NotSupportedError, path,
                           f"an array of shape {tuple(shape)} is too large for NumPy and torch "
                           f"to represent (even empty)")
        self.reserve(_nbytes(shape, itemsize), path, allocate)

    # ---- reading ----

    def request(self, leaf: FileLeaf, begin: Sequence[int], end: Sequence[int], dst: Any) -> None:
        """Queue a read of box [begin, end) of a leaf into dst (a flat uint8 view)."""
        n = 1
        for b, e in zip(begin, end):
            n *= e - b
        if n == 0:
            return
        whole = all(b == 0 for b in begin) and tuple(end) == leaf.shape
        self.requests.append((leaf.index, None if whole else list(begin),
                              None if whole else list(end), dst))

    def stored_array(self, fl: FileLeaf, npdt: Optional[np.dtype],
                     path: Tuple[Any, ...]) -> Thunk:
        """The whole leaf as an array of dtype ``npdt`` (its stored type), or (``npdt`` None)
        as its bytes in a flat uint8 array: with ``mmap`` on, a view of the file's
        copy-on-write memory map where the file holds the leaf as its array (the native Reader
        decides: raw, back to back, local); else a new array the leaf is read into."""
        if self.o.mmap and fl.chunked and fl.nbytes:
            slot: List[np.ndarray] = []
            self.to_map.append((fl, npdt, path, slot))
            return lambda: slot[0]
        return self.new_array(fl, npdt, path)

    def new_array(self, fl: FileLeaf, npdt: Optional[np.dtype],
                  path: Tuple[Any, ...]) -> Thunk:
        """A new array for the whole leaf (see stored_array), queued to be read into."""
        if npdt is None:
            shape, npdt = (fl.nbytes,), np.dtype(np.uint8)
        else:
            shape = fl.shape
        slot: List[np.ndarray] = []

        def allocate() -> None:  # (once reserved: see reserve)
            arr = np.empty(shape, npdt)
            if arr.size:
                self.requests.append((fl.index, None, None, _dtypes.numpy_bytes(arr)))
            slot.append(arr)

        self.reserve_array(shape, npdt.itemsize, path, allocate)
        return lambda: slot[0]

    def map_leaves(self, phases: Optional[Phases] = None) -> None:
        """Takes the queued whole leaves from the memory map in one native call (checksums
        verified on all cores, which also faults the pages in); leaves the file does not hold
        as their array are queued for read_many instead."""
        todo, self.to_map = self.to_map, []
        report = None
        if phases is not None:  # (mapped chunks are raw: their stored bytes are the leaves')
            base = phases.base
            report = lambda done, _total: phases.report(base + done)  # noqa: E731
        # (progress= only when asked: a native module built before it had no such argument)
        views = self.file._reader.map_leaves([fl.index for fl, _, _, _ in todo], self.o.verify,
                                             self.o.threads,
                                             **({"progress": report} if report else {}))
        unmapped = []
        for (fl, npdt, path, slot), view in zip(todo, views):
            if phases is not None and view is not None:
                phases.base += fl.nbytes
            if view is None:
                unmapped.append((slot, self.new_array(fl, npdt, path)))
            elif npdt is None:
                slot.append(view)  # (torch: tensors have no read-only flag)
            else:
                arr = view.view(npdt).reshape(fl.shape)
                if self.o.mmap == "r":
                    arr.flags.writeable = False
                slot.append(arr)
        if unmapped:
            self.flush_reservations()  # (the new arrays of the leaves not mapped, read next)
            for slot, made in unmapped:
                slot.append(made())

    def note_host_path(self, bound: Callable[[], bool], why: Callable[[], str]) -> None:
        """An array is read through host memory: when ``bound()`` (it was for device memory)
        and device_options are given, ``why()`` is kept (the first) for check_device_options.
        (Functions: a load without device_options pays nothing.)"""
        if self.o.device_options is not None and self.host_path_reason is None and bound():
            self.host_path_reason = why()

    def check_device_options(self) -> None:
        """Before anything is read: device_options given to a load that cannot use them is
        an error or a warning (jtree.DeviceOptions says which), never silently ignored."""
        opts = self.o.device_options
        if opts is None or self.device_requests or self.early is not None:
            return
        opts.last_stats = None
        if self.host_path_reason is not None:
            _device_options.not_used(opts, self.name, self.host_path_reason)
        elif self.requests or self.to_map:
            raise _device_options.not_a_device_load(self.name)

    def read(self) -> None:
        self.check_device_options()
        # progress: (bytes of the loaded leaves done, in all): the mapped leaves first, then
        # the leaves read (reported by the native reader in fetched bytes, scaled).
        phases = None
        if self.o.progress is not None:
            phases = Phases(self.o.progress, sum(fl.nbytes for fl, _, _, _ in self.to_map)
                            + sum(len(r[3]) for r in self.requests)
                            + sum(_device.nbytes(t) for _, _, t in self.device_requests))
        if self.to_map:
            self.map_leaves(phases)
        if self.requests:
            report = phases.phase(phases.total - phases.base) if phases is not None else None
            self.file._reader.read_many(self.requests, self.o.verify, self.o.threads,
                                        **({"progress": report} if report else {}))
            self.requests = []
        if self.early is not None:
            requests, self.device_requests = self.device_requests, []
            self.early.finish(requests)
        elif self.device_requests:
            size = sum(_device.nbytes(t) for _, _, t in self.device_requests)
            report = phases.phase(size) if phases is not None else None
            _device.read(self.file._reader, self.device_requests, verify=self.o.verify,
                         threads=self.o.threads, options=self.o.device_options,
                         progress=report)
            self.device_requests = []
        if phases is not None:
            finish(self.o.progress, phases.total)

    def device_planned(self, device: Any, nbytes: int) -> None:
        """An adapter planned ``nbytes`` more of device requests for ``device`` (a torch CUDA
        device: the fast paths of _load_torch; a JAX GPU: _load_jax.direct_to_devices): the
        staging buffers start being pinned once half the staging memory is planned
        (_device.planned). With JTREE_DEVICE_OVERLAP=reads (_device.overlap; not the default:
        measured slower), once a staging memory's worth of requests is planned they start
        being read (_device.EarlyReads) while the rest is planned and allocated; not with
        progress= (its phases count the whole load's bytes before anything is read), nor into
        out= arrays (a plan that fails later, on a structure that does not match, must leave
        the caller's arrays as they were), nor where a batch's destinations cannot be placed
        while the plan goes on (_device.place_early: JAX arrays when jtree cannot allocate
        their memory itself; the rest of the load is then read after the plan). None of it
        with JTREE_DEVICE_OVERLAP=0."""
        overlap = self.cache.get(_OVERLAP)
        if overlap is None:  # (asked once a load: it reads the environment)
            overlap = self.cache[_OVERLAP] = _device.overlap()
        if overlap == "0":
            return
        _device.planned(self.cache, device, nbytes, self.o.device_options)
        if (overlap != "reads" or self.o.progress is not None or self.o.fill_out
                or self.early_declined):
            return
        self.unread_device_bytes += nbytes
        # (A batch a staging memory's worth: it fills the staging buffers about once.)
        if self.unread_device_bytes >= _device.staging_bytes(self.o.device_options):
            if not _device.place_early(self.device_requests):
                self.early_declined = True
                return
            if self.early is None:
                self.early = _device.EarlyReads(self.file._reader, self.o.verify,
                                                self.o.threads, self.o.device_options)
            requests, self.device_requests = self.device_requests, []
            self.unread_device_bytes = 0
            self.early.submit(requests)

    # ---- host buffers (NumPy: what every adapter reads into on the host) ----

    def host_box(self, fl: FileLeaf, box: Tuple[Tuple[int, int], ...], path: Tuple[Any, ...],
                 dst: Optional[np.ndarray] = None) -> Thunk:
        """Box [begin, end) of a leaf as a NumPy array of the stored dtype, zeros where the box
        lies outside the stored shape (padding); read straight into `dst` (or a new array)
        when no padding is needed."""
        npdt = _dtypes.stored_numpy_dtype(fl.dtype, self.name, path)
        shape = tuple(e - b for b, e in box)
        inner_end = tuple(max(b, min(e, n)) for (b, e), n in zip(box, fl.shape))
        begin = tuple(b for b, _ in box)
        inner = tuple(ie - b for ie, b in zip(inner_end, begin))
        if inner == shape:
            if dst is None and shape == fl.shape and not any(begin):
                return self.stored_array(fl, npdt, path)  # the whole leaf (mapped or read)
            if dst is None:
                self.reserve_array(shape, npdt.itemsize, path)
            arr = dst if dst is not None else np.empty(shape, npdt)
            self.request(fl, begin, inner_end, _dtypes.numpy_bytes(arr))
            return lambda: arr
        self.reserve_array(shape, npdt.itemsize, path)
        self.reserve_array(inner, npdt.itemsize, path)
        arr = np.zeros(shape, npdt)
        tmp = np.empty(inner, npdt)
        self.request(fl, begin, inner_end, _dtypes.numpy_bytes(tmp))

        def done() -> np.ndarray:
            arr[tuple(slice(0, n) for n in inner)] = tmp
            return arr

        return done

    def mapped_part(self, fl: FileLeaf, box: Tuple[Tuple[int, int], ...], npdt: np.dtype,
                    path: Tuple[Any, ...], writable: bool) -> Optional[np.ndarray]:
        """Box of a leaf as a view of the file's memory map (jtree._index.mapped_box: the
        chunks it overlaps verified now), where ``mmap`` is on and the Reader maps the leaf (raw,
        local, back to back); None otherwise (the box is then read). A view that is not
        contiguous (columns of a row-major array) comes back as a contiguous copy, reserved as
        any array the load makes."""
        if not self.o.mmap or not fl.chunked:
            return None
        view = mapped_box(self.file._reader, fl.index, fl.shape, [b for b, _ in box],
                          [e for _, e in box], npdt, self.o.verify, self.o.threads, writable)
        if view is None or view.flags.c_contiguous:
            return view
        self.reserve_array(view.shape, npdt.itemsize, path)
        return np.ascontiguousarray(view)


def _nbytes(shape: Sequence[int], itemsize: int) -> int:
    n = itemsize
    for d in shape:
        n *= d
    return n
