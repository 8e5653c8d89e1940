"""Saving: Python objects -> a tree of nodes -> the native Builder -> jtree::save / append.

``flatten`` walks the caller's objects once, in the caller's thread, and decides what each one
is (container, scalar, array, registered type); arrays are referenced, not copied, unless a
snapshot is asked for (non-blocking saves). ``emit`` then drives the native Builder, possibly
merged with a file's current tree (``partial_write``), and the library writes.
"""
from __future__ import annotations

import collections
import math
import pickle
import sys
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from . import _dtypes, _jtree, _registry
from . import _torch_values
from . import _keypath as kp
from ._errors import Error, InvalidArgumentError, error
from ._deferred import Deferred
from ._global_array import GlobalArray, box_of
from ._structure import (ARRAY, BOOL, BYTEARRAY, BYTES, COMPLEX, CUSTOM, CUSTOM_LEAF, DICT,
                         FLAG_SCALAR, FLOAT, INT, LEAF, LIST, NAMEDTUPLE,
                         NODE_KIND_NAMES, NONE,
                         ORDEREDDICT, PICKLE, STR, TUPLE, FileNode, allow_deep_trees,
                         leaf_specs, namedtuple_field_problem,
                         namedtuple_type_name, paused_gc)

# The readers' default depth limit (jtree::Limits::max_depth): deeper files would be refused.
MAX_DEPTH = 512
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
# Where an array leaf's elements come from.
# MEMORY: a host array tied to others by its memory in the native build (Builder.build), not
# here: a NumPy array of a save that takes no snapshot (no native call per array to find its
# address).
HOST, MEMORY, SHARDED, DEFERRED = "host", "memory", "sharded", "deferred"


class SLeaf:
    """A leaf to write. ``data`` depends on ``kind``: the Python value (scalars), bytes
    (payloads), or for arrays (HOST or MEMORY, array, byteswap) or (SHARDED, [(begin, shard)...],
    blocks, shard_shape, segment), where blocks are the boxes ``((begin, end), ...)`` of every
    block of the array in every process, from which the library cuts the chunk grid."""

    __slots__ = ("kind", "data", "dtype", "shape", "flags", "type_name")

    def __init__(self, kind: int, data: Any, dtype: str = "", shape: Tuple[int, ...] = (),
                 flags: int = 0, type_name: Optional[str] = None):
        self.kind, self.data, self.dtype, self.shape = kind, data, dtype, shape
        self.flags, self.type_name = flags, type_name

    def spec_row(self) -> Tuple[Any, ...]:
        """This leaf's row for _structure.leaf_specs (whose native rule makes the LeafSpec the
        file will give it): (kind, flags, dtype code | None, shape, nbytes, type_name), nbytes
        being the size in memory of an array's elements or of a payload's bytes (0 for a
        scalar)."""
        if self.kind == ARRAY:
            code, item, _ = _dtypes.TABLE[self.dtype]
            nbytes = math.prod(self.shape) * item
        else:
            code = None
            nbytes = len(self.data) if isinstance(self.data, (bytes, bytearray)) else 0
        return (self.kind, self.flags, code, self.shape, nbytes, self.type_name)


class SNode:
    """A node to write: a container with children, None, a leaf, or (``keep``) a subtree of
    the file being appended to."""

    __slots__ = ("kind", "key", "children", "type_name", "aux", "leaf", "keep")

    def __init__(self, kind: int, key: Any = None, children: Optional[List["SNode"]] = None,
                 type_name: Optional[str] = None, aux: Optional[bytes] = None,
                 leaf: Optional[SLeaf] = None, keep: Optional[FileNode] = None):
        self.kind, self.key, self.children = kind, key, children if children is not None else []
        self.type_name, self.aux, self.leaf, self.keep = type_name, aux, leaf, keep


