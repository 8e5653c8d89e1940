"""Loading: the file's tree (+ a target tree, key-path patterns, options) -> Python objects.

One pass plans the load: it walks the file's tree beside the target, checks that they match,
decides for each chosen leaf where its bytes go (a freshly allocated NumPy array or torch
tensor of the right dtype and shape, a caller's ``out`` array, a buffer to cast or pad from),
and returns a function that builds the result. Then every chosen leaf is read in one
``read_many`` (chunk ranges coalesced, fetched and decoded in parallel, the GIL released),
straight into those buffers. Leaves that are not chosen are never read.

This module is the framework-neutral core (the walk, the checks, the read, NumPy host buffers);
each framework's arrays are planned by its adapter, ``_load_numpy`` / ``_load_torch`` /
``_load_jax`` (the interface: jtree._load_adapter), chosen by ``ADAPTERS``.
"""
from __future__ import annotations

import collections
import collections.abc
import pickle
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import _device, _device_options, _dtypes, _jtree, _placement, _registry
from . import _torch_values as _tv
from . import _keypath as kp
from ._errors import (CorruptionError, Error, InvalidArgumentError, NotFoundError,
                      NotSupportedError, ResourceExhaustedError, error)
from . import _load_jax, _load_numpy, _load_plain, _load_torch
from ._global_array import GlobalArray
from ._index import mapped_box
from ._load_adapter import Placement, Thunk, array_key
from ._load_adapter import memo as _memo
from ._progress import Phases, TerminalBar, finish, progress_callback
from ._shard import SKIP, Slices
from ._structure import (ARRAY, BOOL, BYTEARRAY, BYTES, COMPLEX, CUSTOM, CUSTOM_LEAF, DICT,
                         FLAG_SCALAR, FLOAT, INT, LEAF, LEAF_KIND_NAMES, LIST, NAMEDTUPLE,
                         NODE_KIND_NAMES, NONE, ORDEREDDICT, PICKLE, STR, TUPLE, FileLeaf,
                         FileNode, LeafSpec, allow_deep_trees, namedtuple_type, paused_gc,
                         spec_dtype_of)

# The framework adapters (jtree._load_adapter): what framework= may name, and who plans it.
ADAPTERS = {a.NAME: a for a in (_load_numpy, _load_torch, _load_jax)}
FRAMEWORKS = tuple(ADAPTERS)
MMAP_MODES = (True, False, "r")


class _All:
    """The target meaning 'everything below, as stored'."""

    def __repr__(self) -> str:
        return "ALL"


ALL = _All()


def _PRUNED() -> Any:
    """The plan of a subtree ``prune=True`` leaves out (never called: containers drop it)."""
    return None


def _key_paths(root: FileNode, path: Tuple[Any, ...], limit: int = 200_000) -> List[str]:
    """The key paths of every node below ``root`` (at most ``limit``), for error messages."""
    out: List[str] = []
    stack = [(root, path)]
    while stack and len(out) < limit:
        node, p = stack.pop()
        if p:
            out.append(kp.join(p))
        if node.kind not in (LEAF, NONE):
            stack.extend(reversed([(c, p + (c.key if c.key is not None else i,))
                                   for i, c in enumerate(node.children)]))
    return out


def _const(v: Any) -> Thunk:
    return lambda: v


