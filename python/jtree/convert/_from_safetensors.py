"""safetensors -> tree: one ``.safetensors`` file, or a Hugging Face sharded checkpoint
(``model.safetensors.index.json`` and its shards; given the index file or its directory).

The header is parsed here (it is JSON) and checked before anything is mapped: a bounded header
length, every tensor's dtype known, its shape a list of non-negative ints, its byte range inside
the data section and as long as shape and dtype say, no two ranges overlapping. Anything else is
a CorruptionError naming the file and the tensor. The tensors become leaves of a flat dict
under their names as stored ("model.layers.0.mlp.up_proj.weight"), each a memory map of its
bytes; ``__metadata__`` becomes the .jtree file's user metadata.
"""
from __future__ import annotations

import json
import os
import struct
from typing import Any, Dict, List, Optional, Tuple

from .._dtypes import TABLE
from .._errors import NotFoundError, NotSupportedError, error
from ._common import (SAFETENSORS_DTYPES, closer, corrupt, file_leaf, numpy_dtype, open_fd,
                      read_exact)
from ._source import Source

FORMAT = "safetensors"

# safetensors' own bound on the header (100 MB): a larger length is refused before reading it.
MAX_HEADER = 100_000_000
MAX_DIMS = 64
INDEX_SUFFIX = ".safetensors.index.json"
# An index naming more shards than this is refused (each shard costs an open file).
MAX_SHARDS = 100_000


def sniff(path: str) -> bool:
    """A .safetensors file, an index json, or a directory holding either."""
    try:
        if os.path.isdir(path):
            return _find_in_dir(path) is not None
        if path.endswith(INDEX_SUFFIX):
            return True
        if path.endswith(".safetensors"):
            return True
        # No extension to go by: an 8-byte length followed by '{'.
        with open(path, "rb") as f:
            head = f.read(9)
        return (len(head) == 9 and head[8:9] == b"{"
                and struct.unpack("<Q", head[:8])[0] < MAX_HEADER)
    except Exception:  # noqa: BLE001  (sniff never raises)
        return False


def _find_in_dir(path: str) -> Optional[str]:
    """The index json of a checkpoint directory, else its only .safetensors file, else None."""
    names = sorted(os.listdir(path))
    index = [n for n in names if n.endswith(INDEX_SUFFIX)]
    if len(index) == 1:
        return os.path.join(path, index[0])
    single = [n for n in names if n.endswith(".safetensors")]
    if not index and len(single) == 1:
        return os.path.join(path, single[0])
    return None


def open_source(path: str, *, allow_pickle: bool = False) -> Source:
    """Opens a safetensors file, index json or checkpoint directory (see the module doc)."""
    del allow_pickle  # safetensors holds no pickle
    if os.path.isdir(path):
        found = _find_in_dir(path)
        if found is None:
            raise error(NotFoundError, path, None,
                        "no model.safetensors.index.json nor a single .safetensors file in this "
                        "directory")
        path = found
    if path.endswith(INDEX_SUFFIX) or (path.endswith(".json") and not _looks_binary(path)):
        return _open_sharded(path)
    fds: List[int] = []
    try:
        tree, metadata = _open_file(path, fds)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return Source(tree=tree, metadata=metadata,
                  description=f"safetensors: {len(tree)} tensors",
                  close=closer(*[(lambda fd=fd: os.close(fd)) for fd in fds]))