class SaveOptions:
    """What flatten needs to know besides the objects."""

    def __init__(self, *, allow_pickle: bool = False, snapshot: bool = False,
                 chunk_bytes: Optional[int] = None, file: Optional[str] = None):
        self.allow_pickle = allow_pickle
        self.snapshot = snapshot
        self.chunk_bytes = chunk_bytes or (4 << 20)
        self.file = file


# ---- flatten -----------------------------------------------------------------------------------

class _Flattener:
    def __init__(self, opts: SaveOptions):
        self.o = opts
        # Tied arrays: one SLeaf for objects that are the same array (same memory and view).
        self.ties: Dict[Any, SLeaf] = {}
        # Objects whose addresses key `ties`: alive until the save ends, so none is reused.
        self.keepalive: List[Any] = []
        # NumPy leaves of a snapshot save, copied once the walk is over (copy_snapshots).
        self.snapshots: List[SLeaf] = []
        # A jax.Array spread over several processes was met: a multi-process save.
        self.segmented = False
        self.jax_global = False
        # GlobalArray leaves (path, leaf, boxes of replica 0 held here): their chunk grid is
        # agreed on by all processes before the save (multi_process.plan_global_arrays).
        self.global_leaves: List[Tuple[Tuple[Any, ...], SLeaf, List[Any]]] = []

    def err(self, cls: type, path: Tuple[Any, ...], msg: str) -> Error:
        return error(cls, self.o.file, kp.join(path), msg)

    def visit(self, x: Any, key: Any, path: Tuple[Any, ...], depth: int) -> SNode:
        if depth > MAX_DEPTH:
            raise self.err(InvalidArgumentError, path,
                           f"the tree is nested deeper than {MAX_DEPTH} levels")
        t = type(x)
        if x is None:
            return SNode(NONE, key)
        if t is bool:
            return SNode(LEAF, key, leaf=SLeaf(BOOL, x))
        if t is int:
            return SNode(LEAF, key, leaf=SLeaf(INT, x))
        if t is float:
            return SNode(LEAF, key, leaf=SLeaf(FLOAT, x))
        if t is complex:
            return SNode(LEAF, key, leaf=SLeaf(COMPLEX, x))
        if t is str:
            try:
                data = x.encode("utf-8")
            except UnicodeEncodeError as e:
                raise self.err(InvalidArgumentError, path,
                               f"str is not valid Unicode: {e}") from None
            return SNode(LEAF, key, leaf=SLeaf(STR, data))
        if t is bytes:
            return SNode(LEAF, key, leaf=SLeaf(BYTES, x))
        if t is bytearray:
            return SNode(LEAF, key, leaf=SLeaf(BYTEARRAY, bytes(x)))

        leaf_entry = _registry.leaf_for_type(t)
        if leaf_entry is not None:
            data = _registry.as_bytes(leaf_entry.serialize_leaf(x), "serialize_leaf",
                                      self.o.file, kp.join(path))
            return SNode(LEAF, key, leaf=SLeaf(CUSTOM_LEAF, data, type_name=leaf_entry.name))
        node_entry = _registry.node_for_type(t)
        if node_entry is not None:
            return self.custom(x, node_entry, key, path, depth)

        if t is dict or t is collections.OrderedDict:
            children = []
            for k, v in x.items():
                self.check_key(k, path)
                children.append(self.visit(v, k, path + (k,), depth + 1))
            return SNode(DICT if t is dict else ORDEREDDICT, key, children)
        if t is list or t is tuple:
            return SNode(LIST if t is list else TUPLE, key,
                         [self.visit(v, None, path + (i,), depth + 1) for i, v in enumerate(x)])
        if isinstance(x, tuple) and isinstance(getattr(t, "_fields", None), tuple):
            problem = namedtuple_field_problem(t._fields)
            if problem is not None:  # a loader could only rename it (silently wrong)
                raise self.err(InvalidArgumentError, path,
                               f"namedtuple {t.__qualname__}: {problem}; it could not be "
                               f"loaded back as a namedtuple")
            return SNode(NAMEDTUPLE, key,
                         [self.visit(v, f, path + (f,), depth + 1) for f, v in zip(t._fields, x)],
                         type_name=namedtuple_type_name(t))

        leaf = self.array(x, path)
        if leaf is not None:
            return SNode(LEAF, key, leaf=leaf)
        known = self.known_value(x, key, path, depth)
        if known is not None:
            return known
        if self.o.allow_pickle:
            return SNode(LEAF, key, leaf=SLeaf(PICKLE, pickle.dumps(x, protocol=5)))
        if _registry.is_jax_node(x):
            raise self.err(InvalidArgumentError, path,
                           f"{t.__module__}.{t.__qualname__} is a JAX pytree node whose "
                           f"serialization is not registered: call "
                           f"jtree.register_pytree_node_serialization({t.__qualname__}, ...)")
        raise self.err(InvalidArgumentError, path,
                       f"cannot save an object of type {t.__module__}.{t.__qualname__}: it is "
                       f"not an array, a built-in value or container, nor a registered type "
                       f"(jtree.register_pytree_leaf_serialization / "
                       f"register_pytree_node_serialization); allow_pickle=True would pickle it")

    def known_value(self, x: Any, key: Any, path: Tuple[Any, ...],
                    depth: int) -> Optional[SNode]:
        """Values saved without a registration (reached only by objects of no other kind):
        torch.Size and torch.dtype (jtree._torch_values), and dataclasses registered with
        JAX (jax.tree_util.register_dataclass, flax.struct.dataclass: jtree._registry)."""
        form = _torch_values.saved_form(x)
        if form is not None:
            kind, name, value = form
            if kind == "leaf":
                return SNode(LEAF, key, leaf=SLeaf(CUSTOM_LEAF, value, type_name=name))
            return SNode(CUSTOM, key, [self.visit(v, None, path + (i,), depth + 1)
                                       for i, v in enumerate(value)], type_name=name, aux=b"")
        entry = _registry.dataclass_entry(x)
        if entry is not None:
            return self.custom(x, entry, key, path, depth)
        return None

    def check_key(self, k: Any, path: Tuple[Any, ...]) -> None:
        if type(k) is str:
            return
        if type(k) is int and _INT64_MIN <= k <= _INT64_MAX:
            return
        raise self.err(InvalidArgumentError, path,
                       f"dict key {k!r} of type {type(k).__name__}: keys must be str or int "
                       f"(in the int64 range)")

    def custom(self, x: Any, entry: "_registry.NodeEntry", key: Any, path: Tuple[Any, ...],
               depth: int) -> SNode:
        where = kp.join(path)
        children, keys, aux = _registry.flatten_node(entry, x, self.o.file, where)
        aux_bytes = _registry.as_bytes(entry.serialize_auxdata(aux), "serialize_auxdata",
                                       self.o.file, where)
        nodes = []
        for i, c in enumerate(children):
            k = keys[i] if keys is not None else None
            nodes.append(self.visit(c, k, path + (k if keys is not None else i,), depth + 1))
        return SNode(CUSTOM, key, nodes, type_name=entry.name, aux=aux_bytes)

    # -- arrays --

    def array(self, x: Any, path: Tuple[Any, ...]) -> Optional[SLeaf]:
        if isinstance(x, GlobalArray):
            return self.global_array(x, path)
        if isinstance(x, Deferred):
            return self.deferred(x, path)
        if isinstance(x, np.ndarray):
            return self.numpy(x, path, 0)
        if isinstance(x, np.generic):
            return self.numpy(np.asarray(x), path, FLAG_SCALAR)
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(x, torch.Tensor):
            return self.torch(x, path)
        jax = sys.modules.get("jax")
        if jax is not None and isinstance(x, jax.Array):
            return self.jax_array(x, path)
        if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
            return self.dlpack(x, path)
        return None

    def deferred(self, x: Deferred, path: Tuple[Any, ...]) -> SLeaf:
        name = _dtypes.name_of_numpy(x.dtype)
        if name is None:
            raise self.err(InvalidArgumentError, path,
                           f"NumPy dtype {x.dtype} has no jtree dtype (supported: "
                           f"{', '.join(sorted(_dtypes.TABLE))})")
        self.keepalive.append(x)
        return self.tie(("deferred", id(x)),
                        lambda: SLeaf(ARRAY, (DEFERRED, x.host_fetch()), name, x.shape, 0))

    def tie(self, key: Any, make) -> SLeaf:
        leaf = self.ties.get(key)
        if leaf is None:
            leaf = self.ties[key] = make()
        return leaf

    def numpy(self, x: np.ndarray, path: Tuple[Any, ...], flags: int) -> Optional[SLeaf]:
        # (np.ma is imported lazily, at some cost: no masked array exists until it is)
        ma = sys.modules.get("numpy.ma")
        if ma is not None and isinstance(x, ma.MaskedArray):
            if self.o.allow_pickle:
                return None
            raise self.err(InvalidArgumentError, path, "masked arrays are not supported "
                           "(save .data and .mask separately, or allow_pickle=True)")
        name = _dtypes.name_of_numpy(x.dtype)
        if name is None:
            if self.o.allow_pickle:
                return None  # pickled whole
            raise self.err(InvalidArgumentError, path,
                           f"NumPy dtype {x.dtype} has no jtree dtype (supported: "
                           f"{', '.join(sorted(_dtypes.TABLE))})")

        view, byteswap = _dtypes.host_view(x)
        if x.size == 0 or flags:
            return self.host_leaf(view, byteswap, name, x.shape, flags)
        # Tied by its memory when the native Builder takes the table (the same memory, dtype,
        # byte order, shape and strides: stored once); the Builder holds the array. A snapshot
        # copies it after the walk (copy_snapshots), once per memory.
        leaf = SLeaf(ARRAY, (MEMORY, view, byteswap), name, x.shape, 0)
        if self.o.snapshot:
            self.snapshots.append(leaf)
        return leaf

    def copy_snapshots(self) -> None:
        """Replaces the NumPy arrays of a snapshot save by copies, one per memory (the same
        memory seen through the same view twice is copied once, and so stays tied). Their
        addresses come from one native call for all of them."""
        leaves, self.snapshots = self.snapshots, []
        if not leaves:
            return
        addresses = _jtree.data_addresses([leaf.data[1] for leaf in leaves])
        copies: Dict[Any, np.ndarray] = {}
        for leaf, address in zip(leaves, addresses):
            _, view, byteswap = leaf.data
            key = (address, view.shape, view.strides, leaf.dtype, byteswap)
            c = copies.get(key)
            if c is None:
                c = copies[key] = view.copy(order="K")
            leaf.data = (MEMORY, c, byteswap)

    def host_leaf(self, view: np.ndarray, byteswap: bool, name: str, shape: Tuple[int, ...],
                  flags: int) -> SLeaf:
        if self.o.snapshot:
            view = view.copy(order="K")
        return SLeaf(ARRAY, (HOST, view, byteswap), name, shape, flags)

    def torch(self, x: Any, path: Tuple[Any, ...]) -> SLeaf:
        import torch  # noqa: PLC0415

        if x.layout != torch.strided:
            raise self.err(InvalidArgumentError, path,
                           f"torch tensors with layout {x.layout} are not supported "
                           f"(use .to_dense())")
        name = _dtypes.name_of_torch(x.dtype)
        if name is None:
            raise self.err(InvalidArgumentError, path, f"torch dtype {x.dtype} has no jtree dtype")
        try:
            t = x.detach()
            if t.device.type != "cpu":
                t = t.cpu()  # a copy: the library reads host memory
            t = t.resolve_conj().resolve_neg()
        except Exception as e:  # noqa: BLE001  (meta tensors, devices that cannot copy)
            raise self.err(InvalidArgumentError, path,
                           f"cannot read this torch tensor from {x.device}: {e}") from None

        def make() -> SLeaf:
            v = t.clone() if self.o.snapshot else t
            return SLeaf(ARRAY, (HOST, _dtypes.torch_raw_view(v), False), name, tuple(v.shape))

        if t.numel() == 0:
            return make()
        self.keepalive.append(t)
        key = ("torch", t.data_ptr(), tuple(t.shape), tuple(t.stride()), name)
        return self.tie(key, make)

    def jax_array(self, x: Any, path: Tuple[Any, ...]) -> SLeaf:
        shape = tuple(int(d) for d in x.shape)
        if not x.is_fully_addressable:
            # Spread over several processes: a multi-process save, where each process writes
            # the replica-0 shards it holds into its segment of the file.
            self.segmented = self.jax_global = True
            self.keepalive.append(x)
            try:
                return self.tie(("jax", id(x)), lambda: self.sharded(
                    x, [s for s in x.addressable_shards if s.replica_id == 0], shape, path,
                    segment=True))
            except Error:
                raise
            except Exception as e:  # noqa: BLE001  (deleted or donated buffers)
                raise self.err(InvalidArgumentError, path,
                               f"cannot read this jax.Array: {e}") from None

        def make() -> SLeaf:
            shards = [s for s in x.addressable_shards if s.replica_id == 0]
            if len(shards) == 1 and tuple(shards[0].data.shape) == shape:
                host = np.asarray(shards[0].data)  # zero-copy on CPU; immutable: no snapshot
                name = _dtypes.name_of_numpy(host.dtype)
                if name is None:
                    raise self.err(InvalidArgumentError, path,
                                   f"jax dtype {x.dtype} has no jtree dtype (typed PRNG keys: "
                                   f"save jax.random.key_data(k))")
                view, byteswap = _dtypes.host_view(host)
                return SLeaf(ARRAY, (HOST, view, byteswap), name, shape)
            return self.sharded(x, shards, shape, path)

        self.keepalive.append(x)
        try:
            return self.tie(("jax", id(x)), make)
        except Error:
            raise
        except Exception as e:  # noqa: BLE001  (deleted or donated buffers)
            raise self.err(InvalidArgumentError, path, f"cannot read this jax.Array: {e}") from None

    def sharded(self, x: Any, shards: List[Any], shape: Tuple[int, ...],
                path: Tuple[Any, ...], segment: bool = False) -> SLeaf:
        try:
            name = _dtypes.name_of_numpy(np.dtype(x.dtype))
        except TypeError:  # typed PRNG keys and other extended dtypes
            name = None
        if name is None:
            raise self.err(InvalidArgumentError, path,
                           f"jax dtype {x.dtype} has no jtree dtype (typed PRNG keys: save "
                           f"jax.random.key_data(k))")
        pieces = []
        for s in shards:
            host = np.asarray(s.data)
            begin = tuple(int(sl.start or 0) for sl in s.index)
            pieces.append((begin, _dtypes.host_view(host)[0]))
        shard_shape = tuple(int(d) for d in x.sharding.shard_shape(x.shape))
        # Every block of the sharding (every process's): the library cuts the chunk grid at
        # their edges, the same grid in every process.
        blocks = sorted({tuple((int(sl.start or 0), int(n if sl.stop is None else sl.stop))
                               for sl, n in zip(ix, shape))
                         for ix in x.sharding.devices_indices_map(shape).values()})
        return SLeaf(ARRAY, (SHARDED, pieces, blocks, shard_shape if segment else (), segment),
                     name, shape)

    def global_array(self, g: GlobalArray, path: Tuple[Any, ...]) -> SLeaf:
        """A NumPy/torch array spread over the processes: this process's replica-0 blocks go
        into its segment; the chunk grid is set once every process's blocks are known."""
        self.segmented = True
        if g.shape is None:
            raise self.err(InvalidArgumentError, path, "a GlobalArray to save needs its global "
                           "shape")
        if g.data is None:
            raise self.err(InvalidArgumentError, path, "a GlobalArray to save needs its data")
        name: Optional[str] = None
        pieces = []
        boxes = []
        for ix, block in g.blocks:
            try:
                box = box_of(ix, g.shape)
            except InvalidArgumentError as e:
                raise self.err(InvalidArgumentError, path, str(e)) from None
            host, bname = self.block_host(block, path)
            if name is not None and bname != name:
                raise self.err(InvalidArgumentError, path, f"GlobalArray blocks of different "
                               f"dtypes ({name}, {bname})")
            name = bname
            if tuple(host.shape) != tuple(e - b for b, e in box):
                raise self.err(InvalidArgumentError, path,
                               f"GlobalArray block of shape {tuple(host.shape)} at index "
                               f"{ix!r}, which is {tuple(e - b for b, e in box)} of {g.shape}")
            self.keepalive.append(host)
            if g.replica_id == 0:
                pieces.append((tuple(b for b, _ in box), host))
                boxes.append(box)
        if name is None:  # no block at all: the dtype comes from the other processes
            raise self.err(InvalidArgumentError, path, "a GlobalArray needs at least one block "
                           "in every process (an empty list cannot say its dtype)")
        leaf = SLeaf(ARRAY, (SHARDED, pieces, None, (), True), name, g.shape)
        self.global_leaves.append((path, leaf, boxes))
        return leaf

    def block_host(self, block: Any, path: Tuple[Any, ...]) -> Tuple[np.ndarray, str]:
        """A GlobalArray block as a native-order host array the library reads (a view where
        possible; a copy for a snapshot) and its dtype name."""
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(block, torch.Tensor):
            name = _dtypes.name_of_torch(block.dtype)
            if name is None:
                raise self.err(InvalidArgumentError, path,
                               f"torch dtype {block.dtype} has no jtree dtype")
            t = block.detach().cpu().resolve_conj().resolve_neg()
            if self.o.snapshot:
                t = t.clone()
            return np.asarray(_dtypes.torch_raw_view(t).numpy()), name
        a = np.asarray(block)
        name = _dtypes.name_of_numpy(a.dtype)
        if name is None:
            raise self.err(InvalidArgumentError, path, f"dtype {a.dtype} has no jtree dtype")
        if a.dtype.byteorder not in ("=", "|"):
            a = a.astype(a.dtype.newbyteorder("="))
        view = _dtypes.host_view(a)[0]
        return (view.copy() if self.o.snapshot else view), name

    def dlpack(self, x: Any, path: Tuple[Any, ...]) -> Optional[SLeaf]:
        """Any other array with __dlpack__ (CuPy, ...): read in place when it is in host
        memory, else (or for a snapshot) copied into a NumPy array through DLPack."""
        on_host = x.__dlpack_device__()[0] == 1  # kDLCPU
        if on_host and not self.o.snapshot:
            code, shape = _jtree.dlpack_info(x, self.o.file, path)
            return SLeaf(ARRAY, (HOST, x, False), _dtypes.NAME_OF[code], tuple(shape))
        try:
            host = np.from_dlpack(x, device="cpu", copy=True)
        except Exception as e:  # noqa: BLE001
            raise self.err(InvalidArgumentError, path,
                           f"cannot copy a {type(x).__qualname__} into host memory through "
                           f"DLPack ({e}); convert it to NumPy first") from None
        return self.numpy(host, path, 0)