def rebuild_container(kind: int, type_name: Optional[str], aux: Optional[bytes],
                      keys: Sequence[Any], children: List[Any], *, strict: bool,
                      nt_class: Optional[type] = None, file: Optional[str] = None,
                      key_path: str = "", framework: str = "numpy") -> Any:
    """The Python container for a file node, given its (already built) children (a
    torch.Size node unregistered here: a torch.Size for ``framework="torch"``, else a tuple)."""
    if kind == DICT:
        return dict(zip(keys, children))
    if kind == ORDEREDDICT:
        return collections.OrderedDict(zip(keys, children))
    if kind == LIST:
        return list(children)
    if kind == TUPLE:
        return tuple(children)
    if kind == NAMEDTUPLE:
        if nt_class is None:
            try:
                nt_class = namedtuple_type(type_name or "NamedTuple", tuple(keys))
            except ValueError as e:
                raise error(NotSupportedError, file, key_path,
                            f"namedtuple {type_name} with fields {tuple(keys)}: {e}, so Python "
                            f"cannot rebuild it as a namedtuple (jtree.open reads its "
                            f"children by key path; a mask can skip it)") from None
        return nt_class(*children)
    if kind == CUSTOM:
        entry = _registry.node_for_name(type_name or "")
        keyed = bool(keys) and keys[0] is not None
        if entry is None and type_name in _tv.NODES:
            return _tv.build_node(type_name, children, framework, file, key_path)
        if entry is None:
            if strict:
                raise _unregistered_node(type_name, file, key_path)
            return dict(zip(keys, children)) if keyed else list(children)
        aux_value = entry.deserialize_auxdata(aux or b"")
        try:
            return _registry.unflatten_node(entry, aux_value, children,
                                            list(keys) if keyed else None)
        except _registry.UnflattenError as e:
            raise error(InvalidArgumentError, file, key_path, str(e)) from None
    raise AssertionError(f"not a container kind: {kind}")


def _unregistered_node(type_name: Optional[str], file: Optional[str], key_path: str):
    if (type_name or "").startswith(_registry.DATACLASS_PREFIX):
        module, _, qualname = type_name[len(_registry.DATACLASS_PREFIX):].partition(":")
        return error(NotSupportedError, file, key_path,
                     f"the file holds a dataclass {qualname!r} of module {module!r} (registered "
                     f"with JAX when saved): import that module before loading (jtree never "
                     f"imports a module a file names), register the class with "
                     f"jtree.register_pytree_node_serialization(cls, serialized_name="
                     f"{type_name!r}, ...), or pass strict=False to load it as a dict")
    return error(NotSupportedError, file, key_path,
                 f"the file holds a custom node {type_name!r} that is not registered in this "
                 f"process: register it with jtree.register_pytree_node_serialization("
                 f"cls, serialized_name={type_name!r}, ...), or pass strict=False to load it "
                 f"as a plain dict or list")


def spec_tree(node: FileNode, *, strict: bool, file: Optional[str]) -> Any:
    """The file's structure with a LeafSpec in place of each leaf (load_pytreedef, File.structure)
    of the root ``node``: built by the native Reader in one pass (Reader.spec_tree,
    bindings/python/src/spec_tree.cc, the one structure-to-spec builder of a file), whatever
    of the file's FileNodes are made; only the containers that need Python (named tuples,
    OrderedDict, custom nodes) come back here."""
    assert node.index == 0 and node._tree is not None, "spec_tree is of a file's root"
    allow_deep_trees()
    with paused_gc():
        return node._tree.reader.spec_tree(LeafSpec, LEAF_KIND_NAMES, spec_dtype_of,
                                           container_builder(strict, file))


def container_builder(strict: bool, file: Optional[str],
                      framework: str = "numpy") -> Callable[..., Any]:
    """The ``container(kind, type_name, aux, keys, values, key_path_parts)`` callback of the
    native tree walks (Reader.spec_tree, Reader.load_plain): the containers that need Python
    (named tuples, OrderedDict, custom nodes), by rebuild_container's rules."""
    def container(kind: int, type_name: Optional[str], aux: Optional[bytes],
                  keys: List[Any], values: List[Any], parts: Tuple[Any, ...]) -> Any:
        return rebuild_container(kind, type_name, aux, keys, values, strict=strict,
                                 file=file, key_path=kp.join(parts), framework=framework)
    return container


def checked_mmap(mmap: Any) -> None:
    """InvalidArgumentError unless ``mmap=`` is one of MMAP_MODES (None: the File's, checked
    there)."""
    if mmap is not None and (mmap not in MMAP_MODES
                             or isinstance(mmap, int) and not isinstance(mmap, bool)):
        raise InvalidArgumentError(f"mmap must be True (copy-on-write views of the file), "
                                   f"'r' (read-only views) or False (copies), not {mmap!r}")


