"""jtree -> safetensors: the arrays under flat names, their path's keys joined with '.' (the
Hugging Face convention: {"model": {"layers": [{"w": ...}]}} -> "model.layers.0.w").

safetensors holds only tensors and a string-to-string ``__metadata__``: the .jtree file's user
metadata goes there (values that are not UTF-8 text are refused), and a leaf that is not an
array (an int, a str, None...) is refused with its key path rather than dropped or turned into
text silently. The file is written to a temporary file beside ``dst``, one tensor at a time
(each read from the .jtree file, written, and freed), and renamed into place when complete.

Sharded output, as transformers' ``save_pretrained`` writes it: with ``max_shard_size``, the
tensors (in order) are cut into shards of at most that many bytes (a tensor larger than that
alone in its own), written as ``NAME-0000i-of-0000n.safetensors`` with
``NAME.safetensors.index.json`` (``{"metadata": {"total_size": bytes}, "weight_map": {tensor:
shard}}``, keys sorted) beside them; what fits in one shard is the one file
``NAME.safetensors``. ``dst`` is ``DIR/NAME.safetensors``, or a directory: ``DIR/model...``.
Every shard goes to a temporary file first; they are renamed into place once all are
written, the index last, and what a previous conversion left under the same ``NAME`` (an
index, shards of another count) is removed, so that a loader never mixes two conversions.
"""
from __future__ import annotations

import json
import os
import re
import tempfile
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

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


def plan(file: Any, src: str) -> Tuple[Dict[str, str], List[Tuple[str, Any, int, Dict[str, Any]]]]:
    """The ``__metadata__`` (dict of str) and the tensors to write, in order: (name, LazyArray,
    nbytes, header entry without its data_offsets)."""
    from .._file import LazyArray  # noqa: PLC0415

    leaves: List[Tuple[Tuple[Any, ...], Any]] = []
    _walk(file.root, (), leaves)
    meta = {}
    for k, v in file.metadata.items():
        try:
            meta[k] = v.decode("utf-8") if isinstance(v, (bytes, bytearray)) else str(v)
        except UnicodeDecodeError:
            raise error(InvalidArgumentError, src, None,
                        f"user metadata {k!r} is not UTF-8 text; safetensors' __metadata__ "
                        f"holds only strings") from None
    tensors: List[Tuple[str, Any, int, Dict[str, Any]]] = []
    names = {"__metadata__"}
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
        if name in names:
            raise error(InvalidArgumentError, src, where,
                        f"two leaves are both named {name!r} once their keys are joined with "
                        f"'.'")
        names.add(name)
        dname = _dtypes.name_of_numpy(np.dtype(x.dtype)) or str(x.dtype)
        st = SAFETENSORS_NAME_OF.get(dname)
        if st is None:
            raise error(NotSupportedError, src, where,
                        f"dtype {dname} has no safetensors equivalent")
        tensors.append((name, x, int(x.nbytes),
                        {"dtype": st, "shape": [int(d) for d in x.shape]}))
    return meta, tensors


# Units of max_shard_size: decimal as huggingface_hub's ("5GB" is 5 * 10**9), binary with "i".
_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def parse_size(size: Union[int, str]) -> int:
    """Bytes from ``max_shard_size``: an int, or a number and a unit such as "5GB" (10**9
    bytes, as transformers reads it) or "512MiB"; InvalidArgumentError otherwise."""
    if isinstance(size, int) and not isinstance(size, bool):
        n = size
    else:
        m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([A-Za-z]*)\s*", size) \
            if isinstance(size, str) else None
        unit = _UNITS.get(m.group(2).upper() or "B") if m else None
        if unit is None:
            raise error(InvalidArgumentError, None, None,
                        f"max_shard_size must be a number of bytes or a size such as '5GB' or "
                        f"'512MiB', not {size!r}")
        n = int(float(m.group(1)) * unit)
    if n <= 0:
        raise error(InvalidArgumentError, None, None,
                    f"max_shard_size must be positive, not {size!r}")
    return n


def outputs(dst: str) -> Tuple[str, str, str]:
    """(directory, NAME, the single file's path) of a destination: ``DIR/NAME.safetensors``
    (any other file name is the single file, NAME its name), or a directory (an existing one,
    or a path ending with a separator) for ``DIR/model.safetensors``; paths absolute."""
    if os.path.isdir(dst) or dst.endswith(os.sep) or (os.altsep and dst.endswith(os.altsep)):
        directory = os.path.abspath(dst)
        return directory, "model", os.path.join(directory, "model.safetensors")
    single = os.path.abspath(dst)
    directory, base = os.path.split(single)
    name = base[:-len(".safetensors")] if base.endswith(".safetensors") else base
    return directory, name, single


