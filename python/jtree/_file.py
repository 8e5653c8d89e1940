"""``jtree.open``: a .jtree file opened lazily. Only the header and index are read on open;
indexing walks the structure, and slicing an array leaf reads only the chunks it overlaps:
``LazyArray.get`` resolves where the slice goes (jtree._placement) and hands it to that
framework's adapter (the ``slice`` hook of jtree._load_adapter; what every framework's slice
shares is jtree._lazy_slice)."""
from __future__ import annotations

import os
import sys
import warnings
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

import numpy as np

from . import _device_options, _jtree, _placement, _progress
from . import _keypath as kp
from ._errors import (IndexKindError, IndexOutOfRangeError, InvalidArgumentError, NotFoundError,
                      NotSupportedError, error)
from ._fileobj import is_buffer, is_fileobj, name_of, open_reader
from ._load import ADAPTERS, FRAMEWORKS, checked_mmap, spec_tree
from . import _load_call, _remote
from ._remote import RemoteOptions
from ._structure import (ARRAY, DICT, LEAF, NAMEDTUPLE, NODE_KIND_NAMES, NONE, ORDEREDDICT,
                         FileNode, LazyTree, LeafSpec)

PathLike = Union[str, "os.PathLike[str]"]


class File:
    """An open .jtree file (see :func:`jtree.open`). Thread-safe; a context manager.

    ``f[key]`` is the root container's child: a :class:`Node` for containers, a
    :class:`LazyArray` for arrays (sliced on demand), the value itself for other leaves.
    """

    def __init__(self, path: PathLike, *, verify: bool = True, threads: int = 0,
                 allow_pickle: bool = False, strict: bool = True,
                 use_mmap: Optional[bool] = None,
                 limits: Optional[Dict[str, int]] = None, mmap: Union[bool, str] = True,
                 framework: str = "numpy", device: Any = None, map_location: Any = None,
                 allow_full_download: bool = False, device_options: Any = None,
                 remote: Optional[RemoteOptions] = None):
        # A file object or bytes-like data (jtree._fileobj) is named by what it is.
        held = is_fileobj(path) or is_buffer(path)
        self.name: str = name_of(path) if held else os.fspath(path)
        if use_mmap is not None:  # mmap= is the one option saying whether the file is mapped
            warnings.warn("jtree.open(use_mmap=) is deprecated: mmap=False does the same (the "
                          "file is not mapped; every read is a pread into new memory)",
                          DeprecationWarning, stacklevel=3)
            if not use_mmap:
                mmap = False
        # Bad values are reported before the file is opened.
        placement = _placement.resolve(framework, device, map_location, frameworks=FRAMEWORKS)
        checked_mmap(mmap)
        framework, device = placement.framework, placement.device
        dev_opts = _device_options.checked(device_options)
        if dev_opts is not None and device is None:
            raise error(InvalidArgumentError, self.name, "",
                        "jtree.open(device_options=) sets the settings of its slices' loads "
                        "to device=, and no device= was given (its slices go to host memory)")
        _jtree.check_read_options(threads, self.name)
        # The structure is made as it is visited: opening makes only the root. The tree holds
        # the native Reader (the one reference: close() swaps it).
        # (allow_full_download is passed only when set, so that the common call stays the same.)
        extra = {"allow_full_download": True} if allow_full_download else {}
        # (remote= likewise; the native open refuses it for a local path.)
        if remote is not None:
            if held:
                raise error(InvalidArgumentError, self.name, "",
                            "remote= applies to http(s):// and s3:// URLs, not to a file "
                            "object or bytes")
            extra["remote"] = _remote.settings(remote)
        # mmap=False: the file is not mapped at all, as no load or slice of it would use a map.
        mapped = mmap is not False
        self._tree = LazyTree(open_reader(path, mapped, limits) if held
                              else _jtree.Reader.open(self.name, mapped, limits, **extra))
        self._root = self._tree.root()
        self.verify_checksums = verify
        self.threads = threads
        self.allow_pickle = allow_pickle
        self.strict = strict
        self.mmap = mmap
        self.framework = framework  # what slices of its LazyArrays come back as
        self.device = device  # and where torch slices go (None: the CPU)
        self.device_options = dev_opts  # and with which settings (LazyArray.get's)

    # -- the structure --

    @property
    def root(self) -> Any:
        """The root: a Node, a LazyArray or a value."""
        return _view(self, self._root, ())

    def __getitem__(self, key: Any) -> Any:
        root = self.root
        if isinstance(root, (Node, LazyArray)):
            return root[key]
        raise error(InvalidArgumentError, self.name, "", f"the root is a {type(root).__name__}; "
                                                         f"it cannot be indexed")

    def __contains__(self, key: Any) -> bool:
        root = self.root
        return isinstance(root, Node) and key in root

    def keys(self) -> List[Any]:
        """The root container's keys (positions for lists and tuples)."""
        root = self.root
        return root.keys() if isinstance(root, Node) else []

    def __iter__(self) -> Iterator[Any]:
        return iter(self.keys())

    def __len__(self) -> int:
        root = self.root
        return len(root) if isinstance(root, Node) else 0

    def at(self, key_path: str) -> Any:
        """The node at a key path such as ``"params/layers/0/w"`` (see jtree._keypath)."""
        node = self._root
        path: Tuple[Any, ...] = ()
        for part in kp.split(key_path):
            child = _child_by_component(node, part)
            if child is None:
                raise error(NotFoundError, self.name, kp.join(path),
                            f"no child {part!r} (key path {key_path!r})"
                            f"{_nearest(node, part, path)}")
            node, path = child[0], path + (child[1],)
        return _view(self, node, path)

    def structure(self, strict: Optional[bool] = None) -> Any:
        """The tree with a :class:`LeafSpec` per leaf (what :func:`jtree.load_pytreedef` gives)."""
        return spec_tree(self._root, strict=self.strict if strict is None else strict,
                         file=self.name)

    def load(self, pytree: Any = None, **options: Any) -> Any:
        """Loads the whole tree or part of it: :func:`jtree.load` on this open file."""
        return _load_call.load(self, self._root, (), pytree, **options)

    # -- the file --

    @property
    def metadata(self) -> Dict[str, Union[str, bytes]]:
        """User metadata saved with ``jtree.save(..., metadata=...)``: {str: str or bytes}, each
        value as it was saved: a ``str`` is stored as UTF-8 text marked as such (format version
        3) and comes back as ``str``; bytes come back as bytes. (Files written before version
        3 mark nothing: their values come back as bytes.)"""
        return dict(self._reader.metadata())

    def info(self) -> Dict[str, Any]:
        """Facts about the file: size, generation, chunks, stored and raw bytes, writer; also
        ``footer_offset`` and ``etag`` (remote objects; "" for local files), which identify the
        generation read (a ``partial_write`` is pinned to them)."""
        return self._reader.info()

    def io_stats(self) -> Dict[str, int]:
        """The storage backend's counters since the file was opened: ``read_requests`` and
        ``bytes_read`` (every read, the header and index included)."""
        return self._reader.io_stats()

    def verify(self, *, progress: Any = False) -> Dict[str, Any]:
        """Checks every checksum and decodes every chunk; ``{"ok": bool, "problems": [...]}``
        (and ``chunks_checked``, ``bytes_checked``, ``dead_bytes``, ``notes``). ``progress``:
        True (a bar on stderr when it is a terminal), a function ``(done_bytes, total_bytes)``
        called as the stored bytes are checked (raising in it stops the check with that
        exception), or False."""
        cb = _progress.progress_callback(progress, f"verify {self.name}")
        if cb is None:
            return self._reader.verify(self.threads)
        report = self._reader.verify(self.threads, progress=cb)
        _progress.finish(cb, report["bytes_checked"])
        return report

    def close(self) -> None:
        """Releases the file (views taken from it stop working)."""
        self._tree.reader = _Closed(self.name)

    @property
    def _reader(self) -> Any:
        """The native Reader (a refusing stand-in once closed)."""
        return self._tree.reader

    def __enter__(self) -> "File":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"jtree.File({self.name!r})"