def flatten(tree: Any, opts: SaveOptions) -> Tuple[SNode, "_Flattener"]:
    """The tree to write and what the walk found: ``keepalive`` (objects that must stay alive
    until it is written), ``segmented`` (the tree holds arrays spread over several processes:
    a multi-process save), ``jax_global`` (some of them are jax.Arrays) and
    ``global_leaves`` (the GlobalArray leaves)."""
    allow_deep_trees()
    f = _Flattener(opts)
    with paused_gc():  # (a node and a leaf object per leaf, all kept: a third of the walk)
        root = f.visit(tree, None, (), 0)
        f.copy_snapshots()
    return root, f


def spec_tree(node: SNode) -> Any:
    """The structure of a tree about to be written, with LeafSpecs for leaves (the ``pytree``
    of a non-blocking save): its leaves' LeafSpecs made in one native call
    (_structure.leaf_specs), then the containers rebuilt around them."""
    from ._load import rebuild_container  # noqa: PLC0415

    # The leaves in the order the build below meets them (preorder, children in order).
    leaves: List[SLeaf] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if n.kind == LEAF:
            leaves.append(n.leaf)  # type: ignore[arg-type]
        elif n.kind != NONE and n.keep is None:
            stack.extend(reversed(n.children))
    specs = iter(leaf_specs([leaf.spec_row() for leaf in leaves]))

    def build(n: SNode) -> Any:
        if n.kind == NONE:
            return None
        if n.kind == LEAF:
            return next(specs)
        if n.keep is not None:
            return None
        children = [build(c) for c in n.children]
        keys = [c.key for c in n.children]
        return rebuild_container(n.kind, n.type_name, n.aux, keys, children, strict=False)

    return build(node)


