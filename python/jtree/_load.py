"""Loading: the file's tree (+ a target tree, key-path patterns, options) -> Python objects.

One pass plans the load: it walks the file's tree beside the target, checks that they match,
decides for each chosen leaf where its bytes go (a freshly allocated NumPy array or torch
tensor of the right dtype and shape, a caller's ``out`` array, a buffer to cast or pad from),
and returns a function that builds the result. Then every chosen leaf is read in one
``read_many`` (chunk ranges coalesced, fetched and decoded in parallel, the GIL released),
straight into those buffers. Leaves that are not chosen are never read.
"""
from __future__ import annotations

import collections
import collections.abc
import difflib
import pickle
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import _device, _dtypes, _registry
from . import _torch_values as _tv
from . import _keypath as kp
from ._errors import (CorruptionError, InvalidArgumentError, NotFoundError, NotSupportedError,
                      ResourceExhaustedError, error)
from ._global_array import GlobalArray
from ._progress import Phases, TerminalBar, finish, progress_callback
from ._structure import (ARRAY, BOOL, BYTEARRAY, BYTES, COMPLEX, CUSTOM, CUSTOM_LEAF, DICT,
                         FLAG_SCALAR, FLOAT, INT, LEAF, LEAF_KIND_NAMES, LIST, NAMEDTUPLE,
                         NODE_KIND_NAMES, NONE, ORDEREDDICT, PICKLE, STR, TUPLE, FileLeaf,
                         FileNode, LeafSpec, allow_deep_trees, namedtuple_type, paused_gc,
                         spec_dtype_of)

Thunk = Callable[[], Any]
FRAMEWORKS = ("numpy", "torch", "jax")
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


def _memo(f: Thunk) -> Thunk:
    box: List[Any] = []

    def get() -> Any:
        if not box:
            box.append(f())
        return box[0]

    return get


def rebuild_container(kind: int, type_name: Optional[str], aux: Optional[bytes],
                      keys: Sequence[Any], children: List[Any], *, strict: bool,
                      nt_class: Optional[type] = None, file: Optional[str] = None,
                      key_path: str = "") -> Any:
    """The Python container for a file node, given its (already built) children."""
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
            return tuple(children)  # (Loader.container makes a torch.Size for framework="torch")
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


def spec_tree(node: FileNode, *, strict: bool, file: Optional[str],
              path: Tuple[Any, ...] = ()) -> Any:
    """The file's structure with a LeafSpec in place of each leaf (load_pytreedef)."""
    allow_deep_trees()
    with paused_gc():
        tree = node._tree
        if tree is not None and node.index == 0 and node._children is None:
            # Nothing of the file's tree is made yet: the whole structure comes from the
            # native Reader in one pass, without a FileNode or FileLeaf for each node.
            return _spec_tree_native(tree.reader, strict, file)
        return _spec_tree(node, strict, file, path)


def _spec_tree_native(reader: Any, strict: bool, file: Optional[str]) -> Any:
    """spec_tree of a whole file, built by the native Reader in one pass; only the containers
    that need Python (named tuples, OrderedDict, custom nodes) come back here."""
    def container(kind: int, type_name: Optional[str], aux: Optional[bytes], keys: List[Any],
                  values: List[Any], parts: Tuple[Any, ...]) -> Any:
        return rebuild_container(kind, type_name, aux, keys, values, strict=strict, file=file,
                                 key_path=kp.join(parts))
    return reader.spec_tree(LeafSpec, LEAF_KIND_NAMES, spec_dtype_of, container)


def _spec_tree(node: FileNode, strict: bool, file: Optional[str], path: Tuple[Any, ...]) -> Any:
    kind = node.kind
    if kind == LEAF:
        return node.leaf.spec()  # type: ignore[union-attr]
    if kind == NONE:
        return None
    children = node.children
    values = [c.leaf.spec() if c.kind == LEAF  # type: ignore[union-attr]
              else _spec_tree(c, strict, file, path + (c.key if c.key is not None else i,))
              for i, c in enumerate(children)]
    if kind == DICT:
        return dict(zip([c.key for c in children], values))
    if kind == LIST:
        return values
    if kind == TUPLE:
        return tuple(values)
    return rebuild_container(kind, node.type_name, node.aux, [c.key for c in children],
                             values, strict=strict, file=file, key_path=kp.join(path))


