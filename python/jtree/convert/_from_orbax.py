"""Orbax checkpoint directories and JAX pytree_serialization directories -> tree, for
`jtree convert ckpt_dir/ ckpt.jtree`.

Read with the peers' own libraries, every array restored to host NumPy memory, bit-exact
(bfloat16 and the other ml_dtypes types included):

- orbax: a directory written by ``orbax.checkpoint`` ``PyTreeCheckpointer`` or
  ``StandardCheckpointer`` (it holds ``_METADATA``), or a step directory of a
  ``CheckpointManager`` whose items are such directories (``<step>/<item>/_METADATA``): the
  tree is then ``{item: tree}``. The structure comes from orbax's metadata: dicts and lists
  (orbax itself records tuples as lists, and sorts dict keys); scalars come back as Python
  numbers, strings as str, None as None.
- JAX ``jax.experimental.array_serialization.pytree_serialization`` (``pytreedef.json`` +
  ``array_store/``): the saved pytree structure (dicts, lists, tuples, None), its arrays.

Memory: with ``jtree._save.Deferred`` (this build has it), arrays are restored only when the
writer reaches them, in batches of consecutive leaves of at most 64 MiB (or one larger
leaf) and 512 leaves (orbax: one ``restore`` with every other leaf an ``ocp.PLACEHOLDER``;
pytree_serialization: one ``load`` with a ``mask``), so memory stays about one batch plus
what orbax, tensorstore and JAX themselves hold (~200 MB once imported). Without Deferred the
whole checkpoint is restored at once: memory about the checkpoint's size.

Trust: shapes come from the checkpoint's metadata and are allocated as declared when restored
(a zero-filled array may occupy no disk at all, so the directory's size bounds nothing);
damaged metadata or data surfaces as orbax/tensorstore errors, reported as CorruptionError
naming the directory.
"""
from __future__ import annotations

import os
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from .._errors import CorruptionError, Error, NotFoundError, NotSupportedError
from . import _common
from ._source import Source

FORMAT = "orbax"

_ORBAX_MARKER = "_METADATA"
_PS_MARKER = "pytreedef.json"


def _kind(path: str) -> Optional[str]:
    """'orbax', 'orbax-items' (a CheckpointManager step of items), 'pytree_serialization'
    or None."""
    if not os.path.isdir(path):
        return None
    if os.path.isfile(os.path.join(path, _PS_MARKER)):
        return "pytree_serialization"
    if os.path.isfile(os.path.join(path, _ORBAX_MARKER)):
        return "orbax"
    if _items(path):
        return "orbax-items"
    return None


def _items(path: str) -> List[str]:
    """The item subdirectories of a CheckpointManager step directory (each an orbax tree)."""
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return []
    return [n for n in names if os.path.isfile(os.path.join(path, n, _ORBAX_MARKER))]


def sniff(path: str) -> bool:
    """True if ``path`` is an orbax or JAX pytree_serialization checkpoint directory. Never
    raises."""
    try:
        return _kind(path) is not None
    except Exception:  # noqa: BLE001 - sniffing never fails a conversion
        return False


def _corrupt(path: str, e: BaseException) -> CorruptionError:
    return CorruptionError(f"{path}: cannot read this checkpoint "
                           f"({type(e).__name__}: {str(e)[:500]})", file=path)


def _guard(path: str, fn: Callable[[], Any]) -> Any:
    """Runs a peer library call; its failures become CorruptionError naming the directory."""
    try:
        return fn()
    except Error:
        raise
    except (KeyboardInterrupt, SystemExit):
        raise
    except FileNotFoundError as e:
        raise _corrupt(path, e) from e
    except BaseException as e:  # noqa: BLE001 - orbax/tensorstore/jax errors on bad input
        raise _corrupt(path, e) from e


def _host(x: Any) -> Any:
    """A restored array as a host NumPy array of the same dtype and bytes."""
    a = np.asarray(x)
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


# ---- orbax ------------------------------------------------------------------------------------

