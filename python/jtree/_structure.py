"""The tree as the library describes it: node and leaf kinds, the file's structure, and
:class:`LeafSpec`, what ``load_pytreedef`` puts in place of each leaf.

The node and leaf tuples the native Reader hands over (``node_tuple`` and ``leaf_tuple`` in
bindings/python/src/reader.cc; bindings/python/src/spec_tree.cc makes every LeafSpec and
sets its fields by name) are specified field by field in docs/architecture.md, section 5.
The kind, flag and codec numbers below come from the native module (``_jtree.NODE_KINDS``...,
made from the C++ enums of lib/include/jtree/tree.h by bindings/python/src/rules.cc), as
dtypes do."""
from __future__ import annotations

import collections
import gc
import keyword
import math
import sys
import threading
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

from . import _dtypes, _jtree

# jtree::NodeKind, by the C++ names (node_kind_name)
_N = _jtree.NODE_KINDS
DICT, LIST, TUPLE, NAMEDTUPLE, ORDEREDDICT, NONE, CUSTOM, LEAF = (
    _N[n] for n in ("dict", "list", "tuple", "namedtuple", "OrderedDict", "None", "custom", "leaf"))
NODE_KIND_NAMES = {v: k for k, v in _N.items()}

# jtree::LeafKind (leaf_kind_name); LeafSpec.kind calls a custom leaf "custom"
_L = _jtree.LEAF_KINDS
ARRAY, INT, FLOAT, BOOL, COMPLEX, STR, BYTES, BYTEARRAY, CUSTOM_LEAF, PICKLE = (
    _L[n] for n in ("array", "int", "float", "bool", "complex", "str", "bytes", "bytearray",
                    "custom leaf", "pickle"))
LEAF_KIND_NAMES = {v: ("custom" if k == "custom leaf" else k) for k, v in _L.items()}
PAYLOAD_KINDS = frozenset([STR, BYTES, BYTEARRAY, CUSTOM_LEAF, PICKLE])

# jtree::kLeafFlagScalar (Leaf flags bit 0): a NumPy scalar, not a 0-d array.
FLAG_SCALAR = _jtree.LEAF_FLAG_SCALAR

# jtree::Codec (codec_name)
CODEC_RAW, CODEC_ZSTD = _jtree.CODECS["raw"], _jtree.CODECS["zstd"]

# jtree::Storage::kChunked
STORAGE_CHUNKED = _jtree.STORAGE_CHUNKED

# Trees nest up to 512 levels (jtree::Limits::max_depth); walking one takes a few Python frames
# per level, more than the default recursion limit of 1000 allows. The limit is raised (never
# lowered) by the recursive walks; it is per interpreter, so it is not put back.
_RECURSION_LIMIT = 8 * 512 + 1000


class paused_gc:
    """Pauses the cyclic garbage collector over a walk that makes many objects (a structure of
    a million leaves): nothing made there becomes garbage, and the collector would otherwise
    scan the young objects over and over. Nests; the collector is restored as it was."""

    def __enter__(self) -> None:
        self.was_on = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: Any) -> None:
        if self.was_on:
            gc.enable()


def allow_deep_trees() -> None:
    if sys.getrecursionlimit() < _RECURSION_LIMIT:
        sys.setrecursionlimit(_RECURSION_LIMIT)