# ---- partial writes: merge an update with the file's tree -------------------------------------

_DICTS = (DICT, ORDEREDDICT)
_SEQS = (LIST, TUPLE)


def merge(update: SNode, old: FileNode, file: str, path: Tuple[Any, ...] = ()) -> SNode:
    """The tree to append: ``update`` where it has values, the file's nodes where it has None."""
    if update.kind == NONE:
        return SNode(old.kind, update.key, keep=old)
    if update.kind == LEAF or old.kind in (LEAF, NONE):
        return update
    if update.kind in _DICTS and old.kind in _DICTS:
        new = {c.key: c for c in update.children}
        children = []
        for oc in old.children:
            uc = new.pop(oc.key, None)
            children.append(merge(uc, oc, file, path + (oc.key,)) if uc is not None
                            else SNode(oc.kind, oc.key, keep=oc))
        children.extend(new.values())
        return SNode(update.kind, update.key, children)
    same_family = ((update.kind in _SEQS and old.kind in _SEQS)
                   or (update.kind == old.kind == NAMEDTUPLE)
                   or (update.kind == old.kind == CUSTOM and update.type_name == old.type_name))
    if not same_family:
        return update  # another kind of container: the update replaces it
    if len(update.children) != len(old.children) or any(
            u.key != o.key for u, o in zip(update.children, old.children)):
        raise error(InvalidArgumentError, file, kp.join(path),
                    f"partial_write: the file has a {NODE_KIND_NAMES[old.kind]} of "
                    f"{len(old.children)} children here and the update a "
                    f"{NODE_KIND_NAMES[update.kind]} of {len(update.children)} with other keys "
                    f"or length; write the whole container to replace it")
    children = [merge(u, o, file, path + (o.key if o.key is not None else i,))
                for i, (u, o) in enumerate(zip(update.children, old.children))]
    return SNode(update.kind, update.key, children, update.type_name, update.aux)


