"""NumPy ``.npy`` and ``.npz`` files -> tree.

A ``.npy`` file becomes one array (the tree's root), memory-mapped. A ``.npz`` archive becomes
a dict of its members by name (``np.savez(f, a=x)`` -> ``{"a": x}``); members stored
uncompressed (``np.savez``) are memory-mapped at their offset inside the archive, compressed
ones (``np.savez_compressed``) are decompressed one at a time when the writer reaches them.
Object arrays are pickles: refused unless ``allow_pickle=True``. NumPy's own header parser
reads the headers (it bounds their size); the member offsets are checked against the archive.
"""
from __future__ import annotations

import os
import struct
import zipfile
from typing import Any, Dict, Tuple

import numpy as np

from .._errors import Error, InvalidArgumentError, error
from ._common import closer, corrupt, deferred_class, file_leaf, open_fd, read_exact
from ._source import Source

FORMAT = "numpy"
_NPY_MAGIC = b"\x93NUMPY"
# The largest expansion of a compressed member believed (deflate's limit is about 1032).
_MAX_RATIO = 1100


def sniff(path: str) -> bool:
    """An .npy file (by its magic) or a zip archive whose members are all .npy files."""
    try:
        if not os.path.isfile(path):
            return False
        with open(path, "rb") as f:
            head = f.read(6)
        if head == _NPY_MAGIC:
            return True
        if head[:4] != b"PK\x03\x04":
            return False
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
        return bool(names) and all(n.endswith(".npy") for n in names)
    except Exception:  # noqa: BLE001  (sniff never raises)
        return False


def open_source(path: str, *, allow_pickle: bool = False) -> Source:
    """Opens an .npy file or an .npz archive (see the module doc)."""
    fd, size = open_fd(path)
    try:
        head = read_exact(fd, 0, min(size, 6), path)
        if head == _NPY_MAGIC:
            tree = _npy(path, fd, size, allow_pickle)
            desc = "NumPy .npy: 1 array"
            closers = [lambda: os.close(fd)]
        elif head[:4] == b"PK\x03\x04":
            tree, close_zip = _npz(path, fd, size, allow_pickle)
            desc = f"NumPy .npz: {len(tree)} arrays"
            closers = [close_zip, lambda: os.close(fd)]
        else:
            raise corrupt(path, "neither an .npy file nor an .npz archive")
    except BaseException:
        os.close(fd)
        raise
    return Source(tree=tree, metadata={}, description=desc, close=closer(*closers))