class LoadOptions:
    def __init__(self, *, framework: str = "numpy", cast: Any = None, pad_truncate: bool = False,
                 allow_pickle: bool = False, strict: bool = True, verify: bool = True,
                 threads: int = 0, shardings: Any = None, keys: Any = None,
                 device: Any = None, map_location: Any = None,
                 fill_out: bool = False, mmap: Any = True, prune: bool = False,
                 progress: Any = None):
        if framework not in FRAMEWORKS:
            raise InvalidArgumentError(f"framework must be one of {FRAMEWORKS}, not {framework!r}")
        if mmap not in MMAP_MODES or isinstance(mmap, int) and not isinstance(mmap, bool):
            raise InvalidArgumentError(f"mmap must be True (copy-on-write views of the file), "
                                       f"'r' (read-only views) or False (copies), not {mmap!r}")
        # device= (or map_location=) places torch tensors: it implies framework="torch".
        device = _tv.load_device(device, map_location) if (
            device is not None or map_location is not None) else None
        if device is not None:
            if framework == "jax" or shardings is not None:
                raise InvalidArgumentError("device= places torch tensors; JAX arrays are placed "
                                           "with shardings=")
            framework = "torch"
        self.device = device
        if shardings is not None:
            # shardings= asks for JAX arrays: it implies framework="jax", and contradicts torch.
            if framework == "torch":
                raise InvalidArgumentError("shardings= places JAX arrays; it cannot be used with "
                                           "framework='torch'")
            if not callable(shardings) and not _is_sharding(shardings):
                raise InvalidArgumentError(
                    f"shardings must be a jax.sharding.Sharding or a function (key_path, "
                    f"LeafSpec) -> Sharding, not a {type(shardings).__qualname__}")
            framework = "jax"
        self.mmap = mmap
        self.framework = framework
        self.cast = cast
        self.pad_truncate = pad_truncate
        self.allow_pickle = allow_pickle
        self.strict = strict
        self.verify = verify
        self.threads = threads
        self.shardings = shardings
        self.keys = kp.PatternSet(keys) if keys is not None else None
        self.fill_out = fill_out
        # prune: dicts drop the entries not loaded (no skeleton of Nones); see Loader.plan.
        self.prune = bool(prune)
        self.progress = progress_callback(progress, "load")