class _Closed:
    """Stands for the reader of a closed File: any use raises."""

    def __init__(self, name: str):
        self.name = name

    def __getattr__(self, attr: str) -> Any:
        raise error(InvalidArgumentError, self.name, None, "the file is closed")


def _child_by_component(node: FileNode, part: str) -> Optional[Tuple[FileNode, Any]]:
    """The child named by one (unescaped) key-path component, and its key or position."""
    for i, c in enumerate(node.children):
        name = c.key if c.key is not None else i
        if (name if isinstance(name, str) else str(name)) == part:
            return c, name
    return None


def _nearest(node: FileNode, key: Any, path: Optional[Tuple[Any, ...]] = None) -> str:
    """"; nearest: ..." naming the children of ``node`` whose keys are most like ``key`` (a
    typo's likely meaning, found as jtree._keypath.nearest finds it for keys= patterns), as
    key paths under ``path`` when given, else as keys; "" when none is near."""
    if not isinstance(key, str):
        return ""
    names = {kp.escape(c.key): c.key for c in node.children if isinstance(c.key, str)}
    near = [names[n] for n in kp.nearest(kp.escape(key), list(names))]
    if path is not None:
        near = [kp.join(path + (k,)) for k in near]
    return f"; nearest: {', '.join(map(repr, near))}" if near else ""