class LoadOptions:
    """The options of one load, checked: built once per call from the public arguments
    (jtree._load_call.call_options, for every entry point that loads) and passed down to the
    Loader and the plain pass. Its keyword arguments are the one list of load options. The
    five file settings (``allow_pickle``, ``strict``, ``verify``, ``threads``, ``mmap``) left
    None are the open File's, taken by :meth:`take_file_settings` once the file is open."""

    def __init__(self, *, keys: Any = None, framework: str = "numpy", cast: Any = None,
                 pad_truncate: bool = False, allow_pickle: Optional[bool] = None,
                 strict: Optional[bool] = None, verify: Optional[bool] = None,
                 threads: Optional[int] = None, device: Any = None, map_location: Any = None,
                 shardings: Any = None, mmap: Any = None, prune: bool = False,
                 progress: Any = False, device_options: Any = None, slices: Any = None,
                 fill_out: bool = False):
        # Where its arrays go (framework, device, direct path or not), decided once.
        self.placement = _placement.resolve(framework, device, map_location, shardings,
                                            FRAMEWORKS)
        self.framework, self.device = self.placement.framework, self.placement.device
        checked_mmap(mmap)
        self.mmap = mmap
        self.cast = cast
        self.pad_truncate = pad_truncate
        self.allow_pickle = allow_pickle
        self.strict = strict
        self.verify = verify
        self.threads = threads
        self.shardings = shardings
        self.keys = kp.PatternSet(keys) if keys is not None else None
        # fill_out: the target is out= (its arrays filled in place), not pytree=.
        self.fill_out = fill_out
        # prune: dicts drop the entries not loaded (no skeleton of Nones); see Loader.plan.
        self.prune = bool(prune)
        self.progress = progress_callback(progress, "load")
        # Settings of the loads into device memory (jtree.DeviceOptions), or None.
        self.device_options = _device_options.checked(device_options)
        # What part of each array leaf is read (jtree._shard: a rank's shard), or None.
        if slices is not None and shardings is not None:
            raise InvalidArgumentError("slices= reads parts of leaves as they are; shardings= "
                                       "places whole JAX arrays: give one of them")
        self.slices = Slices(slices) if slices is not None else None

    def file_settings(self) -> Dict[str, Any]:
        """The file settings this load gives (not None): what opening its path takes."""
        return {k: v for k, v in (("verify", self.verify), ("threads", self.threads),
                                  ("allow_pickle", self.allow_pickle),
                                  ("strict", self.strict), ("mmap", self.mmap))
                if v is not None}

    def take_file_settings(self, f: Any) -> "LoadOptions":
        """Fills the file settings left None with the open File ``f``'s; returns self."""
        if self.verify is None:
            self.verify = f.verify_checksums
        if self.threads is None:
            self.threads = f.threads
        if self.allow_pickle is None:
            self.allow_pickle = f.allow_pickle
        if self.strict is None:
            self.strict = f.strict
        if self.mmap is None:
            self.mmap = f.mmap
        return self


# Loader.cache key of _device.overlap()'s answer for the load.
_OVERLAP = ("device overlap",)