@dataclass(frozen=True)
class LeafSpec:
    """What a leaf is, without its data: the leaves of :func:`jtree.load_pytreedef`.

    ``kind`` is one of "array", "int", "float", "bool", "complex", "str", "bytes",
    "bytearray", "custom" (a registered leaf type, named by ``type_name``) and "pickle".
    Arrays have ``shape`` and ``dtype`` (a NumPy dtype; the name string when ml_dtypes is
    missing); ``scalar`` marks a NumPy scalar. ``nbytes`` is the size in memory.

    A LeafSpec in a target tree given to :func:`jtree.load` means "load this leaf"; a changed
    ``dtype`` or ``shape`` (``dataclasses.replace``) asks for a cast or a pad/truncate.
    """

    kind: str
    shape: Tuple[int, ...] = ()
    dtype: Any = None
    nbytes: int = 0
    scalar: bool = False
    type_name: Optional[str] = None

    @property
    def ndim(self) -> int:
        """The array's rank (0 for other leaves)."""
        return len(self.shape)

    @property
    def is_array(self) -> bool:
        """True for array leaves (``kind == "array"``)."""
        return self.kind == "array"

    def __repr__(self) -> str:
        if self.kind == "array":
            d = self.__dict__.get("dtype")  # (a pending dtype by its name: no import)
            name = (d.name if type(d) is PendingDType else d if isinstance(d, str)
                    else np.dtype(d).name)
            dims = ", ".join(str(d) for d in self.shape)
            return f"{'Scalar' if self.scalar else 'Array'}({name}[{dims}])"
        if self.kind == "custom":
            return f"Custom({self.type_name}, {self.nbytes} bytes)"
        if self.kind in ("str", "bytes", "bytearray", "pickle"):
            return f"{self.kind}[{self.nbytes}]"
        return self.kind


class PendingDType:
    """A LeafSpec dtype of ml_dtypes (bfloat16, float8...) not made yet, by its name: importing
    ml_dtypes costs about 0.6 s, which a structure read (``load_pytreedef``, ``jtree.open``)
    does not need. ``LeafSpec.dtype`` makes it the NumPy dtype on first use
    (:class:`_SpecDType`)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name


class _SpecDType:
    """``LeafSpec.dtype``: the stored dtype, a PendingDType made the real one (importing
    ml_dtypes) the first time it is read. A data descriptor over the instance's ``__dict__``
    entry, where the dataclass's __init__ and the native spec_tree put the field."""

    def __get__(self, obj: Any, cls: Any = None) -> Any:
        if obj is None:
            return None  # (the field's default)
        d = obj.__dict__.get("dtype")
        if type(d) is PendingDType:
            d = obj.__dict__["dtype"] = _dtypes.spec_dtype(d.name)
        return d

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__["dtype"] = value


LeafSpec.dtype = _SpecDType()  # type: ignore[assignment,misc]  (after @dataclass read the default)

_PENDING: Dict[str, PendingDType] = {}


def leaf_specs(rows: List[Tuple[Any, ...]]) -> List[LeafSpec]:
    """The LeafSpec of each row ``(kind, flags, dtype code | None, shape, nbytes, type_name)``,
    made by the native rule load_pytreedef's structure follows (_jtree.leaf_specs,
    bindings/python/src/spec_tree.cc: the one owner of what a leaf's LeafSpec is)."""
    return _jtree.leaf_specs(rows, LeafSpec, LEAF_KIND_NAMES, spec_dtype_of)


class FileLeaf:
    """A leaf as the file describes it (from the native Reader). (A plain class with slots:
    a file may have millions, each made when the file is opened.)"""

    __slots__ = ("index", "kind", "flags", "dtype", "shape", "value", "type_name",
                 "chunk_shape", "nbytes", "chunked", "_spec")

    def __init__(self, index: int, kind: int, flags: int, dtype: str, shape: Tuple[int, ...],
                 value: Any, type_name: Optional[str], chunk_shape: Tuple[int, ...],
                 nbytes: int, chunked: bool = False):
        self.index = index
        self.kind = kind
        self.flags = flags
        self.dtype = dtype          # jtree dtype name ("" for scalar kinds)
        self.shape = shape
        self.value = value          # Int/Float/Bool/Complex: the Python value
        self.type_name = type_name
        self.chunk_shape = chunk_shape
        self.nbytes = nbytes
        self.chunked = chunked      # stored in chunks (regular grid: chunk_shape; or rectilinear)
        self._spec: Optional[LeafSpec] = None

    def spec(self) -> LeafSpec:
        """This leaf's LeafSpec (the one load_pytreedef gives it)."""
        s = self._spec
        if s is None:  # made once: a LeafSpec is immutable
            code = _dtypes.TABLE[self.dtype][0] if self.dtype else None
            s = self._spec = leaf_specs([(self.kind, self.flags, code, self.shape, self.nbytes,
                                          self.type_name)])[0]
        return s

    def __repr__(self) -> str:
        return (f"FileLeaf({self.index}, kind={LEAF_KIND_NAMES.get(self.kind)}, "
                f"dtype={self.dtype!r}, shape={self.shape})")