def existing(dst: str) -> List[str]:
    """The files a previous conversion to ``dst`` left: its single file, or the index and
    shards of the same NAME (what an overwrite replaces or removes); absolute paths."""
    directory, name, single = outputs(dst)
    if not os.path.isdir(directory):
        return []
    shard = re.compile(re.escape(name) + r"-\d{5}-of-\d{5}\.safetensors")
    found = [os.path.join(directory, n) for n in os.listdir(directory)
             if n == f"{name}.safetensors.index.json" or shard.fullmatch(n)]
    return sorted(found + ([single] if os.path.isfile(single) else []))


def _split(tensors: List[Tuple[str, Any, int, Dict[str, Any]]],
           max_bytes: Optional[int]) -> List[List[Tuple[str, Any, int, Dict[str, Any]]]]:
    """The tensors cut into shards as huggingface_hub's split_state_dict_into_shards cuts
    them: in order, a new shard when the next tensor would make this one exceed
    ``max_bytes``; a tensor larger than that alone in a shard of its own."""
    if max_bytes is None:
        return [tensors]
    shards: List[List[Tuple[str, Any, int, Dict[str, Any]]]] = []
    current: List[Tuple[str, Any, int, Dict[str, Any]]] = []
    size = 0
    for t in tensors:
        n = t[2]
        if n > max_bytes:
            shards.append([t])
            continue
        if current and size + n > max_bytes:
            shards.append(current)
            current, size = [], 0
        current.append(t)
        size += n
    if current or not shards:
        shards.append(current)
    return shards


def write(file: Any, dst: str, *, progress: Optional[Callable[[int], None]] = None,
          max_shard_size: Optional[Union[int, str]] = None) -> str:
    """Writes the arrays of the open .jtree ``file`` as safetensors at ``dst``: one file, or
    shards and their index past ``max_shard_size`` bytes (see the module doc). ``progress(n)``
    is called with each tensor's bytes once written. Returns the path a reader opens: the
    file, or the index."""
    src = file.name
    meta, tensors = plan(file, src)
    max_bytes = None if max_shard_size is None else parse_size(max_shard_size)
    shards = _split(tensors, max_bytes)
    directory, name, single = outputs(dst)
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as e:
        raise error(StorageError, dst, None, f"cannot create the directory: {e}") from None
    if len(shards) == 1:
        targets = [single]
    else:
        targets = [os.path.join(directory, f"{name}-{i + 1:05d}-of-{len(shards):05d}.safetensors")
                   for i in range(len(shards))]
    temps: List[str] = []
    try:
        for shard, target in zip(shards, targets):
            temps.append(_write_file(src, shard, meta, target, progress))
        stale = set(existing(dst)) - set(targets)
        for tmp, target in zip(temps, targets):
            os.replace(tmp, target)
        temps = []
        entry = targets[0]
        if len(shards) > 1:
            index = {"metadata": {"total_size": sum(t[2] for t in tensors)},
                     "weight_map": {t[0]: os.path.basename(target)
                                    for shard, target in zip(shards, targets) for t in shard}}
            entry = os.path.join(directory, f"{name}.safetensors.index.json")
            text = json.dumps(index, indent=2, sort_keys=True) + "\n"
            _replace_with(entry, text.encode("utf-8"))
        for old in stale - {entry}:
            _unlink(old)
        return entry
    except OSError as e:
        raise error(StorageError, dst, None, f"cannot write: {e}") from None
    finally:
        for tmp in temps:
            _unlink(tmp)


def _write_file(src: str, tensors: List[Tuple[str, Any, int, Dict[str, Any]]],
                meta: Dict[str, str], target: str,
                progress: Optional[Callable[[int], None]]) -> str:
    """One safetensors file of ``tensors``, written to a temporary file beside ``target``;
    returns the temporary file's path (removed on failure)."""
    header: Dict[str, Any] = {"__metadata__": meta} if meta else {}
    offset = 0
    for tname, _, n, entry in tensors:
        header[tname] = dict(entry, data_offsets=[offset, offset + n])
        offset += n
    head = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    head += b" " * (-len(head) % 8)  # the data section 8-byte aligned, as safetensors does
    try:
        fd, tmp = tempfile.mkstemp(prefix=os.path.basename(target) + ".", suffix=".tmp",
                                   dir=os.path.dirname(os.path.abspath(target)))
    except OSError as e:
        raise error(StorageError, target, None, f"cannot create a file beside it: {e}") from None
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(len(head).to_bytes(8, "little"))
            out.write(head)
            for tname, lazy, n, _ in tensors:
                arr = np.ascontiguousarray(lazy.read(mmap=False))
                data = _dtypes.numpy_bytes(arr) if arr.size else b""
                if len(data) != n:
                    raise error(StorageError, src, tname,
                                f"read {len(data)} bytes, expected {n}")
                out.write(memoryview(data) if len(data) else b"")
                del arr, data
                if progress:
                    progress(n)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        return tmp
    except OSError as e:
        _unlink(tmp)
        raise error(StorageError, target, None, f"cannot write: {e}") from None
    except BaseException:
        _unlink(tmp)
        raise


def _replace_with(path: str, data: bytes) -> None:
    """``path`` replaced atomically by a file holding ``data``."""
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp",
                               dir=os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
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
