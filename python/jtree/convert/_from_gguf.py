"""GGUF (llama.cpp's model format) -> tree, for `jtree convert model.gguf model.jtree`.

The tree (every dict in the file's order):

    {"tensors":        {name: array},      # every tensor, a view of the memory-mapped input
     "tensor_types":   {name: "Q4_0"},     # every tensor's GGML type name
     "metadata":       {key: value},       # GGUF's key-values
     "metadata_types": {key: "UINT32"}}    # their GGUF value types ("ARRAY[STRING]", ...)

Shapes are NumPy's (row-major) order: GGUF lists dimensions fastest-varying first (ne[0] is a
row's length), so a GGUF tensor with ne = [4096, 32000] is a (32000, 4096) array here, the shape
``gguf.GGUFReader`` and llama.cpp's converters use. F32, F16, F64, BF16 (ml_dtypes.bfloat16) and
I8/I16/I32/I64 tensors are arrays of that dtype. Every other type (Q4_0, Q8_0, Q4_K, IQ2_XS...)
is kept bit-exact as its raw blocks: a uint8 array whose last dimension is the bytes of one row
(``gguf.quants.quant_shape_to_byte_shape``), its type named in ``tensor_types``; rows stay rows,
so a slice of rows reads only those rows. Key-values: numbers and bools as Python scalars,
strings as str (bytes if not UTF-8), arrays of numbers as 1-d NumPy arrays of their exact type,
arrays of strings (the tokenizer's vocabulary) as lists; ``metadata_types`` keeps each GGUF type
so ``_to_gguf`` writes the same bytes back. The .jtree file's user metadata gets "gguf.version".

Split models (llama.cpp's ``gguf-split``, ``GGUFWriter(split_max_tensors=...)``): converting
any shard of a set ``model-00001-of-00003.gguf``, ... converts the whole set into one tree, the
layout above as if the model were one file. The other shards are found beside it by llama.cpp's
naming (_gguf_split), each parsed and validated like a single file; their tensors follow in
shard order, the key-values are the first shard's (plus any key only a later shard has, which
must agree where two shards have it), without the split.* keys, since the result is one model.
The set must be whole and consistent: every shard present, split.count the same in every
shard and equal to the number of files, split.no each shard's place (0-based), no tensor name
twice, split.tensors.count the total; anything else is a CorruptionError naming the shard
(and the set). A file whose split.count is 0 or 1 (``gguf-split --merge`` leaves 0) is one
model, as llama.cpp reads it, and converts as it is. A later shard without general.alignment
may be laid out at the first shard's (gguf-py does that): _gguf_split.aligned_like. The user
metadata also gets "gguf.split_count". Memory stays about one tensor; one file descriptor per
shard stays open until the conversion ends. ``open_file`` reads a single file as it is (split
keys kept), for the writer's verify.
"""
from __future__ import annotations

import mmap
import os
from typing import Any, Dict, List, Tuple

import numpy as np

from .. import _dtypes
from .._errors import NotSupportedError
from . import _common, _gguf_parse, _gguf_split
from ._source import Source

FORMAT = "gguf"

# GGML types stored as arrays of a NumPy dtype; every other type is kept as raw uint8 blocks.
_ARRAY_TYPES: Dict[str, Any] = {
    "F32": np.float32, "F16": np.float16, "F64": np.float64,
    "I8": np.int8, "I16": np.int16, "I32": np.int32, "I64": np.int64,
}