def _view(f: File, node: FileNode, path: Tuple[Any, ...]) -> Any:
    if node.kind == NONE:
        return None
    if node.kind == LEAF:
        leaf = node.leaf
        assert leaf is not None
        if leaf.kind == ARRAY:
            return LazyArray(f, node, path)
        return _load_call.load(f, node, path)  # (a value: loaded with the File's settings)
    return Node(f, node, path)


class Node:
    """A container of an open file: indexed like the container it stands for (keys for dicts,
    namedtuples and keyed custom nodes; positions for lists, tuples and other custom nodes)."""

    def __init__(self, f: File, node: FileNode, path: Tuple[Any, ...]):
        self._f, self._node, self._path = f, node, path
        self._by_key: Optional[Dict[Any, int]] = None

    @property
    def kind(self) -> str:
        """"dict", "list", "tuple", "namedtuple", "OrderedDict" or "custom"."""
        return NODE_KIND_NAMES[self._node.kind]

    @property
    def type_name(self) -> Optional[str]:
        """The saved type name of a namedtuple or custom node."""
        return self._node.type_name

    @property
    def path(self) -> str:
        """This node's key path in the file."""
        return kp.join(self._path)

    def keyed(self) -> bool:
        """True when children are indexed by key (dicts, namedtuples, keyed custom nodes)."""
        return self._node.keyed() or self._node.kind in (DICT, ORDEREDDICT, NAMEDTUPLE)

    def keys(self) -> List[Any]:
        """The children's keys, or their positions."""
        if self.keyed():
            return [c.key for c in self._node.children]
        return list(range(len(self._node.children)))

    def __len__(self) -> int:
        return len(self._node.children)

    def __iter__(self) -> Iterator[Any]:
        if self.keyed():
            return iter(self.keys())
        return (self[i] for i in range(len(self)))

    def __contains__(self, key: Any) -> bool:
        if self.keyed():
            return key in self._index()
        return isinstance(key, int) and -len(self) <= key < len(self)

    def _index(self) -> Dict[Any, int]:
        if self._by_key is None:
            self._by_key = {c.key: i for i, c in enumerate(self._node.children)}
        return self._by_key

    def __getitem__(self, key: Any) -> Any:
        children = self._node.children
        if self.keyed():
            i = self._index().get(key)
            if i is None:
                raise error(NotFoundError, self._f.name, self.path,
                            f"no key {key!r} in this {self.kind}"
                            f"{_nearest(self._node, key)}")
        else:
            if not isinstance(key, (int, np.integer)) or isinstance(key, bool):
                raise error(IndexKindError, self._f.name, self.path,
                            f"a {self.kind} is indexed by position, not {key!r}")
            i = int(key) + (len(children) if key < 0 else 0)
            if not 0 <= i < len(children):
                raise error(IndexOutOfRangeError, self._f.name, self.path,
                            f"position {key} out of range for a {self.kind} of {len(children)}")
        c = children[i]
        return _view(self._f, c, self._path + (c.key if c.key is not None else i,))

    def load(self, pytree: Any = None, **options: Any) -> Any:
        """Loads this subtree (options as :func:`jtree.load`)."""
        return _load_call.load(self._f, self._node, self._path, pytree, **options)

    def __repr__(self) -> str:
        return (f"<jtree.Node {self.kind} at {self.path!r} of {self._f.name!r}: "
                f"{len(self)} children>")


