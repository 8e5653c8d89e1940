"""jtree -> safetensors: the arrays under flat names, their path's keys joined with '.' (the
Hugging Face convention: {"model": {"layers": [{"w": ...}]}} -> "model.layers.0.w").

safetensors holds only tensors and a string-to-string ``__metadata__``: the .jtree file's user
metadata goes there (values that are not UTF-8 text are refused), and a leaf that is not an
array (an int, a str, None...) is refused with its key path rather than dropped or turned into
text silently. The file is written to a temporary file beside ``dst``, one tensor at a time
(each read from the .jtree file, written, and freed), and renamed into place when complete.
"""
from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from .. import _dtypes
from .. import _keypath as kp
from .._errors import InvalidArgumentError, NotSupportedError, StorageError, error
from ._common import SAFETENSORS_NAME_OF

FORMAT = "safetensors"


def _walk(node: Any, path: Tuple[Any, ...], out: List[Tuple[Tuple[Any, ...], Any]]) -> None:
    """(path, LazyArray or value) of every leaf under an open file's node, in order."""
    from .._file import Node  # noqa: PLC0415

    stack = [(path, node)]
    while stack:
        p, n = stack.pop()
        if isinstance(n, Node):
            stack.extend(reversed([(p + (k,), n[k]) for k in n.keys()]))
        else:
            out.append((p, n))


def plan(file: Any, src: str) -> Tuple[Dict[str, Any], List[Tuple[str, Any, int]]]:
    """The safetensors header (dict) and the tensors to write: (name, LazyArray, nbytes)."""
    from .._file import LazyArray  # noqa: PLC0415

    leaves: List[Tuple[Tuple[Any, ...], Any]] = []
    _walk(file.root, (), leaves)
    header: Dict[str, Any] = {}
    meta = {}
    for k, v in file.metadata.items():
        try:
            meta[k] = v.decode("utf-8") if isinstance(v, (bytes, bytearray)) else str(v)
        except UnicodeDecodeError:
            raise error(InvalidArgumentError, src, None,
                        f"user metadata {k!r} is not UTF-8 text; safetensors' __metadata__ "
                        f"holds only strings") from None
    if meta:
        header["__metadata__"] = meta
    tensors: List[Tuple[str, Any, int]] = []
    offset = 0
    for path, x in leaves:
        where = kp.join(path)
        if not isinstance(x, LazyArray):
            raise error(InvalidArgumentError, src, where,
                        f"a leaf of type {type(x).__name__}: safetensors holds only tensors "
                        f"(convert a tree of arrays, or load the file, drop the other leaves "
                        f"and save it again)")
        if not path:
            raise error(InvalidArgumentError, src, where,
                        "the root is one array: safetensors needs named tensors")
        name = ".".join(str(k) for k in path)
        if name in header or name == "__metadata__":
            raise error(InvalidArgumentError, src, where,
                        f"two leaves are both named {name!r} once their keys are joined with "
                        f"'.'")
        dname = _dtypes.name_of_numpy(np.dtype(x.dtype)) or str(x.dtype)
        st = SAFETENSORS_NAME_OF.get(dname)
        if st is None:
            raise error(NotSupportedError, src, where,
                        f"dtype {dname} has no safetensors equivalent")
        n = int(x.nbytes)
        header[name] = {"dtype": st, "shape": [int(d) for d in x.shape],
                        "data_offsets": [offset, offset + n]}
        tensors.append((name, x, n))
        offset += n
    return header, tensors


def write(file: Any, dst: str, *, progress: Optional[Callable[[int], None]] = None) -> None:
    """Writes the arrays of the open .jtree ``file`` as the safetensors file ``dst`` (see the
    module doc). ``progress(n)`` is called with each tensor's bytes once written."""
    src = file.name
    header, tensors = plan(file, src)
    head = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    head += b" " * (-len(head) % 8)  # the data section 8-byte aligned, as safetensors does
    directory = os.path.dirname(os.path.abspath(dst))
    try:
        fd, tmp = tempfile.mkstemp(prefix=os.path.basename(dst) + ".", suffix=".tmp",
                                   dir=directory)
    except OSError as e:
        raise error(StorageError, dst, None, f"cannot create a file beside it: {e}") from None
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(len(head).to_bytes(8, "little"))
            out.write(head)
            for name, lazy, n in tensors:
                arr = np.ascontiguousarray(lazy.read(mmap=False))
                data = arr.reshape(-1).view(np.uint8) if arr.size else b""
                if len(data) != n:
                    raise error(StorageError, src, name,
                                f"read {len(data)} bytes, expected {n}")
                out.write(memoryview(data) if len(data) else b"")
                del arr, data
                if progress:
                    progress(n)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, dst)
    except OSError as e:
        _unlink(tmp)
        raise error(StorageError, dst, None, f"cannot write: {e}") from None
    except BaseException:
        _unlink(tmp)
        raise


def _umask() -> int:
    """The process's umask, read without changing it (os.umask would race other threads)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