def sniff(path: str) -> bool:
    """True if ``path`` is a file starting with GGUF's magic. Never raises."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == _gguf_parse.MAGIC
    except OSError:
        return False


def _tensor_leaf(fd: int, t: _gguf_parse.TensorInfo, type_name: str) -> Any:
    """The tensor's leaf, in NumPy's dimension order: an array of its dtype, or for block types
    its rows of raw bytes (the parser checked that ne[0] is a whole number of blocks and that
    the bytes lie inside the file). A map of its own byte range, made when the writer reaches
    it (_common.file_leaf), so memory stays about one tensor."""
    shape = tuple(reversed(t.ne))
    if type_name in _ARRAY_TYPES:
        dtype = np.dtype(_ARRAY_TYPES[type_name])
    elif type_name == "BF16":
        dtype = _dtypes.numpy_dtype("bfloat16")
    else:
        block, type_size = _gguf_parse.block_sizes(t.ggml_type)
        dtype = np.dtype(np.uint8)
        shape = shape[:-1] + (shape[-1] // block * type_size,)
    if not shape:
        # A 0-d leaf is read now (4 bytes at most): jtree's Deferred refuses 0-d fetches in
        # this build.
        return np.array(_common.map_array(fd, t.offset, shape, dtype))
    return _common.file_leaf(fd, t.offset, shape, dtype)


def _need_gguf(path: str) -> None:
    """NotSupportedError naming ``path`` when the gguf package (GGML's type table) is missing."""
    try:
        import gguf  # noqa: F401 - the GGML type table comes from it
    except ImportError as e:
        raise NotSupportedError(f"{path}: reading GGUF needs the gguf package "
                                f"(pip install gguf): {e}", file=path) from e


def _parse_fd(fd: int, path: str,
              alignment: int = _gguf_parse.DEFAULT_ALIGNMENT) -> _gguf_parse.Header:
    """The parsed and validated header of the open GGUF file ``fd``."""
    if os.fstat(fd).st_size == 0:
        raise _common.corrupt(path, "GGUF: the file is empty")
    # The header is parsed from a map of the whole file, dropped afterwards: only the header's
    # pages are touched. Each tensor gets a map of its own bytes later.
    with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as whole:
        return _gguf_parse.parse(whole, path, alignment)


def _open_file(path: str) -> Tuple[int, _gguf_parse.Header]:
    """(fd, parsed and validated header) of one GGUF file; the fd is closed on failure."""
    fd, _ = _common.open_fd(path)
    try:
        return fd, _parse_fd(fd, path)
    except BaseException:
        os.close(fd)
        raise


def _source(files: List[Tuple[int, _gguf_parse.Header]], kvs: List[_gguf_parse.KeyValue],
            metadata: Dict[str, str], what: str) -> Source:
    """The tree of ``files``' tensors, in file order, with the key-values ``kvs``; the Source
    closes every fd (all of them closed here on failure)."""
    tensors: Dict[str, Any] = {}
    types: Dict[str, str] = {}
    try:
        for fd, header in files:
            for t in header.tensors:
                name = _gguf_parse.ggml_type_name(t.ggml_type)
                types[t.name] = name
                tensors[t.name] = _tensor_leaf(fd, t, name)
    except BaseException:
        for fd, _ in files:
            os.close(fd)
        raise
    tree = {
        "tensors": tensors,
        "tensor_types": types,
        "metadata": {kv.key: kv.value for kv in kvs},
        "metadata_types": {kv.key: kv.type_name for kv in kvs},
    }
    n_quant = sum(1 for v in types.values() if v not in _ARRAY_TYPES and v != "BF16")
    desc = (f"GGUF v{files[0][1].version}{what}: {len(tensors)} tensors ({n_quant} quantized), "
            f"{len(kvs)} key-values")
    return Source(tree=tree, metadata=metadata, description=desc,
                  close=_common.closer(*[(lambda fd=fd: os.close(fd)) for fd, _ in files]))


def open_file(path: str) -> Source:
    """The tree of the one GGUF file ``path`` as it is, split.* key-values included (a shard of
    a split set alone): what the GGUF writer's verify re-reads."""
    _need_gguf(path)
    fd, header = _open_file(path)
    return _source([(fd, header)], header.kvs, {"gguf.version": str(header.version)}, "")


def open_source(path: str, *, allow_pickle: bool = False) -> Source:
    """Opens the GGUF file ``path``, or the whole split set it is a shard of, validates every
    header (_gguf_parse, _gguf_split) and returns the tree described in this module's
    docstring, its tensors mapped from the files when written. Raises CorruptionError /
    NotSupportedError naming the file."""
    del allow_pickle  # GGUF has no pickles
    _need_gguf(path)
    fd, header = _open_file(path)
    opened = [fd]
    try:
        split = _gguf_split.split_of(header, path)
        if split is None:
            files = [(fd, header)]
            kvs = header.kvs
            metadata = {"gguf.version": str(header.version)}
            what = ""
        else:
            paths = _gguf_split.shard_paths(path, split)
            _gguf_split.check_present(paths)
            files = []
            owner: Dict[str, str] = {}
            for i, p in enumerate(paths):
                if i == split.no:
                    f = (fd, header)  # path itself: already open
                else:
                    f = _open_file(p)
                    opened.append(f[0])
                if i:
                    f = (f[0], _gguf_split.aligned_like(
                        files[0][1], f[1], lambda a, fd=f[0], p=p: _parse_fd(fd, p, a)))
                _gguf_split.check_shard(i, p, _gguf_split.split_of(f[1], p), split, path)
                _gguf_split.check_tensor_names(owner, f[1], p)
                files.append(f)
            _gguf_split.check_total(len(owner), split, paths)
            kvs = _gguf_split.merge_kvs(list(zip(paths, (h for _, h in files))))
            metadata = {"gguf.version": str(files[0][1].version),
                        "gguf.split_count": str(split.count)}
            what = f", split in {split.count} shards"
    except BaseException:
        for x in opened:
            os.close(x)
        raise
    return _source(files, kvs, metadata, what)  # closes every fd itself on failure