class LazyArray:
    """An array leaf of an open file, read on demand: ``a[1000:2000, :64]`` reads only the
    chunks the slice overlaps. Indexing takes ints, slices (any step), ``...`` and ``None``
    and returns what the File's ``framework`` says (``jtree.open(framework=...)``): NumPy
    arrays by default, torch tensors with ``"torch"`` (or a ``device=``), JAX arrays with
    ``"jax"``; so does iterating over the rows. :meth:`get` asks for another framework.
    ``np.asarray(a)`` reads it whole as NumPy, ``a.read()`` as :func:`jtree.load` does
    (NumPy unless given ``framework=``)."""

    def __init__(self, f: File, node: FileNode, path: Tuple[Any, ...]):
        assert node.leaf is not None
        self._f, self._node, self._leaf, self._path = f, node, node.leaf, path

    @property
    def shape(self) -> Tuple[int, ...]:
        """The array's shape."""
        return self._leaf.shape

    @property
    def dtype(self) -> Any:
        """The NumPy dtype (ml_dtypes types need ml_dtypes; else the dtype's name)."""
        return self._leaf.spec().dtype

    @property
    def ndim(self) -> int:
        """The array's rank."""
        return len(self._leaf.shape)

    @property
    def size(self) -> int:
        """The number of elements."""
        n = 1
        for d in self._leaf.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        """Bytes in memory (one byte per element for the 4-bit types)."""
        return self._leaf.nbytes

    @property
    def chunk_shape(self) -> Tuple[int, ...]:
        """The chunk grid's cell (empty for leaves stored inline in the header, and for leaves
        whose grid is rectilinear, format version 2: cut at uneven shard edges)."""
        return self._leaf.chunk_shape

    @property
    def chunk_bounds(self) -> Optional[Tuple[Tuple[int, ...], ...]]:
        """A rectilinear grid's chunk end positions, one tuple per dimension (format version 2:
        a multi-process save cuts chunks at uneven shard edges); ``None`` for a regular grid
        (:attr:`chunk_shape`) or a leaf that is not chunked."""
        return self._f._reader.chunk_bounds(self._leaf.index)

    @property
    def path(self) -> str:
        """This leaf's key path in the file."""
        return kp.join(self._path)

    @property
    def spec(self) -> LeafSpec:
        """The leaf's :class:`LeafSpec`."""
        return self._leaf.spec()

    def __getitem__(self, index: Any) -> Any:
        """The elements a basic index selects (reads only their chunks), as the File's
        ``framework`` gives them (NumPy by default; see :meth:`get`)."""
        return self.get(index, self._f.framework, self._f.device,
                        device_options=self._f.device_options)

    def get(self, index: Any, framework: str = "numpy", device: Any = None,
            map_location: Any = None, device_options: Any = None) -> Any:
        """The elements a basic index selects, reading only their chunks, as a NumPy array
        (``framework="numpy"``), a torch tensor (``"torch"``: bfloat16 and float8 need no
        ml_dtypes) or a JAX array (``"jax"``). ``device`` (alias ``map_location``) places the
        torch tensor (default the CPU) and implies ``framework="torch"``. To a CUDA device the
        slice's chunks are read straight into device memory through pinned staging buffers
        when jtree has CUDA support and a device (see jtree._device); otherwise, and for
        negative steps or dtypes torch lacks, the slice is read into host memory and then
        moved there. A JAX slice goes straight to the device the same way where the process
        has one JAX device, a CUDA GPU (as :func:`jtree.load` without ``shardings=``; the
        index's steps and dropped dimensions are then applied on the device); otherwise it
        is read into host memory and placed with ``jax.device_put``. ``device_options`` (a
        :class:`jtree.DeviceOptions`: staging memory, O_DIRECT) applies to the direct path;
        for a slice bound for host memory (a ``device`` that is the CPU, no ``device`` for
        NumPy and torch, JAX's CPU) it is an :class:`InvalidArgumentError`, and where the
        slice cannot take the direct path a warning (with ``direct_io="on"`` a
        :class:`NotSupportedError`)."""
        placement = _placement.resolve(framework, device, map_location, frameworks=FRAMEWORKS,
                                       file=self._f.name, key_path=self.path)
        options = _device_options.checked(device_options)
        # The framework's adapter makes the slice (jtree._load_adapter's slice hook; what
        # every framework shares is jtree._lazy_slice).
        return ADAPTERS[placement.framework].slice(self, index, placement, options)

    def __len__(self) -> int:
        if not self._leaf.shape:
            raise error(IndexKindError, self._f.name, self.path, "len() of a 0-d array")
        return self._leaf.shape[0]

    def read(self, **options: Any) -> Any:
        """The whole array (options of :func:`jtree.load`: framework=, cast=, ...)."""
        return _load_call.load(self._f, self._node, self._path, **options)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        # read(): the whole leaf, a view of the file's memory map where it can be (File.mmap).
        a = np.asarray(self.read())
        if dtype is not None and a.dtype != np.dtype(dtype):
            return a.astype(dtype)
        return a.copy() if copy else a

    def __iter__(self) -> Iterator[Any]:
        """The rows, read a block of whole chunks at a time (each chunk once)."""
        if not self._leaf.shape:
            raise error(IndexKindError, self._f.name, self.path, "iteration over a 0-d array")
        n = self._leaf.shape[0]
        bounds = self.chunk_bounds
        if bounds is not None:  # rectilinear: one block per chunk row, as stored
            b = 0
            for e in bounds[0]:
                yield from self[b:e]
                b = e
            return
        step = max(self._leaf.chunk_shape[0] if self._leaf.chunk_shape else n, 1)
        for b in range(0, n, step):
            yield from self[b:b + step]

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        """DLPack export of the whole array, read once: ``torch.as_tensor(a)`` and
        ``torch.from_dlpack(a)`` take this path (without it, torch reads a sequence row by
        row). Types NumPy cannot export (bfloat16, float8...) go through torch."""
        a = np.asarray(self.read())
        if a.dtype.kind not in "biufc" or a.dtype.type.__module__ != "numpy" \
                or not a.flags.writeable:
            torch = sys.modules.get("torch")
            if torch is None:
                raise error(NotSupportedError, self._f.name, self.path,
                            f"NumPy cannot export a {self._leaf.dtype} array through DLPack "
                            f"(import torch, or read it with jtree.load(..., "
                            f"framework='torch'))")
            return self.read(framework="torch").__dlpack__(*args, **kwargs)
        return a.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self) -> Tuple[int, int]:
        return (1, 0)  # kDLCPU: arrays are read into host memory

    def __repr__(self) -> str:
        return (f"<jtree.LazyArray {self._leaf.dtype}{list(self._leaf.shape)} at {self.path!r} "
                f"of {self._f.name!r}>")