def _looks_binary(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(1) != b"{"
    except OSError:
        return True


def _no_duplicates(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def _parse_json(data: bytes, path: str, what: str) -> Any:
    try:
        return json.loads(data.decode("utf-8"), object_pairs_hook=_no_duplicates)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise corrupt(path, f"{what} is not valid JSON: {e}") from None


def read_header(fd: int, size: int, path: str) -> Tuple[Dict[str, Any], Dict[str, str], int]:
    """Parses and checks a safetensors header: (entries in header order: name -> (jtree dtype,
    shape, begin, end)), __metadata__, and the data section's offset in the file."""
    if size < 8:
        raise corrupt(path, f"not a safetensors file: {size} bytes, shorter than the 8-byte "
                            f"header length")
    (n,) = struct.unpack("<Q", read_exact(fd, 0, 8, path))
    if n > MAX_HEADER:
        raise corrupt(path, f"header length {n} exceeds the {MAX_HEADER}-byte limit")
    if n > size - 8:
        raise corrupt(path, f"header length {n} runs past the end of the file ({size} bytes)")
    header = _parse_json(read_exact(fd, 8, n, path), path, "the header")
    if not isinstance(header, dict):
        raise corrupt(path, "the header is not a JSON object")
    data_start = 8 + n
    data_size = size - data_start
    metadata: Dict[str, str] = {}
    entries: Dict[str, Any] = {}
    for name, e in header.items():
        if name == "__metadata__":
            if not isinstance(e, dict) or not all(isinstance(v, str) for v in e.values()):
                raise corrupt(path, "__metadata__ is not an object of strings")
            metadata = dict(e)
            continue
        entries[name] = _check_entry(name, e, data_size, path)
    # No two non-empty ranges overlap (hostile headers alias one region as two tensors).
    spans = sorted((b, e, k) for k, (_, _, b, e) in entries.items() if e > b)
    for (b0, e0, k0), (b1, e1, k1) in zip(spans, spans[1:]):
        if b1 < e0:
            raise corrupt(path, f"tensors {k0!r} [{b0}, {e0}) and {k1!r} [{b1}, {e1}) overlap")
    return entries, metadata, data_start


def _check_entry(name: str, e: Any, data_size: int, path: str) -> Tuple[str, Tuple[int, ...],
                                                                         int, int]:
    if not isinstance(e, dict):
        raise corrupt(path, "the entry is not a JSON object", name)
    dt = e.get("dtype")
    shape = e.get("shape")
    offsets = e.get("data_offsets")
    if not isinstance(dt, str):
        raise corrupt(path, "no dtype string", name)
    jdt = SAFETENSORS_DTYPES.get(dt)
    if jdt is None:
        raise error(NotSupportedError, path, name,
                    f"safetensors dtype {dt!r} is not supported (supported: "
                    f"{', '.join(SAFETENSORS_DTYPES)})")
    if (not isinstance(shape, list) or len(shape) > MAX_DIMS
            or not all(type(d) is int and d >= 0 for d in shape)):
        raise corrupt(path, f"shape {shape!r} is not a list of at most {MAX_DIMS} "
                            f"non-negative ints", name)
    if (not isinstance(offsets, list) or len(offsets) != 2
            or not all(type(o) is int and o >= 0 for o in offsets)):
        raise corrupt(path, f"data_offsets {offsets!r} is not a pair of non-negative ints", name)
    begin, end = offsets
    if begin > end or end > data_size:
        raise corrupt(path, f"data_offsets [{begin}, {end}) outside the data section of "
                            f"{data_size} bytes", name)
    numel = 1
    for d in shape:
        numel *= d
    want = numel * TABLE[jdt][1]
    if end - begin != want:
        raise corrupt(path, f"data_offsets [{begin}, {end}) hold {end - begin} bytes; dtype {dt} "
                            f"and shape {shape} need {want}", name)
    return jdt, tuple(shape), begin, end


def _open_file(path: str, fds: List[int]) -> Tuple[Dict[str, Any], Dict[str, str]]:
    """Leaves of one safetensors file (fd appended to ``fds`` for close)."""
    fd, size = open_fd(path)
    fds.append(fd)
    entries, metadata, data_start = read_header(fd, size, path)
    tree: Dict[str, Any] = {}
    for name, (jdt, shape, begin, _end) in entries.items():
        tree[name] = file_leaf(fd, data_start + begin, shape, numpy_dtype(jdt, path, name),
                               path)
    return tree, metadata


def _open_sharded(index_path: str) -> Source:
    fd, size = open_fd(index_path)
    try:
        if size > MAX_HEADER:
            raise corrupt(index_path, f"index of {size} bytes exceeds the {MAX_HEADER}-byte limit")
        index = _parse_json(read_exact(fd, 0, size, index_path), index_path, "the index")
    finally:
        os.close(fd)
    if not isinstance(index, dict) or not isinstance(index.get("weight_map"), dict):
        raise corrupt(index_path, "not a safetensors index: no \"weight_map\" object")
    weight_map: Dict[str, Any] = index["weight_map"]
    shards: List[str] = []
    for name, shard in weight_map.items():
        if (not isinstance(shard, str) or not shard or os.path.isabs(shard)
                or os.path.normpath(shard).startswith("..") or "\\" in shard
                or shard in (".", "..")):
            raise corrupt(index_path, f"shard name {shard!r} is not a file name beside the index",
                          name)
        if shard not in shards:
            shards.append(shard)
    if len(shards) > MAX_SHARDS:
        raise corrupt(index_path, f"{len(shards)} shards exceed the limit of {MAX_SHARDS}")
    base = os.path.dirname(os.path.abspath(index_path))
    metadata: Dict[str, str] = {}
    for k, v in (index.get("metadata") or {}).items() if isinstance(index.get("metadata"),
                                                                     dict) else ():
        metadata[str(k)] = v if isinstance(v, str) else json.dumps(v)
    tree: Dict[str, Any] = {}
    fds: List[int] = []
    try:
        for shard in shards:
            shard_path = os.path.join(base, shard)
            if not os.path.exists(shard_path):
                raise corrupt(index_path, f"shard {shard!r} is missing ({shard_path})")
            leaves, meta = _open_file(shard_path, fds)
            for k, v in meta.items():
                metadata.setdefault(k, v)
            for name, leaf in leaves.items():
                owner = weight_map.get(name)
                if owner != shard:
                    raise corrupt(shard_path, f"tensor in shard {shard!r} that the index maps "
                                              f"to {owner!r}", name)
                tree[name] = leaf
        missing = [n for n in weight_map if n not in tree]
        if missing:
            raise corrupt(os.path.join(base, weight_map[missing[0]]),
                          f"the index maps {len(missing)} tensor(s) to shards that lack them, "
                          f"first {missing[0]!r}")
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    # The index's order (Hugging Face writes it sorted by name), not the shards'.
    tree = {name: tree[name] for name in weight_map}
    return Source(tree=tree, metadata=metadata,
                  description=f"safetensors (sharded): {len(tree)} tensors in {len(shards)} "
                              f"shards",
                  close=closer(*[(lambda fd=fd: os.close(fd)) for fd in fds]))


__all__ = ["FORMAT", "sniff", "open_source", "read_header"]