class FileNode:
    """A node of the file's tree; ``index`` is its preorder number. Its ``children`` are made
    when first asked for (see :class:`LazyTree`)."""

    __slots__ = ("index", "kind", "key", "type_name", "aux", "leaf", "_children", "_tree")

    def __init__(self, index: int, kind: int, key: Union[str, int, None],
                 type_name: Optional[str], aux: Optional[bytes], leaf: Optional[FileLeaf],
                 children: Optional[List["FileNode"]] = None,
                 tree: Optional["LazyTree"] = None):
        self.index = index
        self.kind = kind
        self.key = key
        self.type_name = type_name
        self.aux = aux
        self.leaf = leaf
        self._children = children  # None: not made yet (then `tree` makes them)
        self._tree = tree

    @property
    def children(self) -> List["FileNode"]:
        c = self._children
        if c is None:
            c = self._tree.fill(self) if self._tree is not None else []
        return c

    def keyed(self) -> bool:
        children = self.children
        return bool(children) and children[0].key is not None

    def __repr__(self) -> str:
        return (f"FileNode({self.index}, kind={NODE_KIND_NAMES.get(self.kind)}, key={self.key!r}, "
                f"{len(self.children)} children)")


def _make_leaf(index: int, t: Tuple[Any, ...], name_of: Dict[int, str] = _dtypes.NAME_OF,
               table: Dict[str, Any] = _dtypes.TABLE, prod: Any = math.prod) -> FileLeaf:
    """A FileLeaf from the native Reader's leaf tuple."""
    kind, flags, dtype, shape, storage, value, type_name, chunk_shape, _codec, _filter = t
    name = name_of.get(dtype, "")
    if kind == INT and isinstance(value, bytes):
        value = int.from_bytes(value, "little", signed=True)
    return FileLeaf(index, kind, flags, name, shape, value, type_name, chunk_shape,
                    prod(shape) * table[name][1] if name else 0, storage == STORAGE_CHUNKED)


def spec_dtype_of(code: int, name_of: Dict[int, str] = _dtypes.NAME_OF,
                  table: Dict[str, Any] = _dtypes.TABLE) -> Optional[Tuple[Any, int]]:
    """(LeafSpec dtype, item size) of a native dtype code, or None when it names no dtype (what
    the native Reader.spec_tree asks once per dtype of a file)."""
    name = name_of.get(code, "")
    if not name:
        return None
    d = _dtypes.numpy_dtype_if_made(name)
    if d is None:
        # (ml_dtypes' types: made when a LeafSpec's dtype is first read, not by the structure
        # read)
        d = _PENDING.setdefault(name, PendingDType(name))
    return d, table[name][1]