class Loader:
    """One load: plan (``plan``), read (``read``), build (the returned thunk)."""

    def __init__(self, file: Any, opts: LoadOptions):
        self.file = file            # a jtree.File
        self.name = file.name
        self.o = opts
        if isinstance(opts.progress, TerminalBar):
            opts.progress.label = f"load {self.name}"
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
        # The keys= patterns that matched nothing yet (reported once the plan is made).
        self.pending = set(range(len(opts.keys))) if opts.keys is not None else None

    def run(self, root: FileNode, target: Any, path: Tuple[Any, ...] = ()) -> Any:
        allow_deep_trees()
        try:
            # (Paused until the result is built: the plan's objects die with this Loader.)
            with paused_gc():
                if self.own_structure(root, target, path):
                    target = ALL  # (the same load: every leaf as stored)
                if (target is ALL or target is True) and root._tree is not None:
                    if _load_plain.applies(self.o):
                        got = _load_plain.load(
                            root._tree.reader,
                            container_builder(self.o.strict, self.name, self.o.framework),
                            self.o, root.index, path)
                        if got is not None:
                            tree, unmatched = got
                            if unmatched:
                                self.pending = set(unmatched)
                                raise self.unmatched(root, path)
                            return tree
                    keys = self.o.keys
                    if keys is None or keys.may_walk_everything():
                        # The whole tree is walked: made in one pass. (A selection made
                        # container by container makes only the containers it looks into; the
                        # skeleton of the others, without prune, is made natively: none_tree.)
                        root._tree.fill_all(root)
                try:
                    build = self.plan(root, target, path)
                    if self.pending:
                        raise self.unmatched(root, path)
                    if self.o.slices is not None:
                        e = self.o.slices.unmatched(self.name, lambda: _key_paths(root, path))
                        if e is not None:
                            raise e
                except Exception:
                    # An earlier leaf over the budget is reported first, as when each leaf
                    # was reserved as it was planned.
                    self.flush_reservations(allocate=False)
                    raise
                self.flush_reservations()
                if build is _PRUNED:
                    build = _const({} if self.o.prune and root.kind in (DICT, ORDEREDDICT)
                                   else None)
                self.read()
                return build()
        except MemoryError:
            # Within the limits, but more than this machine has: still the file's doing.
            raise self.err(ResourceExhaustedError, path, "out of memory while loading (lower "
                           "the limits of jtree.open for files you do not trust)") from None
        finally:
            if self.early is not None:
                self.early.settle()  # (a failed plan: no early read may outlive the load)

    def own_structure(self, root: FileNode, target: Any, path: Tuple[Any, ...]) -> bool:
        """Whether ``target`` is the file's own structure, ``load_pytreedef``'s tree of it as
        it came (the JAX proposal's ``load(path, pytree=load_pytreedef(path))``): a load with
        it is the load of everything as stored (each LeafSpec target of the stored dtype and
        shape, Spec values ignored), so it can take the plain pass. Asked of whole-file
        loads without cast= (which a LeafSpec's dtype overrides), keys= or prune, and only
        where the target's first leaf is a LeafSpec (the file's structure is then built,
        about 1 us a leaf, and compared)."""
        if (root.index != 0 or path or root._tree is None or self.o.cast is not None
                or self.o.keys is not None or self.o.prune or self.o.slices is not None):
            return False
        first = target
        while isinstance(first, (dict, list, tuple)) and first:
            first = next(iter(first.values())) if isinstance(first, dict) else first[0]
        if not isinstance(first, LeafSpec) or first is target:
            return False
        try:
            return bool(target == spec_tree(root, strict=self.o.strict, file=self.name))
        except (ValueError, TypeError, Error):
            # (An array in the target has no truth value; a custom node this process cannot
            # rebuild is the general path's error to raise, where the target reaches it.)
            return False

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

    # ---- planning ----

    def selected(self, path: Tuple[Any, ...]) -> bool:
        return self.o.keys is None or self.o.keys.selects([str(p) for p in path], self.pending)

    def unmatched(self, root: FileNode, path: Tuple[Any, ...]):
        """The NotFoundError for the keys= patterns that matched nothing, with the key paths
        nearest each (a typo in a key must not load an all-None tree without a word)."""
        assert self.o.keys is not None and self.pending
        paths = _key_paths(root, path)
        lines = []
        for i in sorted(self.pending):
            text = self.o.keys.text(i)
            near = kp.nearest(text, paths)
            lines.append(f"{text!r} (nearest: {', '.join(map(repr, near))})" if near
                         else f"{text!r}")
        top = [kp.join(path + (c.key if c.key is not None else i,))
               for i, c in enumerate(root.children[:10])] if root.kind not in (LEAF, NONE) \
            else []
        return self.err(NotFoundError, path,
                        f"keys= {'pattern' if len(lines) == 1 else 'patterns'} "
                        f"{'; '.join(lines)} matched nothing in the file"
                        + (f" (its top-level keys: {', '.join(map(repr, top))}"
                           f"{', ...' if len(root.children) > 10 else ''})" if top else ""))

    def plan(self, node: FileNode, target: Any, path: Tuple[Any, ...]) -> Thunk:
        # With prune, what is not loaded is _PRUNED: a dict drops it (Loader.container).
        if target is None or target is Ellipsis:
            return _PRUNED if self.o.prune else _const(target)
        if target is False:  # a boolean mask: False skips the data. As JAX's load does (a
            # mask is a tree prefix), a subtree keeps its structure with None leaves.
            if self.o.prune:
                return _PRUNED
            if node.kind in (LEAF, NONE):
                return _const(None)
            return self.none_tree(node, path)
        if node.kind == NONE:  # (a pattern naming it matched: the file holds None there)
            chosen = self.selected(path) if self.pending or self.o.prune else True
            return _const(None) if chosen or not self.o.prune else _PRUNED
        if node.kind == LEAF:
            if not self.selected(path):
                return _PRUNED if self.o.prune else _const(None)
            return self.leaf(node.leaf, target, path)  # type: ignore[arg-type]
        if ((target is ALL or target is True) and self.o.keys is not None
                and not self.o.keys.may_select_below([str(p) for p in path])):
            # Nothing at or below it can be selected: not a leaf of it is looked at (with
            # prune the parent drops it, its children not even made; else its structure, with
            # None leaves, as a False mask gives).
            return _PRUNED if self.o.prune else self.none_tree(node, path)
        if self.pending and not node.children:
            self.selected(path)  # (a pattern naming an empty container matched it)
        return self.container(node, target, path)

    def none_tree(self, node: FileNode, path: Tuple[Any, ...]) -> Thunk:
        """The structure of container ``node`` with None leaves (a False mask, a part no keys=
        pattern can reach), made now in one native pass (Reader.none_tree), not a plan and a
        thunk per node: a container Python cannot rebuild (an unregistered custom node with
        strict=True) fails before anything is read, as the walk's check did."""
        assert node._tree is not None  # (every FileNode is made by a file's LazyTree)
        return _const(node._tree.reader.none_tree(
            node.index, container_builder(self.o.strict, self.name, self.o.framework), path))

    def container(self, node: FileNode, target: Any, path: Tuple[Any, ...]) -> Thunk:
        pairs, nt_class = self.match(node, target, path)
        # Unkeyed children are never filtered out, so their position in `pairs` is theirs.
        thunks = [self.plan(c, t, path + (c.key if c.key is not None else i,))
                  for i, (c, t) in enumerate(pairs)]
        keys = [c.key for c, _ in pairs]
        if self.o.prune:
            if pairs and all(t is _PRUNED for t in thunks):
                return _PRUNED  # nothing below is loaded: the parent drops this container
            if not pairs and not (self.o.keys is None or self.selected(path)):
                return _PRUNED
            if node.kind in (DICT, ORDEREDDICT):
                keys = [k for k, t in zip(keys, thunks) if t is not _PRUNED]
                thunks = [t for t in thunks if t is not _PRUNED]
            else:  # positions and fields keep their place: None where nothing is loaded
                thunks = [_const(None) if t is _PRUNED else t for t in thunks]
        kind, type_name, aux, strict = node.kind, node.type_name, node.aux, self.o.strict
        if kind == DICT:  # the common case, without the generic dispatch
            return lambda: dict(zip(keys, [t() for t in thunks]))
        if kind in (LIST, TUPLE):
            make = list if kind == LIST else tuple
            return lambda: make([t() for t in thunks])
        where = kp.join(path) if kind == CUSTOM else ""  # (only custom nodes' errors use it)
        if (kind == CUSTOM and strict and type_name not in _tv.NODES
                and _registry.node_for_name(type_name or "") is None):
            raise _unregistered_node(type_name, self.name, where)  # (before anything is read)
        name, framework = self.name, self.o.framework

        def build() -> Any:
            return rebuild_container(kind, type_name, aux, keys, [t() for t in thunks],
                                     strict=strict, nt_class=nt_class, file=name, key_path=where,
                                     framework=framework)

        return build

    def match(self, node: FileNode, target: Any,
              path: Tuple[Any, ...]) -> Tuple[List[Tuple[FileNode, Any]], Optional[type]]:
        """The children to load with their targets, and the namedtuple class to build."""
        children = node.children
        if target is ALL or target is True:
            return [(c, ALL) for c in children], None
        if target is False:
            return [(c, False) for c in children], None
        t = type(target)
        nt_class = t if isinstance(target, tuple) and hasattr(t, "_fields") else None
        if nt_class is not None and node.kind == NAMEDTUPLE:
            if tuple(t._fields) != tuple(c.key for c in children):
                raise self.err(InvalidArgumentError, path,
                               f"the target namedtuple {t.__qualname__} has fields {t._fields}; "
                               f"the file's has {tuple(c.key for c in children)}")
            return list(zip(children, target)), nt_class
        if isinstance(target, collections.abc.Mapping):
            if not node.keyed() and children:
                raise self.mismatch(node, target, path)
            by_key = {c.key: c for c in children}
            missing = [k for k in target if k not in by_key]
            if missing:
                names = {kp.escape(k): k for k in by_key if isinstance(k, str)}
                near = [names[n] for n in kp.nearest(kp.escape(missing[0]), list(names))] \
                    if isinstance(missing[0], str) else []
                raise self.err(NotFoundError, path + (missing[0],),
                               f"the target names key {missing[0]!r}, which the file does not "
                               f"have here ({f'nearest: {near}; ' if near else ''}it has "
                               f"{list(by_key)[:20]}{'...' if len(by_key) > 20 else ''})")
            if node.kind in (DICT, ORDEREDDICT):  # a partial dict: only the target's keys
                return [(c, target[c.key]) for c in children if c.key in target], None
            return [(c, target.get(c.key)) for c in children], None
        if isinstance(target, (list, tuple)):
            if node.kind in (DICT, ORDEREDDICT):  # by key only
                raise self.mismatch(node, target, path)
            if len(target) != len(children):
                raise self.err(InvalidArgumentError, path,
                               f"the target has {len(target)} children here; the file's "
                               f"{NODE_KIND_NAMES[node.kind]} has {len(children)}")
            return list(zip(children, target)), None
        entry = _registry.node_for_type(t) or _registry.dataclass_entry(target)
        if entry is not None:
            values, keys, _aux = _registry.flatten_node(entry, target, self.name, kp.join(path))
            if keys is not None and node.keyed():
                return self.match(node, dict(zip(keys, values)), path)
            return self.match(node, list(values), path)
        raise self.mismatch(node, target, path)

    def mismatch(self, node: FileNode, target: Any, path: Tuple[Any, ...]):
        return self.err(InvalidArgumentError, path,
                        f"the file has a {NODE_KIND_NAMES[node.kind]} here; the target a "
                        f"{type(target).__qualname__}")

    def leaf(self, fl: FileLeaf, target: Any, path: Tuple[Any, ...]) -> Thunk:
        k = fl.kind
        if k in (INT, FLOAT, BOOL, COMPLEX):
            return _const(fl.value)
        if k == ARRAY:
            return self.array(fl, target, path)
        key = ("payload", fl.index)
        if key not in self.cache:
            self.cache[key] = self.payload(fl, path)
        return self.cache[key]

    def payload(self, fl: FileLeaf, path: Tuple[Any, ...]) -> Thunk:
        k = fl.kind
        entry = None
        if k == PICKLE and not self.o.allow_pickle:
            raise self.err(InvalidArgumentError, path,
                           "the leaf is a pickled object; pass allow_pickle=True to unpickle it "
                           "(only for files you trust: unpickling runs code)")
        builtin = False  # a torch value jtree knows (torch.dtype), made per framework
        if k == CUSTOM_LEAF:
            entry = _registry.leaf_for_name(fl.type_name or "")
            builtin = entry is None and fl.type_name in _tv.LEAVES
            if entry is None and self.o.strict and not builtin:
                raise self.err(NotSupportedError, path,
                               f"the file holds a custom leaf {fl.type_name!r} that is not "
                               f"registered in this process: register it with "
                               f"jtree.register_pytree_leaf_serialization(cls, serialized_name="
                               f"{fl.type_name!r}, ...), or pass strict=False to get its bytes")
        bufs: List[bytearray] = []

        def allocate() -> None:  # (once reserved: see reserve)
            bufs.append(bytearray(fl.nbytes))
            self.request(fl, (0,), (fl.nbytes,), np.frombuffer(bufs[0], np.uint8))

        self.reserve(fl.nbytes, path, allocate)
        name = self.name  # (the key path only when used: it is a native call)
        framework, type_name = self.o.framework, fl.type_name

        def build() -> Any:
            buf = bufs[0]
            if builtin:
                return _tv.build_leaf(type_name, bytes(buf), framework, name, kp.join(path))
            if k == STR:
                try:
                    return buf.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise error(CorruptionError, name, kp.join(path),
                                f"str leaf is not UTF-8: {e}") from None
            if k == BYTES:
                return bytes(buf)
            if k == BYTEARRAY:
                return buf
            if k == CUSTOM_LEAF:
                return entry.deserialize_leaf(bytes(buf)) if entry is not None else bytes(buf)
            return pickle.loads(buf)

        return _memo(build)

    # ---- arrays ----

    def spec_as_stored(self, fl: FileLeaf, t: Any, path: Tuple[Any, ...]) -> Optional[Thunk]:
        """A LeafSpec target of the stored shape and dtype (``load_pytreedef``'s tree given
        back as the target, the JAX proposal's way to restore) is the leaf as stored, in the
        load's framework: that adapter's ``as_stored`` (what the general path makes of it: a
        LeafSpec's dtype is taken as it is, cast= does not apply). None otherwise."""
        if (not isinstance(t, LeafSpec) or t.kind != "array" or tuple(t.shape) != fl.shape
                or t.dtype is None):
            return None
        try:
            name = _dtypes.dtype_name(t.dtype)
        except (InvalidArgumentError, TypeError):
            return None  # (the general path's clear error)
        if name != fl.dtype:
            return None
        framework = self.o.framework
        return (_load_numpy.as_stored(self, fl, path) if framework == "numpy"
                else _load_torch.as_stored(self, fl, path) if framework == "torch"
                else _load_jax.as_stored(self, fl, path))

    def array(self, fl: FileLeaf, target: Any, path: Tuple[Any, ...]) -> Thunk:
        """An array leaf: where it goes (the target's framework, dtype, shape and placement,
        else the load's options), planned by that framework's adapter."""
        if self.o.slices is not None:
            part = self.o.slices.select(self.file._reader, self.name, fl, path)
            if part is SKIP:
                return _PRUNED if self.o.prune else _const(None)
            if part is not None:
                return self.sliced(fl, part, target, path)
        if (target is ALL or target is True) and self.o.cast is None:
            fast = (_load_numpy.as_stored(self, fl, path) if self.o.framework == "numpy"
                    else _load_torch.as_stored(self, fl, path) if self.o.framework == "torch"
                    else _load_jax.as_stored(self, fl, path))
            if fast is not None:
                return fast
        else:  # a torch template of the stored dtype and shape (cast= and pad_truncate= do
            # not apply to a template)
            fast = (_load_torch.from_template(self, fl, target, path)
                    or _load_jax.from_template(self, fl, target, path)
                    or self.spec_as_stored(fl, target, path))
            if fast is not None:
                return fast
        where = kp.join(path)
        t = target
        if isinstance(t, GlobalArray):
            return self.global_array(fl, t, path)
        p: Optional[Placement] = None
        if isinstance(t, LeafSpec):
            if t.kind != "array":
                raise self.err(InvalidArgumentError, path,
                               f"the target is a {t.kind} LeafSpec; the file has an array here")
            p = Placement(self.o.framework, _dtypes.dtype_name(t.dtype, self.name, where),
                          tuple(t.shape))
        else:
            for adapter in ADAPTERS.values():
                p = adapter.target(self, t, where)
                if p is not None:
                    break
        if p is None:  # (True, ALL or another leaf: as stored, in the load's framework)
            p = Placement(self.o.framework, None, fl.shape)
        adapter = ADAPTERS[p.framework]
        if p.want is None:
            p.want = self.cast_for(fl.dtype, path)
        shape = p.shape
        if shape != fl.shape:
            if len(shape) != len(fl.shape):
                raise self.err(InvalidArgumentError, path,
                               f"the file holds shape {fl.shape}; the target asks for {shape} "
                               f"(another rank)")
            if not self.o.pad_truncate:
                raise self.err(InvalidArgumentError, path,
                               f"the file holds shape {fl.shape}; the target asks for {shape}: "
                               f"pass pad_truncate=True to pad with zeros or truncate")
        adapter.settle(self, fl, p, path)
        scalar = bool(fl.flags & FLAG_SCALAR) and shape == ()

        key = array_key(fl, p.framework, p.want, shape, p.sharding, p.device, p.out)
        if p.out is None and key in self.cache:
            return self.cache[key]
        thunk = _memo(adapter.array(self, fl, p, scalar, path))
        self.cache[key] = thunk
        return thunk

    def sliced(self, fl: FileLeaf, part: Tuple[List[int], List[int], Tuple[Any, ...]],
               target: Any, path: Tuple[Any, ...]) -> Thunk:
        """The part of a leaf ``slices=`` names (jtree._shard): box [begin, end) read in the
        load's one pass (only the chunks it overlaps), then ``post`` applied (ints drop their
        dimension, steps), in the load's framework and cast; into the ``out=`` array when
        the load has one (of the part's shape)."""
        begin, end, post = part
        box = tuple(zip(begin, end))
        want = self.cast_for(fl.dtype, path)
        out = None
        if (isinstance(target, LeafSpec) and target.kind == "array" and target.dtype is not None
                and tuple(target.shape) == fl.shape):
            # (load_pytreedef's structure given back as the target: its dtype is the cast)
            want = _dtypes.dtype_name(target.dtype, self.name, kp.join(path))
        elif target is not ALL and target is not True:
            if not self.o.fill_out:
                raise self.err(InvalidArgumentError, path,
                               "slices= reads a part of this leaf: its target must be True (or "
                               "absent), the file's LeafSpec, or with out= an array of the "
                               "part's shape (cast= gives the dtype)")
            if post:
                raise self.err(InvalidArgumentError, path,
                               "slices= with out=: the index must be slices of step 1 (the "
                               "out array is filled with the box as it is)")
            out = target
            shape = tuple(e - b for b, e in box)
            if tuple(getattr(out, "shape", ())) != shape:
                raise self.err(InvalidArgumentError, path,
                               f"slices= reads a part of shape {shape}; the out array has "
                               f"shape {tuple(getattr(out, 'shape', ()))}")
        # (Tied leaves, the same part of one leaf: one array, as whole tied leaves are.)
        key = ("part", fl.index, box, repr(post), self.o.framework, want)
        if out is None and key in self.cache:
            return self.cache[key]
        get = _memo(ADAPTERS[self.o.framework].part(self, fl, box, want, out, path))
        if post:
            part_of, adapter = get, ADAPTERS[self.o.framework]
            get = _memo(lambda: adapter.index(part_of(), post))
        if out is None:
            self.cache[key] = get
        return get

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

    def global_array(self, fl: FileLeaf, t: GlobalArray, path: Tuple[Any, ...]) -> Thunk:
        """The blocks of a leaf a GlobalArray target names, each read on its own (only the
        chunks it overlaps), as NumPy arrays or (framework="torch") tensors."""
        if t.shape is not None and tuple(t.shape) != fl.shape:
            raise self.err(InvalidArgumentError, path, f"the file holds shape {fl.shape}; the "
                           f"GlobalArray target says {tuple(t.shape)}")
        try:
            boxes = t.boxes(fl.shape)
        except InvalidArgumentError as e:
            raise self.err(InvalidArgumentError, path, str(e)) from None
        want = self.cast_for(fl.dtype, path)
        block = ADAPTERS[self.o.framework].block
        gets = [block(self, fl, box, want, path) for box in boxes]

        def build() -> GlobalArray:
            blocks = [g() for g in gets]
            return GlobalArray(blocks if isinstance(t.index, list) else blocks[0], t.index,
                               fl.shape, replica_id=t.replica_id)

        return build

    # ---- host buffers (NumPy: what every adapter reads into on the host) ----

    def cast_for(self, stored: str, path: Tuple[Any, ...]) -> str:
        c = self.o.cast
        where = kp.join(path)
        if c is None:
            return stored
        if callable(c) and not isinstance(c, type):
            got = c(where, stored)
            return stored if got is None else _dtypes.dtype_name(got, self.name, where)
        if isinstance(c, collections.abc.Mapping):
            for k, v in c.items():
                if _dtypes.dtype_name(k, self.name, where) == stored:
                    return _dtypes.dtype_name(v, self.name, where)
            return stored
        # One dtype: every floating-point array becomes it.
        return _dtypes.dtype_name(c, self.name, where) if _dtypes.is_floating(stored) else stored

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


def _nbytes(shape: Sequence[int], itemsize: int) -> int:
    n = itemsize
    for d in shape:
        n *= d
    return n
