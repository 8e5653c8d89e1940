"""Files held by Python objects: ``jtree.save(tree, fileobj)``, ``jtree.load(fileobj)``,
``jtree.open(fileobj)``, ``jtree.dumps`` and ``jtree.loads``.

Reading: a seekable binary file object is read like a local file, with range reads: the
native reader's Source calls ``seek`` + ``readinto`` (under the GIL, one range at a time,
bindings/python/src/py_source.cc), so a slice of one leaf reads only its chunks. The file
is the object's bytes from its position when opened to its end. An object whose ``fileno()``
is a regular file, opened at its start, is read through the file itself (pread/mmap, as a
path is). Bytes-like objects (bytes, bytearray, memoryview, mmap) are read in place, without
a copy. Objects that cannot seek are refused (:class:`InvalidArgumentError`): read them into
bytes first and use :func:`loads`.

Writing: the writer streams (header, chunks, index, footer in order, never seeking back), so
any binary file object with ``write`` takes a save, written from its current position; a
failed save seeks back there and truncates when the object allows, else what was written
stays (a pipe or socket cannot take it back).
"""
from __future__ import annotations

import io
import os
import stat
from typing import Any, Dict, Optional

from . import _jtree
from ._errors import InvalidArgumentError, error

BYTES_LIKE = (bytes, bytearray, memoryview)


def is_fileobj(x: Any) -> bool:
    """True for an object that is not a path but reads or writes like a file."""
    if isinstance(x, (str, bytes, os.PathLike)):
        return False
    return hasattr(x, "read") or hasattr(x, "readinto") or hasattr(x, "write")


def is_buffer(x: Any) -> bool:
    """True for bytes-like data :func:`jtree.loads` reads in place."""
    if isinstance(x, BYTES_LIKE):
        return True
    try:
        memoryview(x).release()
    except TypeError:
        return False
    return not isinstance(x, (str, os.PathLike))


def name_of(f: Any) -> str:
    """How messages name a file object: its file name when it has one."""
    name = getattr(f, "name", None)
    if isinstance(name, str) and name:
        return name
    return f"<{type(f).__name__}>"


def _seekable(f: Any) -> bool:
    try:
        return bool(f.seekable()) if hasattr(f, "seekable") else hasattr(f, "seek")
    except (OSError, ValueError):
        return False


def open_reader(obj: Any, use_mmap: bool, limits: Optional[Dict[str, int]]) -> Any:
    """The native Reader of a file object or of bytes-like data."""
    if is_buffer(obj):
        return _jtree.Reader.open_object(obj, False, f"<{type(obj).__name__}>", limits=limits)
    name = name_of(obj)
    if isinstance(obj, io.TextIOBase):
        raise error(InvalidArgumentError, name, None,
                    "a text file object: open the file in binary mode ('rb')")
    if not (hasattr(obj, "readinto") or hasattr(obj, "read")) or not _seekable(obj):
        raise error(InvalidArgumentError, name, None,
                    f"jtree reads a file object with range reads: it must be readable and "
                    f"seekable (a {type(obj).__name__} is not); read it into bytes and use "
                    f"jtree.loads(data)")
    try:
        base = obj.tell()
        end = obj.seek(0, io.SEEK_END)
        obj.seek(base)
    except (OSError, ValueError) as e:
        raise error(InvalidArgumentError, name, None, f"cannot seek in the file object: {e}")
    path = _regular_file_path(obj, base)
    if path is not None:
        return _jtree.Reader.open(path, use_mmap, limits)
    return _jtree.Reader.open_object(_Readinto.wrap(obj), True, name, base, max(end - base, 0),
                                     limits)


def _regular_file_path(f: Any, base: int) -> Optional[str]:
    """The path of the regular file a file object reads, when it reads it from its start
    (then it is opened as a path: pread and mmap, without the GIL); else None."""
    if base != 0:
        return None
    try:
        st = os.fstat(f.fileno())
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    name = getattr(f, "name", None)
    if isinstance(name, str):
        try:
            if os.path.samestat(os.stat(name), st):
                return name
        except OSError:
            pass
    return None


class _Readinto:
    """An object with only ``read(n)`` given ``readinto`` (what the native Source calls)."""

    def __init__(self, f: Any):
        self.f = f
        self.seek = f.seek

    @staticmethod
    def wrap(f: Any) -> Any:
        return f if hasattr(f, "readinto") else _Readinto(f)

    def readinto(self, view: memoryview) -> int:
        data = self.f.read(len(view))
        view[:len(data)] = data
        return len(data)


def write(builder: Any, f: Any, name: str, progress: Any, **args: Any) -> Dict[str, int]:
    """Writes a save into a writable binary file object from its current position; on
    failure, seeks back and truncates where the object can (see the module's doc)."""
    if isinstance(f, io.TextIOBase):
        raise error(InvalidArgumentError, name, None,
                    "a text file object: open the file in binary mode ('wb')")
    if not hasattr(f, "write"):
        raise error(InvalidArgumentError, name, None,
                    f"jtree.save writes into a binary file object with write(); a "
                    f"{type(f).__name__} has none")
    start = None
    if _seekable(f):
        try:
            start = f.tell()
        except (OSError, ValueError):
            start = None
    for k in ("overwrite", "overwrite_foreign", "sync"):  # (a file object is not replaced)
        args.pop(k, None)
    try:
        return _jtree.write(builder, name, fileobj=f,
                            **args, **({"progress": progress} if progress else {}))
    except BaseException:
        if start is not None:
            try:
                f.seek(start)
                f.truncate()
            except Exception:  # noqa: BLE001  (the save's own error is what the caller needs)
                pass
        raise