def _orbax_tree(path: str, deferred: Any) -> Tuple[Any, int]:
    """The tree of one orbax PyTree checkpoint directory, and its number of arrays."""
    import jax
    import orbax.checkpoint as ocp
    from orbax.checkpoint import metadata as om

    path = os.path.abspath(path)
    ckptr = ocp.PyTreeCheckpointer()
    meta = _guard(path, lambda: ckptr.metadata(path).item_metadata.tree)
    is_leaf = lambda x: x is None  # noqa: E731 - None leaves are kept
    with_paths, treedef = _guard(
        path, lambda: jax.tree_util.tree_flatten_with_path(meta, is_leaf=is_leaf))
    flat = [m for _, m in with_paths]
    where = [jax.tree_util.keystr(k) for k, _ in with_paths]
    n = len(flat)

    def is_array(m: Any) -> bool:  # ScalarMetadata derives from ArrayMetadata
        return isinstance(m, om.ArrayMetadata) and not isinstance(m, om.ScalarMetadata)

    def restore_args(m: Any) -> Any:
        if is_array(m):
            return ocp.RestoreArgs(restore_type=np.ndarray)
        return ocp.RestoreArgs()

    def restore(indices: List[int]) -> List[Any]:
        """Restores the leaves at ``indices`` (every other one a PLACEHOLDER, not read)."""
        want = set(indices)
        item = jax.tree_util.tree_unflatten(
            treedef, [m if i in want else ocp.PLACEHOLDER for i, m in enumerate(flat)])
        args = jax.tree_util.tree_unflatten(
            treedef, [restore_args(m) if i in want else ocp.PLACEHOLDER
                      for i, m in enumerate(flat)])
        out = _guard(path, lambda: ckptr.restore(
            path, args=ocp.args.PyTreeRestore(item=item, restore_args=args)))
        got = jax.tree_util.tree_leaves(out, is_leaf=is_leaf)
        if len(got) != n:
            raise CorruptionError(f"{path}: orbax restored {len(got)} leaves, "
                                  f"its metadata lists {n}", file=path)
        return [got[i] for i in indices]

    # 0-d arrays are restored with the scalars, up front (tiny; jtree's Deferred refuses
    # 0-d fetches in this build).
    arrays = [i for i, m in enumerate(flat)
              if is_array(m) and (deferred is None or tuple(m.shape))]
    others = [i for i, m in enumerate(flat) if m is not None and i not in set(arrays)]
    leaves: List[Any] = [None] * n
    for i, v in zip(others, restore(others) if others else []):
        leaves[i] = _host(v) if is_array(flat[i]) else _scalar(v)
    if deferred is not None:
        batches = _Batches(arrays, lambda i: _nbytes(flat[i].shape, flat[i].dtype), restore)
        for i in arrays:
            m = flat[i]
            dtype = np.dtype(m.dtype)
            leaves[i] = deferred(tuple(m.shape), dtype,
                                 _fetcher(lambda i=i: batches.fetch(i), tuple(m.shape), dtype,
                                          path, where[i]))
    elif arrays:
        for i, v in zip(arrays, restore(arrays)):
            leaves[i] = _host(v)
    tree = jax.tree_util.tree_unflatten(treedef, leaves)
    return _plain(tree), sum(is_array(m) for m in flat)


# Arrays are restored in batches of consecutive leaves: one orbax restore costs time in
# proportion to the whole tree (every other leaf a PLACEHOLDER), so one restore per leaf was
# quadratic (500 leaves of 1 KiB: 25 s; batched: well under a second). A batch holds at most
# this many bytes (or one larger leaf) and this many leaves.
BATCH_BYTES = 64 << 20
BATCH_LEAVES = 512


def _nbytes(shape: Any, dtype: Any) -> int:
    n = np.dtype(dtype).itemsize
    for d in shape:
        n *= int(d)
    return n


class _Batches:
    """Restores the arrays at ``indices`` batch by batch, each batch when the writer first asks
    for one of its leaves, and hands each array out once (a later fetch of the same leaf, as a
    verify makes, restores its batch again). Memory: about one batch."""

    def __init__(self, indices: List[int], nbytes: Callable[[int], int],
                 restore: Callable[[List[int]], List[Any]]):
        self.restore = restore
        self.batches: List[List[int]] = []
        self.batch_of: Dict[int, int] = {}
        size = 0
        for i in indices:
            n = nbytes(i)
            if not self.batches or (self.batches[-1] and (
                    size + n > BATCH_BYTES or len(self.batches[-1]) >= BATCH_LEAVES)):
                self.batches.append([])
                size = 0
            self.batches[-1].append(i)
            self.batch_of[i] = len(self.batches) - 1
            size += n
        self.ready: Dict[int, Any] = {}
        self.lock = threading.Lock()  # the writer may fetch from several threads

    def fetch(self, i: int) -> Any:
        with self.lock:
            if i not in self.ready:
                batch = self.batches[self.batch_of[i]]
                for j, v in zip(batch, self.restore(batch)):
                    self.ready.setdefault(j, v)
            return self.ready.pop(i)


def _fetcher(restore_one: Callable[[], Any], shape: Tuple[int, ...], dtype: np.dtype,
             path: str, where: str) -> Callable[[], np.ndarray]:
    """A Deferred's fetch: restores one array and checks it is what the metadata promised."""
    def fetch() -> np.ndarray:
        a = _host(restore_one())
        if a.shape != shape or a.dtype != dtype:
            raise CorruptionError(f"{path}: {where}: restored as {a.dtype} "
                                  f"{a.shape}, its metadata says {dtype} {shape}",
                                  file=path, key_path=where)
        return a
    return fetch


