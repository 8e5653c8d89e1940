"""Helpers the converter's readers share: errors naming the input, dtype tables, and array
leaves that are memory maps of a byte range of a file.

A tensor leaf maps only its own bytes, when the writer reaches it (a ``Deferred`` leaf), and the
map goes away once the writer drops the array: the pages the writer touched leave the process
with it, so converting a model holds about one tensor in memory (a map of the whole file would
keep every page read resident until the end).
"""
from __future__ import annotations

import mmap
import os
import sys
from typing import Any, Callable, List, Optional, Tuple

import numpy as np

from .. import _dtypes
from .._errors import CorruptionError, NotSupportedError, error

# The safetensors dtype names -> jtree dtype names (ml_dtypes types for BF16 and F8).
SAFETENSORS_DTYPES = {
    "BOOL": "bool", "U8": "uint8", "I8": "int8", "U16": "uint16", "I16": "int16",
    "U32": "uint32", "I32": "int32", "U64": "uint64", "I64": "int64",
    "F16": "float16", "BF16": "bfloat16", "F32": "float32", "F64": "float64",
    "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2",
    "F8_E4M3FNUZ": "float8_e4m3fnuz", "F8_E5M2FNUZ": "float8_e5m2fnuz",
    "E8M0": "float8_e8m0fnu", "F8_E8M0": "float8_e8m0fnu",
    "C64": "complex64",
}
# jtree dtype name -> the safetensors name a writer uses (the first of the aliases above).
SAFETENSORS_NAME_OF = {}
for _st, _jt in SAFETENSORS_DTYPES.items():
    SAFETENSORS_NAME_OF.setdefault(_jt, _st)


def corrupt(file: str, message: str, key: Optional[str] = None) -> CorruptionError:
    """A CorruptionError whose message starts with the input file (and the tensor)."""
    return error(CorruptionError, file, key, message)  # type: ignore[return-value]


def numpy_dtype(name: str, file: str, key: Optional[str] = None) -> np.dtype:
    """The NumPy dtype of a jtree dtype name, little-endian (the byte order of every format
    read here); NotSupportedError naming the file when ml_dtypes is missing."""
    dt = _dtypes.numpy_dtype(name, file, key)
    if sys.byteorder != "little" and dt.itemsize > 1:
        raise error(NotSupportedError, file, key, "converting on a big-endian machine is not "
                                                  "supported")
    return dt


def deferred_class() -> Any:
    """jtree's Deferred leaf class when this build has it (the Python class and the native
    writer's support), else None: the readers then hand over plain memory maps."""
    try:
        from .._deferred import Deferred  # noqa: PLC0415
        from .._jtree import Builder  # noqa: PLC0415
    except ImportError:
        return None
    return Deferred if "DEFERRED" in getattr(Builder, "OPS", {}) else None