def dtype_name(d: Any, file: Optional[str] = None, key_path: Optional[str] = None) -> str:
    """The jtree name of a dtype given as a NumPy/ml_dtypes dtype, a torch dtype or a name."""
    if isinstance(d, str) and d in _dtypes.TABLE:
        return d
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(d, torch.dtype):
        name = _dtypes.name_of_torch(d)
    else:
        try:
            name = _dtypes.name_of_numpy(np.dtype(d))
        except TypeError:
            name = None
    if name is None:
        raise error(InvalidArgumentError, file, key_path, f"{d!r} is not a dtype jtree has")
    return name


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
        self.reserved = 0  # bytes this load allocated for its caller (see reserve)
        self.limits: Optional[Tuple[int, int]] = None  # the open's memory_limits(), once
        # The keys= patterns that matched nothing yet (reported once the plan is made).
        self.pending = set(range(len(opts.keys.patterns))) if opts.keys is not None else None

    def run(self, root: FileNode, target: Any, path: Tuple[Any, ...] = ()) -> Any:
        allow_deep_trees()
        try:
            # (Paused until the result is built: the plan's objects die with this Loader.)
            with paused_gc():
                if (target is ALL or target is True) and root._tree is not None:
                    root._tree.fill_all(root)  # the whole tree is walked: made in one pass
                build = self.plan(root, target, path)
                if self.pending:
                    raise self.unmatched(root, path)
                if build is _PRUNED:
                    build = _const({} if self.o.prune and root.kind in (DICT, ORDEREDDICT)
                                   else None)
                self.read()
                return build()
        except MemoryError:
            # Within the limits, but more than this machine has: still the file's doing.
            raise self.err(ResourceExhaustedError, path, "out of memory while loading (lower "
                           "the limits of jtree.open for files you do not trust)") from None

    def err(self, cls: type, path: Tuple[Any, ...], msg: str):
        return error(cls, self.name, kp.join(path), msg)

    def reserve(self, nbytes: int, path: Tuple[Any, ...]) -> None:
        """Counts ``nbytes`` this load is about to allocate for its caller against the open
        file's limits, before allocating them: each allocation within ``max_leaf_bytes``, all
        of one load's within ``max_total_bytes`` (SECURITY.md: a small hostile file must not
        make a load allocate without bound). Buffers the caller passed (``out=``) are not
        counted."""
        if self.limits is None:
            self.limits = tuple(self.file._reader.memory_limits())
        per_leaf, total = self.limits
        if nbytes > per_leaf:
            raise self.err(ResourceExhaustedError, path,
                           f"the leaf needs {nbytes} bytes, over the limit of {per_leaf} per "
                           f"leaf (max_leaf_bytes)")
        if nbytes > total - min(self.reserved, total):
            raise self.err(ResourceExhaustedError, path,
                           f"the leaf needs {nbytes} bytes; with the {self.reserved} this load "
                           f"already allocated that is over the limit of {total} in total "
                           f"(max_total_bytes)")
        self.reserved += nbytes

    def reserve_array(self, shape: Sequence[int], itemsize: int, path: Tuple[Any, ...]) -> None:
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
        self.reserve(_nbytes(shape, itemsize), path)

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
        if self.o.mmap and fl.chunk_shape and fl.nbytes:
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
        self.reserve_array(shape, npdt.itemsize, path)
        arr = np.empty(shape, npdt)
        if arr.size:
            self.requests.append((fl.index, None, None, arr.reshape(-1).view(np.uint8)))
        return lambda: arr

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
        for (fl, npdt, path, slot), view in zip(todo, views):
            if phases is not None and view is not None:
                phases.base += fl.nbytes
            if view is None:
                slot.append(self.new_array(fl, npdt, path)())
            elif npdt is None:
                slot.append(view)  # (torch: tensors have no read-only flag)
            else:
                arr = view.view(npdt).reshape(fl.shape)
                if self.o.mmap == "r":
                    arr.flags.writeable = False
                slot.append(arr)

    def read(self) -> None:
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
        if self.device_requests:
            size = sum(_device.nbytes(t) for _, _, t in self.device_requests)
            report = phases.phase(size) if phases is not None else None
            _device.read(self.file._reader, self.device_requests, verify=self.o.verify,
                         threads=self.o.threads, progress=report)
            self.device_requests = []
        if phases is not None:
            finish(self.o.progress, phases.total)

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
            return self.container(node, False, path)
        if node.kind == NONE:  # (a pattern naming it matched: the file holds None there)
            chosen = self.selected(path) if self.pending or self.o.prune else True
            return _const(None) if chosen or not self.o.prune else _PRUNED
        if node.kind == LEAF:
            if not self.selected(path):
                return _PRUNED if self.o.prune else _const(None)
            return self.leaf(node.leaf, target, path)  # type: ignore[arg-type]
        if self.pending and not node.children:
            self.selected(path)  # (a pattern naming an empty container matched it)
        return self.container(node, target, path)

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
        if kind == CUSTOM and type_name in _tv.NODES and _registry.node_for_name(type_name) is None:
            framework = self.o.framework  # torch.Size for torch, a tuple for the others
            name = self.name
            return lambda: _tv.build_node(type_name, [t() for t in thunks], framework, name,
                                          where)
        if kind == CUSTOM and strict and _registry.node_for_name(type_name or "") is None:
            raise _unregistered_node(type_name, self.name, where)
        name = self.name

        def build() -> Any:
            return rebuild_container(kind, type_name, aux, keys, [t() for t in thunks],
                                     strict=strict, nt_class=nt_class, file=name, key_path=where)

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
                near = [k for k in by_key if isinstance(k, str)]
                near = difflib.get_close_matches(missing[0], near, n=3, cutoff=0.5) \
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
        self.reserve(fl.nbytes, path)
        buf = bytearray(fl.nbytes)
        self.request(fl, (0,), (fl.nbytes,), np.frombuffer(buf, np.uint8))
        name = self.name
        where = kp.join(path)
        framework, type_name = self.o.framework, fl.type_name

        def build() -> Any:
            if builtin:
                return _tv.build_leaf(type_name, bytes(buf), framework, name, where)
            if k == STR:
                try:
                    return buf.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise error(CorruptionError, name, where,
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

    def array(self, fl: FileLeaf, target: Any, path: Tuple[Any, ...]) -> Thunk:
        if ((target is ALL or target is True) and self.o.framework == "numpy"
                and self.o.cast is None):
            fast = self.numpy_as_stored(fl, path)
            if fast is not None:
                return fast
        where = kp.join(path)
        framework = self.o.framework
        want: Optional[str] = None
        shape = fl.shape
        sharding = None
        device = None
        out = None
        torch = sys.modules.get("torch")
        jax = sys.modules.get("jax")
        t = target
        if isinstance(t, GlobalArray):
            return self.global_array(fl, t, path)
        if isinstance(t, LeafSpec):
            if t.kind != "array":
                raise self.err(InvalidArgumentError, path,
                               f"the target is a {t.kind} LeafSpec; the file has an array here")
            want, shape = dtype_name(t.dtype, self.name, where), tuple(t.shape)
        elif isinstance(t, np.ndarray):
            framework, want, shape = "numpy", dtype_name(t.dtype, self.name, where), t.shape
            out = t if self.o.fill_out else None
        elif torch is not None and isinstance(t, torch.Tensor):
            framework, want, shape = "torch", dtype_name(t.dtype, self.name, where), tuple(t.shape)
            device = t.device
            out = t if self.o.fill_out else None
        elif jax is not None and isinstance(t, (jax.Array, jax.ShapeDtypeStruct)):
            framework, want, shape = "jax", dtype_name(t.dtype, self.name, where), tuple(t.shape)
            sharding = getattr(t, "sharding", None)
        if framework == "torch" and (device is None or device.type == "meta"):
            # A target on the meta device gives shape and dtype only: the data goes to the
            # load's device= (default the CPU), never to meta, where it would be thrown away.
            if out is not None and out.device.type == "meta":
                out = None  # (a new tensor in the result: a meta tensor holds no memory)
            device = self.o.device
        if want is None:
            want = self.cast_for(fl.dtype, path)
        if shape != fl.shape:
            if len(shape) != len(fl.shape):
                raise self.err(InvalidArgumentError, path,
                               f"the file holds shape {fl.shape}; the target asks for {shape} "
                               f"(another rank)")
            if not self.o.pad_truncate:
                raise self.err(InvalidArgumentError, path,
                               f"the file holds shape {fl.shape}; the target asks for {shape}: "
                               f"pass pad_truncate=True to pad with zeros or truncate")
        if framework == "jax" and sharding is None and self.o.shardings is not None:
            s = self.o.shardings
            sharding = s(where, fl.spec()) if callable(s) else s
            if sharding is not None and not _is_sharding(sharding):
                raise self.err(InvalidArgumentError, path,
                               f"the shardings function returned a "
                               f"{type(sharding).__qualname__}, not a jax.sharding.Sharding "
                               f"(or None)")
        scalar = bool(fl.flags & FLAG_SCALAR) and shape == ()

        key = (fl.index, framework, want, shape, id(sharding), str(device), id(out))
        if out is None and key in self.cache:
            return self.cache[key]
        if framework == "numpy":
            get = self.numpy(fl, want, shape, out, path)
            thunk = _memo((lambda: get()[()]) if scalar else get)
        elif framework == "torch":
            thunk = _memo(self.torch(fl, want, shape, device, out, path))
        else:
            thunk = _memo(self.jax(fl, want, shape, sharding, path))
        self.cache[key] = thunk
        return thunk

    def numpy_as_stored(self, fl: FileLeaf, path: Tuple[Any, ...]) -> Optional[Thunk]:
        """The common case of array(): the whole leaf as a new NumPy array of the stored
        dtype, read straight into it (None when the dtype needs the general path)."""
        npdt = _dtypes._NUMPY_OF.get(fl.dtype)
        if npdt is None:
            if fl.dtype not in _dtypes.NUMPY_NATIVE and _dtypes.ml_dtypes() is None:
                return None  # (bfloat16 through numpy_cast, or the clear error)
            npdt = _dtypes.numpy_dtype(fl.dtype, self.name, path)
        shape = fl.shape
        # The key array() uses for the same leaf: tied leaves give the same array.
        key = (fl.index, "numpy", fl.dtype, shape, id(None), "None", id(None))
        thunk = self.cache.get(key)
        if thunk is not None:
            return thunk
        get = self.stored_array(fl, npdt, path)
        if fl.flags & FLAG_SCALAR and shape == ():
            thunk = _memo(lambda: get()[()])
        else:
            thunk = get
        self.cache[key] = thunk
        return thunk

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
        if self.o.framework == "torch":
            gets = [self.torch_box(fl, box, want, path) for box in boxes]
        else:
            stored = fl.dtype
            hosts = [self.host_box(fl, box, path) for box in boxes]
            gets = [(lambda h=h: self.numpy_cast(h(), stored, want, path)) for h in hosts]

        def build() -> GlobalArray:
            blocks = [g() for g in gets]
            return GlobalArray(blocks if isinstance(t.index, list) else blocks[0], t.index,
                               fl.shape, replica_id=t.replica_id)

        return build

    def torch_box(self, fl: FileLeaf, box: Tuple[Tuple[int, int], ...], want: str,
                  path: Tuple[Any, ...]) -> Thunk:
        """Box [begin, end) of a leaf as a CPU torch tensor of dtype ``want``."""
        import torch  # noqa: PLC0415

        where = kp.join(path)
        want_t = _dtypes.torch_dtype(want, self.name, where)
        if fl.dtype in _dtypes.TORCH_MISSING:  # through NumPy (ml_dtypes), cast there
            get = self.host_box(fl, box, path)
            stored = fl.dtype
            return lambda: torch.from_numpy(
                np.ascontiguousarray(self.numpy_cast(get(), stored, want, path)))
        stored_t = _dtypes.torch_dtype(fl.dtype, self.name, where)
        shape = tuple(e - b for b, e in box)
        if self.o.mmap and shape == fl.shape and all(b == 0 for b, _ in box):
            # The whole leaf: its bytes (mapped, or read) seen as a tensor without a copy.
            # (Torch tensors have no read-only flag: mmap="r" gives them copy-on-write too.)
            get_bytes = self.stored_array(fl, None, path)

            def tensor() -> Any:
                b = get_bytes()
                t = (torch.from_numpy(b).view(stored_t).reshape(shape) if b.size
                     else torch.empty(shape, dtype=stored_t))  # (torch views no empty bytes)
                return t if t.dtype == want_t else t.to(want_t)

            return tensor
        self.reserve_array(shape, torch.empty((), dtype=stored_t).element_size(), path)
        t = torch.empty(shape, dtype=stored_t)
        self.request(fl, [b for b, _ in box], [e for _, e in box], _dtypes.torch_bytes(t))
        return lambda: t if t.dtype == want_t else t.to(want_t)

    def cast_for(self, stored: str, path: Tuple[Any, ...]) -> str:
        c = self.o.cast
        where = kp.join(path)
        if c is None:
            return stored
        if callable(c) and not isinstance(c, type):
            got = c(where, stored)
            return stored if got is None else dtype_name(got, self.name, where)
        if isinstance(c, collections.abc.Mapping):
            for k, v in c.items():
                if dtype_name(k, self.name, where) == stored:
                    return dtype_name(v, self.name, where)
            return stored
        # One dtype: every floating-point array becomes it.
        return dtype_name(c, self.name, where) if _dtypes.is_floating(stored) else stored

    def stored_numpy_dtype(self, fl: FileLeaf, path: Tuple[Any, ...]) -> np.dtype:
        if fl.dtype == "bfloat16" and _dtypes.ml_dtypes() is None:
            return np.dtype(np.uint16)  # converted by numpy_cast (bit pattern)
        return _dtypes.numpy_dtype(fl.dtype, self.name, path)

    def numpy_cast(self, a: np.ndarray, stored: str, want: str,
                   path: Tuple[Any, ...]) -> np.ndarray:
        if stored == want:
            return a
        if stored == "bfloat16" and _dtypes.ml_dtypes() is None:
            if want not in ("float32", "float64"):
                _dtypes.numpy_dtype(stored, self.name, kp.join(path))  # raises the clear error
            f32 = (a.astype(np.uint32) << 16).view(np.float32)
            return f32 if want == "float32" else f32.astype(np.float64)
        return a.astype(_dtypes.numpy_dtype(want, self.name, kp.join(path)))

    def numpy(self, fl: FileLeaf, want: str, shape: Tuple[int, ...], out: Optional[np.ndarray],
              path: Tuple[Any, ...]) -> Thunk:
        # Both raise the clear error now, before anything is read, when ml_dtypes is missing.
        want_np = out.dtype if out is not None else _dtypes.numpy_dtype(want, self.name, path)
        stored_np = self.stored_numpy_dtype(fl, path)
        box = tuple((0, n) for n in shape)
        if want == fl.dtype and stored_np == want_np:
            if out is None:
                return self.host_box(fl, box, path)  # straight into the returned array
            if out.flags.c_contiguous and out.flags.writeable and out.shape == shape:
                return self.host_box(fl, box, path, dst=out)  # straight into the caller's
        get = self.host_box(fl, box, path)
        stored = fl.dtype

        def done() -> np.ndarray:
            a = self.numpy_cast(get(), stored, want, path)
            if out is None:
                return a
            np.copyto(out, a, casting="unsafe")
            return out

        return done

    def torch(self, fl: FileLeaf, want: str, shape: Tuple[int, ...], device: Any, out: Any,
              path: Tuple[Any, ...]) -> Thunk:
        import torch  # noqa: PLC0415

        where = kp.join(path)
        want_t = _dtypes.torch_dtype(want, self.name, where)

        def finish(t: Any) -> Any:
            if t.dtype != want_t:
                t = t.to(want_t)
            if out is not None:
                if t is not out:
                    out.copy_(t)
                return out
            if device is not None and t.device != device:
                t = t.to(device)
            return t

        box = tuple((0, n) for n in shape)
        if fl.dtype in _dtypes.TORCH_MISSING:  # through NumPy (ml_dtypes), cast there
            get = self.torch_box(fl, box, want, path)
            return lambda: finish(get())
        stored_t = _dtypes.torch_dtype(fl.dtype, self.name, where)
        inner = tuple(min(a, b) for a, b in zip(shape, fl.shape))
        zeros = (0,) * len(shape)
        if inner == shape and _device.direct(device):
            # Straight into device memory (jtree._device): no host copy of the leaf first.
            if _device.usable_out(out, device, stored_t, shape):
                dst = out
            else:
                self.reserve_array(shape, torch.empty((), dtype=stored_t).element_size(), path)
                dst = torch.empty(shape, dtype=stored_t, device=device)
            self.device_requests.append((fl.index, None, dst))
            return lambda: finish(dst)
        if inner == shape:
            if (out is not None and out.dtype == stored_t and out.device.type == "cpu"
                    and tuple(out.shape) == shape and out.is_contiguous()):
                self.request(fl, zeros, shape, _dtypes.torch_bytes(out))  # straight into it
                return lambda: finish(out)
            get = self.torch_box(fl, box, want, path)  # a new tensor, cast to `want`
            return lambda: finish(get())
        size = torch.empty((), dtype=stored_t).element_size()
        self.reserve_array(shape, size, path)
        self.reserve_array(inner, size, path)
        full = torch.zeros(shape, dtype=stored_t)
        tmp = torch.empty(inner, dtype=stored_t)
        self.request(fl, zeros, inner, _dtypes.torch_bytes(tmp))

        def padded() -> Any:
            full[tuple(slice(0, n) for n in inner)] = tmp
            return finish(full)

        return padded

    def jax(self, fl: FileLeaf, want: str, shape: Tuple[int, ...], sharding: Any,
            path: Tuple[Any, ...]) -> Thunk:
        import jax  # noqa: PLC0415

        stored = fl.dtype
        if sharding is None:
            get = self.host_box(fl, tuple((0, n) for n in shape), path)
            return lambda: _dtypes.jax_device_put(self.numpy_cast(get(), stored, want, path),
                                                  None, self.name, kp.join(path))
        # Each device's slice is read on its own (replicas once): the global array is never
        # assembled in host memory.
        index_map = sharding.addressable_devices_indices_map(shape)
        per_device = [(dev, tuple(_slice_bounds(s, n) for s, n in zip(index, shape)))
                      for dev, index in index_map.items()]
        direct = self.jax_direct(fl, want, shape, sharding, per_device, path)
        if direct is not None:
            return direct
        boxes: Dict[Tuple[Tuple[int, int], ...], Thunk] = {}
        for _dev, box in per_device:
            if box not in boxes:
                boxes[box] = self.host_box(fl, box, path)

        def build() -> Any:
            host = {b: self.numpy_cast(g(), stored, want, path) for b, g in boxes.items()}
            arrays = [_dtypes.jax_device_put(host[b], d, self.name, kp.join(path))
                      for d, b in per_device]
            return jax.make_array_from_single_device_arrays(shape, sharding, arrays)

        return build

    def jax_direct(self, fl: FileLeaf, want: str, shape: Tuple[int, ...], sharding: Any,
                   per_device: List[Tuple[Any, Tuple[Tuple[int, int], ...]]],
                   path: Tuple[Any, ...]) -> Optional[Thunk]:
        """A sharded JAX leaf whose device slices are read straight into each device's memory:
        a contiguous torch tensor per device filled by the staging pipeline (jtree._device),
        handed to JAX through DLPack without a copy (replicas are read once per device).
        None where that path does not apply: a device that is not a CUDA GPU jtree and torch
        both see, a dtype torch lacks, float8 (older torch and JAX versions do not pass it
        through DLPack alike), padding (pad_truncate)."""
        if fl.dtype in _dtypes.TORCH_MISSING or fl.dtype.startswith("float8") or not per_device:
            return None
        if any(e > n for _, box in per_device for (_, e), n in zip(box, fl.shape)):
            return None
        devs = [_device.torch_device_of_jax(d) for d, _ in per_device]
        if any(td is None for td in devs):
            return None
        import jax  # noqa: PLC0415
        import torch  # noqa: PLC0415

        stored_t = _dtypes.torch_dtype(fl.dtype, self.name, kp.join(path))
        size = torch.empty((), dtype=stored_t).element_size()
        cast = None if want == fl.dtype else _dtypes.numpy_dtype(want, self.name, path)
        tensors = []
        for (_, box), td in zip(per_device, devs):
            bshape = tuple(e - b for b, e in box)
            self.reserve_array(bshape, size, path)
            t = torch.empty(bshape, dtype=stored_t, device=td)
            whole = bshape == fl.shape
            self.device_requests.append(
                (fl.index, None if whole else ([b for b, _ in box], [e for _, e in box]), t))
            tensors.append(t)

        def build() -> Any:
            arrays = []
            for (d, _), t in zip(per_device, tensors):
                a = jax.dlpack.from_dlpack(t)
                if a.devices() != {d}:  # (the stand-in's host tensors land on JAX's first CPU)
                    a = jax.device_put(a, d)
                arrays.append(a if cast is None else a.astype(cast))
            return jax.make_array_from_single_device_arrays(shape, sharding, arrays)

        return build

    def host_box(self, fl: FileLeaf, box: Tuple[Tuple[int, int], ...], path: Tuple[Any, ...],
                 dst: Optional[np.ndarray] = None) -> Thunk:
        """Box [begin, end) of a leaf as a NumPy array of the stored dtype, zeros where the box
        lies outside the stored shape (padding); read straight into `dst` (or a new array)
        when no padding is needed."""
        npdt = self.stored_numpy_dtype(fl, path)
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


def _is_sharding(x: Any) -> bool:
    """True for a jax.sharding.Sharding (what device_put and make_array_from_single_device_arrays
    take); checked without importing JAX when it is not loaded."""
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(x, jax.sharding.Sharding)


def _nbytes(shape: Sequence[int], itemsize: int) -> int:
    n = itemsize
    for d in shape:
        n *= d
    return n


def _slice_bounds(s: Any, n: int) -> Tuple[int, int]:
    start, stop, step = s.indices(n)
    if step != 1:
        raise InvalidArgumentError(f"sharding index with step {step}")
    return start, stop