# ---- emit into the native Builder ------------------------------------------------------------

# The op codes of Builder.build's table (bindings/python/src/builder_table.cc).
_OPS = _jtree.Builder.OPS
(OP_BEGIN, OP_END, OP_NONE, OP_INT, OP_FLOAT, OP_BOOL, OP_COMPLEX, OP_PAYLOAD, OP_ARRAY,
 OP_DEFERRED, OP_SHARDED, OP_REUSE, OP_TIED) = (
    _OPS[n] for n in ("BEGIN", "END", "NONE", "INT", "FLOAT", "BOOL", "COMPLEX", "PAYLOAD",
                      "ARRAY", "DEFERRED", "SHARDED", "REUSE", "TIED"))
_END_OP = (OP_END,)
_SCALAR_OP = {INT: OP_INT, FLOAT: OP_FLOAT, BOOL: OP_BOOL, COMPLEX: OP_COMPLEX}
_CODE_OF = {name: code for name, (code, _, _) in _dtypes.TABLE.items()}


class Emitter:
    """Writes the tree to save as one table of ops (one tuple per node, in preorder) and hands
    it to the native Builder in one call (``Builder.build``), instead of a call per node: the
    table is what crosses into C++, the arrays in it are read in place by the writer."""

    def __init__(self, file: Optional[str], codec: int, level: Optional[int]):
        self.file = file
        self.codec, self.level = codec, level
        self.ops: List[tuple] = []
        self.ids: Dict[int, int] = {}        # id(SLeaf) -> index of its op
        self.reused: Dict[int, int] = {}     # old leaf index -> index of its REUSE op

    def run(self, root: SNode, metadata: Optional[Dict[str, bytes]] = None) -> Any:
        """The native Builder holding ``root`` (and ``metadata``), ready for the writer. A value
        the Builder refuses raises InvalidArgumentError naming its key path."""
        allow_deep_trees()
        with paused_gc():
            self.node(root, None)
            b = _jtree.Builder()
            b.build(self.ops, self.codec, self.level, metadata or None, file=self.file)
        return b

    def node(self, n: SNode, key: Any) -> None:
        ops = self.ops
        if n.keep is not None:
            self.keep(n.keep, key)
        elif n.kind == NONE:
            ops.append((OP_NONE, key))
        elif n.kind == LEAF:
            self.leaf(n.leaf, key)  # type: ignore[arg-type]
        else:
            ops.append((OP_BEGIN, key, n.kind, n.type_name, n.aux))
            leaf, node = self.leaf, self.node
            for c in n.children:
                if c.kind == LEAF and c.keep is None:  # most nodes are leaves
                    leaf(c.leaf, c.key)
                else:
                    node(c, c.key)
            ops.append(_END_OP)

    def keep(self, old: FileNode, key: Any) -> None:
        ops = self.ops
        if old.kind == NONE:
            ops.append((OP_NONE, key))
        elif old.kind == LEAF:
            i = old.leaf.index  # type: ignore[union-attr]
            j = self.reused.get(i)
            if j is not None:
                ops.append((OP_TIED, key, j))
            else:
                self.reused[i] = len(ops)
                ops.append((OP_REUSE, key, i))
        else:
            ops.append((OP_BEGIN, key, old.kind, old.type_name, old.aux))
            for c in old.children:
                self.keep(c, c.key)
            ops.append(_END_OP)

    def leaf(self, leaf: SLeaf, key: Any) -> None:
        ops = self.ops
        k = leaf.kind
        if k == ARRAY:
            d = leaf.data
            src = d[0]
            if src is MEMORY:  # its own SLeaf: tied (by its memory) in the native build
                ops.append((OP_ARRAY, key, d[1], _CODE_OF[leaf.dtype], d[2], leaf.flags, True))
                return
        i = self.ids.get(id(leaf))
        if i is not None:
            ops.append((OP_TIED, key, i))
            return
        self.ids[id(leaf)] = len(ops)
        if k == ARRAY:
            code = _CODE_OF[leaf.dtype]
            if src == HOST:
                ops.append((OP_ARRAY, key, d[1], code, d[2], leaf.flags, False))
            elif src == DEFERRED:
                ops.append((OP_DEFERRED, key, code, list(leaf.shape), d[1], leaf.flags))
            else:
                _, pieces, blocks, shard_shape, segment = d
                ops.append((OP_SHARDED, key, code, list(leaf.shape), pieces, leaf.flags,
                            list(shard_shape), segment,
                            [([b for b, _ in box], [e for _, e in box]) for box in blocks]))
        elif k in _SCALAR_OP:
            ops.append((_SCALAR_OP[k], key, leaf.data))
        else:
            ops.append((OP_PAYLOAD, key, k, leaf.data, leaf.type_name))