def map_array(fd: int, offset: int, shape: Tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A read-only array over ``fd``'s bytes [offset, offset + nbytes): a private memory map
    of that range alone (unmapped when the array goes), or an empty array."""
    count = 1
    for d in shape:
        count *= d
    nbytes = count * dtype.itemsize
    if nbytes == 0:
        return np.zeros(shape, dtype)
    start = offset - offset % mmap.ALLOCATIONGRANULARITY
    mm = mmap.mmap(fd, nbytes + (offset - start), offset=start, access=mmap.ACCESS_READ)
    return np.frombuffer(mm, dtype=dtype, count=count, offset=offset - start).reshape(shape)


# Tensors up to this size are read at once rather than mapped when written: a map per small
# tensor (biases, norms, scalars) costs more than the copy, and together they are little memory.
SMALL_TENSOR = 64 << 10


def file_leaf(fd: int, offset: int, shape: Tuple[int, ...], dtype: np.dtype,
              path: str = "") -> Any:
    """The leaf for a tensor stored raw at ``offset`` of an open file: a Deferred that maps it
    when written (without Deferred: the map made now); small tensors are read now."""
    count = 1
    for d in shape:
        count *= d
    nbytes = count * dtype.itemsize
    if nbytes <= SMALL_TENSOR:
        data = read_exact(fd, offset, nbytes, path)
        return np.frombuffer(data, dtype=dtype, count=count).reshape(shape).copy()
    deferred = deferred_class()
    if deferred is None:
        return map_array(fd, offset, shape, dtype)
    return deferred(shape, dtype, lambda: map_array(fd, offset, shape, dtype))


def open_fd(path: str) -> Tuple[int, int]:
    """(fd, size) of a regular file opened for reading; NotFoundError/StorageError otherwise."""
    from .._errors import NotFoundError, StorageError  # noqa: PLC0415

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise error(NotFoundError, path, None, "no such file") from None
    except OSError as e:
        raise error(StorageError, path, None, f"cannot open: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        import stat  # noqa: PLC0415

        if not stat.S_ISREG(st.st_mode):
            raise error(StorageError, path, None, "not a regular file")
        return fd, st.st_size
    except BaseException:
        os.close(fd)
        raise


def read_exact(fd: int, offset: int, n: int, path: str) -> bytes:
    """Exactly n bytes at offset, or CorruptionError (the file is shorter than it says)."""
    data = os.pread(fd, n, offset)
    if len(data) != n:
        raise corrupt(path, f"truncated: {n} bytes wanted at offset {offset}, "
                            f"{len(data)} there")
    return data


def closer(*fns: Callable[[], None]) -> Callable[[], None]:
    """One close() running each of ``fns`` once, even if one raises."""
    done = []

    def close() -> None:
        if done:
            return
        done.append(True)
        first: Optional[BaseException] = None
        for f in fns:
            try:
                f()
            except BaseException as e:  # noqa: BLE001
                first = first or e
        if first is not None:
            raise first

    return close


__all__ = ["corrupt", "numpy_dtype", "map_array", "file_leaf",
           "open_fd", "read_exact", "closer", "deferred_class", "SAFETENSORS_DTYPES",
           "SAFETENSORS_NAME_OF"]


# ---- releasing pages of a whole-file map (PyTorch's mmap=True loads) ----------------------------

def file_mappings(path: str) -> List[Tuple[int, int]]:
    """[start, end) address ranges of this process's memory maps of ``path`` (by device and
    inode, from /proc/self/maps); empty where that file does not exist (not Linux)."""
    try:
        st = os.stat(path)
        out = []
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) < 5:
                    continue
                inode = int(parts[4])
                major, minor = (int(x, 16) for x in parts[3].split(":"))
                if inode == st.st_ino and os.makedev(major, minor) == st.st_dev:
                    lo, hi = (int(x, 16) for x in parts[0].split("-"))
                    out.append((lo, hi))
        return out
    except (OSError, ValueError):
        return []


_MADV_DONTNEED = 4
_libc: Any = None


def release_pages(addr: int, nbytes: int, mappings: List[Tuple[int, int]]) -> None:
    """Drops the pages of [addr, addr + nbytes) from this process (they stay in the page cache)
    when the range lies inside one of ``mappings`` (maps of an unmodified input file, whose
    pages come back from the file if touched again). Anything else -- anonymous memory, whose
    pages would be zeroed -- is left alone. Best effort: failures are ignored."""
    global _libc
    if nbytes <= 0 or not mappings:
        return
    page = mmap.PAGESIZE
    start = addr - addr % page
    end = addr + nbytes
    if not any(lo <= start and end <= hi for lo, hi in mappings):
        return
    try:
        if _libc is None:
            import ctypes  # noqa: PLC0415

            _libc = ctypes.CDLL(None, use_errno=True)
            _libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        _libc.madvise(start, end - start, _MADV_DONTNEED)
    except (OSError, AttributeError):
        pass