def _scalar(v: Any) -> Any:
    """A restored non-array leaf: scalars as Python numbers (as orbax's own default restore
    gives them), strings as str."""
    if isinstance(v, np.ndarray) and v.ndim == 0:
        return v.item()
    if isinstance(v, np.generic):
        return v.item()
    return v


def _plain(x: Any) -> Any:
    """Dicts and lists as plain Python containers (orbax may hand back its own mappings)."""
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_plain(v) for v in x]
    if isinstance(x, tuple) and not hasattr(x, "_fields"):
        return tuple(_plain(v) for v in x)
    return x


# ---- JAX pytree_serialization ------------------------------------------------------------------

def _ps_tree(path: str, deferred: Any) -> Tuple[Any, int]:
    """The tree of a JAX pytree_serialization directory, and its number of arrays."""
    import jax
    try:
        from jax.experimental.array_serialization import pytree_serialization as ps
    except ImportError as e:
        raise NotSupportedError(f"{path}: reading JAX pytree_serialization "
                                f"needs jax.experimental.array_serialization (and the "
                                f"flatbuffers package): {e}", file=path) from e
    is_leaf = lambda x: x is None  # noqa: E731
    struct = _guard(path, lambda: ps.load_pytreedef(path))
    flat, treedef = jax.tree_util.tree_flatten(struct, is_leaf=is_leaf)
    cpu = jax.sharding.SingleDeviceSharding(jax.devices("cpu")[0])

    def load(indices: List[int]) -> List[Any]:
        want = set(indices)
        mask = jax.tree_util.tree_unflatten(treedef, [i in want for i in range(len(flat))])
        out = _guard(path, lambda: ps.load(path, cpu, mask=mask))
        got = jax.tree_util.tree_leaves(out, is_leaf=is_leaf)
        if len(got) != len(flat):
            raise CorruptionError(f"{path}: loaded {len(got)} leaves, "
                                  f"pytreedef.json lists {len(flat)}", file=path)
        return [got[i] for i in indices]

    arrays = [i for i, s in enumerate(flat) if s is not None]
    leaves: List[Any] = [None] * len(flat)
    if deferred is not None:
        # 0-d arrays up front (jtree's Deferred refuses 0-d fetches in this build).
        scalars = [i for i in arrays if not tuple(flat[i].shape)]
        for i, v in zip(scalars, load(scalars) if scalars else []):
            leaves[i] = _host(v)
        rest = [i for i in arrays if tuple(flat[i].shape)]
        batches = _Batches(rest, lambda i: _nbytes(flat[i].shape, flat[i].dtype), load)
        for i in rest:
            shape, dtype = tuple(flat[i].shape), np.dtype(flat[i].dtype)
            leaves[i] = deferred(shape, dtype, _fetcher(lambda i=i: batches.fetch(i), shape,
                                                        dtype, path, f"leaf {i}"))
    elif arrays:
        for i, v in zip(arrays, load(arrays)):
            leaves[i] = _host(v)
    return _plain(jax.tree_util.tree_unflatten(treedef, leaves)), len(arrays)


def open_source(path: str, *, allow_pickle: bool = False) -> Source:
    """Opens the orbax or pytree_serialization checkpoint directory ``path``. Without
    Deferred in this build, restores every array now; with it, each when written."""
    del allow_pickle  # neither format pickles
    if not os.path.exists(path):
        raise NotFoundError(f"{path}: no such directory", file=path)
    kind = _kind(path)
    if kind is None:
        raise CorruptionError(f"{path}: not an orbax checkpoint directory (no "
                              f"{_ORBAX_MARKER}) nor a JAX pytree_serialization one (no "
                              f"{_PS_MARKER})", file=path)
    try:
        import jax  # noqa: F401
        if kind != "pytree_serialization":
            import orbax.checkpoint  # noqa: F401
    except ImportError as e:
        raise NotSupportedError(f"{path}: reading it needs jax and "
                                f"orbax-checkpoint (pip install orbax-checkpoint): {e}",
                                file=path) from e
    deferred = _common.deferred_class()
    if kind == "pytree_serialization":
        tree, n = _ps_tree(path, deferred)
        desc = f"JAX pytree_serialization: {n} arrays"
    elif kind == "orbax":
        tree, n = _orbax_tree(path, deferred)
        desc = f"orbax checkpoint: {n} arrays"
    else:
        tree, n = {}, 0
        for item in _items(path):
            tree[item], k = _orbax_tree(os.path.join(path, item), deferred)
            n += k
        desc = f"orbax checkpoint: {len(tree)} items, {n} arrays"
    return Source(tree=tree, metadata={}, description=desc)
