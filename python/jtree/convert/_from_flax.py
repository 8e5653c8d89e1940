"""flax msgpack checkpoints -> tree, for `jtree convert params.msgpack params.jtree`.

Files written by ``flax.serialization.to_bytes`` / ``msgpack_serialize`` (state dicts: nested
dicts with str keys, lists, arrays, NumPy and Python scalars) are read with flax's own
``msgpack_restore``, which also joins the chunks flax splits large arrays into. Arrays come back
bit-exact with their dtype (bfloat16 included) and shape; big-endian arrays are stored in native
byte order (same values). NumPy scalars become 0-d arrays of their dtype.

Memory: msgpack has no index, so the whole file is decoded at once: the file is memory-mapped
(page cache, not process memory) and its arrays are copied out by msgpack, so the peak is about
the checkpoint's size in process memory, plus the map.

Detection: by content only when the name ends in ``.msgpack`` (a msgpack map or array first);
any other name needs ``--from flax`` (``from_format="flax"``): msgpack has no magic number.
"""
from __future__ import annotations

import mmap
import os
from typing import Any, List

import numpy as np

from .._errors import CorruptionError, Error, InvalidArgumentError, NotFoundError, \
    NotSupportedError
from ._source import Source

FORMAT = "flax"

# First bytes of a msgpack map (fixmap, map16, map32) or array (fixarray, array16, array32).
_CONTAINER_FIRST = set(range(0x80, 0xA0)) | {0xDC, 0xDD, 0xDE, 0xDF}


def sniff(path: str) -> bool:
    """True if ``path`` ends in .msgpack and starts like a msgpack map or array. Never raises."""
    try:
        if not path.lower().endswith(".msgpack") or not os.path.isfile(path):
            return False
        with open(path, "rb") as f:
            head = f.read(1)
        return bool(head) and head[0] in _CONTAINER_FIRST
    except OSError:
        return False


def _normalize(x: Any, path: str, key: List[str]) -> Any:
    import msgpack

    """Checks and tidies what msgpack_restore gave: dict keys must be str, extension types
    flax does not know are refused, NumPy scalars become 0-d arrays, arrays native-endian."""
    where = "/".join(key) or "(root)"
    if isinstance(x, msgpack.ExtType):  # a namedtuple: checked before tuples
        raise CorruptionError(f"{path}: {where} holds msgpack extension type "
                              f"{x.code}, unknown to flax", file=path, key_path=where)
    if isinstance(x, dict):
        out = {}
        for k, v in x.items():
            if not isinstance(k, str):
                raise NotSupportedError(f"{path}: key {k!r} under {where} is "
                                        f"not a string", file=path, key_path=where)
            out[k] = _normalize(v, path, key + [k])
        return out
    if isinstance(x, (list, tuple)):
        return [_normalize(v, path, key + [str(i)]) for i, v in enumerate(x)]
    if isinstance(x, np.generic):
        x = np.asarray(x)
    if isinstance(x, np.ndarray):
        if x.dtype.hasobject:
            raise NotSupportedError(f"{path}: array {where} has dtype "
                                    f"{x.dtype}, which jtree does not store", file=path,
                                    key_path=where)
        if x.dtype.byteorder == ">":
            x = x.astype(x.dtype.newbyteorder("="))
        return x
    if x is None or isinstance(x, (bool, int, float, complex, str, bytes)):
        return x
    raise CorruptionError(f"{path}: {where} holds a {type(x).__name__} "
                          f"(unknown msgpack extension?), not a flax state-dict value",
                          file=path, key_path=where)


def open_source(path: str, *, allow_pickle: bool = False) -> Source:
    """Reads the flax msgpack file ``path`` with ``flax.serialization.msgpack_restore`` and
    returns its tree. Damaged input is CorruptionError naming the file."""
    del allow_pickle  # msgpack has no pickles
    try:
        import msgpack  # noqa: F401 - flax's own dependency
        from flax import serialization
    except ImportError as e:
        raise NotSupportedError(f"{path}: reading flax msgpack needs flax "
                                f"(pip install flax): {e}", file=path) from e
    try:
        f = open(path, "rb")
    except OSError as e:
        raise NotFoundError(f"{path}: {e.strerror}", file=path) from e
    with f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            raise CorruptionError(f"{path}: flax msgpack: the file is empty",
                                  file=path)
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            view = memoryview(m)
            try:
                # msgpack bounds every length by the input's size (its default limits), so a
                # hostile count cannot allocate more than the file holds.
                tree = serialization.msgpack_restore(view)
                # Arrays are views of msgpack's own bytes objects, never of the map (closed
                # below), and the tree is checked before the map goes.
                tree = _normalize(tree, path, [])
            except Error:
                raise
            except RecursionError as e:
                raise CorruptionError(f"{path}: flax msgpack: nested too deeply",
                                      file=path) from e
            except Exception as e:  # noqa: BLE001 - msgpack/NumPy/flax errors on bad bytes
                raise CorruptionError(f"{path}: not a valid flax msgpack file "
                                      f"({type(e).__name__}: {e})", file=path) from e
            finally:
                # Released here, not by the garbage collector: an error's traceback keeps this
                # frame alive, and the map cannot close while a view of it exists.
                view.release()
    if not isinstance(tree, (dict, list)):
        raise InvalidArgumentError(f"{path}: a flax msgpack file holds a dict "
                                   f"or list, this one a {type(tree).__name__}", file=path)
    n = _count_arrays(tree)
    return Source(tree=tree, metadata={}, description=f"flax msgpack: {n} arrays")


def _count_arrays(x: Any) -> int:
    if isinstance(x, dict):
        return sum(_count_arrays(v) for v in x.values())
    if isinstance(x, list):
        return sum(_count_arrays(v) for v in x)
    return int(isinstance(x, np.ndarray))