class LazyTree:
    """The file's tree, made a container at a time as it is visited: opening a file with a
    million leaves makes no Python object for them, and loading one leaf makes only the
    containers on its path (and their children). A leaf referred to twice (tied weights) is
    one FileLeaf. Thread-safe."""

    __slots__ = ("reader", "_leaves", "_lock")

    def __init__(self, reader: Any):
        self.reader = reader  # the native Reader (File.close() swaps in one that refuses)
        self._leaves: Dict[int, FileLeaf] = {}
        self._lock = threading.Lock()

    def root(self) -> FileNode:
        """Node 0, the root."""
        with self._lock:
            return self._make([(0,) + tuple(self.reader.node(0))])[0]

    def fill(self, node: FileNode) -> List[FileNode]:
        """Makes and sets the children of `node` (once, whichever thread asks first)."""
        with self._lock:
            if node._children is None:
                node._children = self._make(self.reader.children(node.index))
            return node._children

    def fill_all(self, root: FileNode) -> None:
        """Makes every node of the tree at once, when nothing below the root is made yet: a
        walk of the whole tree (load_pytreedef, a full load) then costs two native calls in
        all, not one per container. Otherwise the walk makes what it visits, as ever."""
        with self._lock:
            if root.index != 0 or root._children is not None:
                return
            leaf_tuples = self.reader.leaves()
            leaves = self._leaves
            filled: List[Tuple[FileNode, List[FileNode]]] = []
            stack: List[List[Any]] = []  # [children list, children still to come]
            for i, (kind, key, n, type_name, aux, leaf) in enumerate(self.reader.nodes()):
                container = n > 0 and kind != LEAF and kind != NONE
                if i == 0:
                    node = root
                else:
                    fl = None
                    if kind == LEAF:
                        fl = leaves.get(leaf)
                        if fl is None:
                            fl = leaves[leaf] = _make_leaf(leaf, leaf_tuples[leaf])
                    node = FileNode(i, kind, key, type_name, aux, fl,
                                    None if container else [], self)
                    top = stack[-1]
                    top[0].append(node)
                    top[1] -= 1
                    if top[1] == 0:
                        stack.pop()
                if container:
                    kids: List[FileNode] = []
                    filled.append((node, kids))
                    stack.append([kids, n])
            # Set only when complete: a thread reading `children` without the lock sees a
            # node's list whole or not at all (then waits here in fill()).
            for node, kids in filled:
                node._children = kids

    def _make(self, kids: List[Any]) -> List[FileNode]:
        # (Called with the lock held.)
        out = []
        add = out.append
        leaves = self._leaves
        for index, (kind, key, n, type_name, aux, leaf), lt in kids:
            fl = None
            if kind == LEAF:
                fl = leaves.get(leaf)
                if fl is None:
                    fl = leaves[leaf] = _make_leaf(leaf, lt)
            add(FileNode(index, kind, key, type_name, aux, fl,
                         None if n and kind != LEAF and kind != NONE else [], self))
        return out


# ---- namedtuples without imports ------------------------------------------------------------

_nt_lock = threading.Lock()
_nt_cache: Dict[Tuple[str, Tuple[str, ...]], type] = {}


def namedtuple_field_problem(fields: Tuple[Any, ...]) -> Optional[str]:
    """Why ``fields`` cannot be the field names of a Python namedtuple, or None when they can:
    collections.namedtuple's own rules (str, an identifier, not a keyword, no leading
    underscore). The format allows any unique UTF-8 names; a name Python cannot hold is an
    error, never renamed (``_0``, ``_1`` would silently point at other fields)."""
    for f in fields:
        if not isinstance(f, str):
            return f"field name {f!r} is not a str"
        if not f.isidentifier() or keyword.iskeyword(f):
            return f"field name {f!r} is not a Python identifier"
        if f.startswith("_"):
            return f"field name {f!r} starts with an underscore"
    return None


def namedtuple_type(type_name: str, fields: Tuple[str, ...]) -> type:
    """A namedtuple class for a file's namedtuple node, created here (never imported): named
    after the last component of the saved type name, with the saved field names. Raises
    ValueError (namedtuple_field_problem's reason) when a field name cannot be a Python
    namedtuple field."""
    key = (type_name, fields)
    with _nt_lock:
        cls = _nt_cache.get(key)
        if cls is None:
            problem = namedtuple_field_problem(fields)
            if problem is not None:
                raise ValueError(problem)
            name = type_name.rsplit(".", 1)[-1]
            if not name.isidentifier() or keyword.iskeyword(name):
                name = "NamedTuple"
            cls = collections.namedtuple(name, fields)  # type: ignore[misc]
            cls.__module__ = "jtree.namedtuples"
            cls.__jtree_type_name__ = type_name  # type: ignore[attr-defined]
            _nt_cache[key] = cls
        return cls


def namedtuple_type_name(cls: type) -> str:
    """The name a namedtuple class is saved under."""
    return getattr(cls, "__jtree_type_name__", None) or f"{cls.__module__}.{cls.__qualname__}"