def _header(f: Any, path: str, where: str) -> Tuple[Tuple[int, ...], bool, np.dtype]:
    """(shape, fortran_order, dtype) of the .npy header at f's position."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        if version == (1, 0):
            return fmt.read_array_header_1_0(f)
        if version in ((2, 0), (3, 0)):
            return fmt.read_array_header_2_0(f)
        raise ValueError(f"unknown .npy version {version}")
    except Exception as e:  # noqa: BLE001  (NumPy's parser on hostile bytes: anything)
        raise corrupt(path, f"bad .npy header: {e}", where) from None


def _check_dtype(dt: np.dtype, path: str, where: Any, allow_pickle: bool) -> None:
    if dt.hasobject and not allow_pickle:
        raise error(InvalidArgumentError, path, where,
                    "an object array (stored as a pickle, which can run code): pass "
                    "allow_pickle=True (--allow-pickle) only if you trust the file")


def _npy(path: str, fd: int, size: int, allow_pickle: bool) -> Any:
    with open(path, "rb") as f:
        shape, fortran, dt = _header(f, path, None)
        start = f.tell()
    _check_dtype(dt, path, None, allow_pickle)
    if dt.hasobject:
        return np.load(path, allow_pickle=True)
    nbytes = int(np.prod(shape, dtype=object)) * dt.itemsize
    if start + nbytes > size:
        raise corrupt(path, f"truncated: the array needs {nbytes} bytes after its header at "
                            f"{start}, the file has {size - start}")
    return _mapped(fd, start, shape, fortran, dt, path)


def _mapped(fd: int, offset: int, shape: Tuple[int, ...], fortran: bool, dt: np.dtype,
            path: str) -> Any:
    if not fortran:
        return file_leaf(fd, offset, tuple(shape), dt, path)
    # Fortran order: the bytes are the transpose's C order; a transposed view of those.
    rev = tuple(reversed(shape))
    deferred = deferred_class()
    if deferred is None:
        return file_leaf(fd, offset, rev, dt, path).T
    from ._common import map_array  # noqa: PLC0415

    return deferred(tuple(shape), dt, lambda: map_array(fd, offset, rev, dt).T)


def _npz(path: str, fd: int, size: int, allow_pickle: bool) -> Tuple[Dict[str, Any], Any]:
    try:
        z = zipfile.ZipFile(path)
    except Exception as e:  # noqa: BLE001  (zipfile on hostile bytes: anything)
        raise corrupt(path, f"not a readable zip archive: {e}") from None
    try:
        tree: Dict[str, Any] = {}
        for info in z.infolist():
            name = info.filename
            key = name[:-4] if name.endswith(".npy") else name
            if key in tree:
                raise corrupt(path, "two members of this name", name)
            tree[key] = _member(path, fd, size, z, info, allow_pickle)
    except BaseException:
        z.close()
        raise
    return tree, z.close


def _member(path: str, fd: int, size: int, z: zipfile.ZipFile, info: zipfile.ZipInfo,
            allow_pickle: bool) -> Any:
    name = info.filename
    try:
        with z.open(info) as f:
            shape, fortran, dt = _header(f, path, name)
            header_len = f.tell()
    except Error:
        raise
    except Exception as e:  # noqa: BLE001  (zipfile/zlib on hostile bytes: anything)
        raise corrupt(path, f"cannot read the member: {e}", name) from None
    _check_dtype(dt, path, name, allow_pickle)
    nbytes = int(np.prod(shape, dtype=object)) * dt.itemsize
    if not dt.hasobject and header_len + nbytes != info.file_size:
        raise corrupt(path, f"the member holds {info.file_size} bytes; its header says "
                            f"{header_len} + {nbytes}", name)
    if (info.compress_type != zipfile.ZIP_STORED and not dt.hasobject
            and nbytes > max(info.compress_size * _MAX_RATIO, 1 << 20)):
        # deflate expands at most ~1032:1: a larger claim is a bomb or a lie, refused before
        # anything is allocated.
        raise corrupt(path, f"claims {nbytes} bytes from {info.compress_size} compressed", name)
    if info.compress_type == zipfile.ZIP_STORED and not dt.hasobject and nbytes:
        # The data of a stored member starts after its local header (whose name and extra
        # field lengths may differ from the central directory's).
        local = read_exact(fd, info.header_offset, 30, path)
        if local[:4] != b"PK\x03\x04":
            raise corrupt(path, "bad local header", name)
        n_name, n_extra = struct.unpack("<HH", local[26:30])
        start = info.header_offset + 30 + n_name + n_extra + header_len
        if start + nbytes > size or info.compress_size != info.file_size:
            raise corrupt(path, "the member runs past the end of the archive", name)
        return _mapped(fd, start, shape, fortran, dt, path)

    def read() -> np.ndarray:
        try:
            with z.open(info) as f:
                return np.lib.format.read_array(f, allow_pickle=allow_pickle)
        except Exception as e:  # noqa: BLE001  (zipfile/zlib on hostile bytes: anything)
            raise corrupt(path, f"cannot read the member: {e}", name) from None

    deferred = deferred_class()
    if deferred is None or dt.hasobject:
        return read()
    return deferred(tuple(shape), dt, read)


__all__ = ["FORMAT", "sniff", "open_source"]
