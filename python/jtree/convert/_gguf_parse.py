"""A validating parser of GGUF headers (the llama.cpp model format), for `jtree convert`.

Why not ``gguf.GGUFReader``: it trusts the file's counts. An array key-value declaring 2**60
elements loops that many times past the end of the file (a hang), a truncated file surfaces as an
IndexError deep inside it, and a tensor whose data lies beyond the end comes back as a short view.
This parser checks every number against the bytes left before using it (every element of an
array takes at least one byte, so no count can exceed the file's size), rejects tensors that lie
outside the data region, overlap, are misaligned or whose type is unknown, and raises
jtree.CorruptionError naming the file. It reads only the header; tensor data is returned as
(offset, size) pairs for the caller to map. The tests compare its result with GGUFReader's on
valid files and fuzz it with mutated ones (tests/python/test_convert_gguf.py).

Layout (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md), little-endian:
    magic "GGUF", uint32 version, uint64 tensor_count, uint64 kv_count,
    kv_count x (string key, uint32 value_type, value),
    tensor_count x (string name, uint32 n_dims, n_dims x uint64 ne, uint32 ggml_type,
                    uint64 offset relative to the data section),
    padding to the alignment (key general.alignment, default 32), tensor data.
A string is uint64 length + bytes; an array is uint32 element type + uint64 count + elements.
"""
from __future__ import annotations

import dataclasses
import functools
import struct
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from .._errors import CorruptionError, NotSupportedError

MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4          # GGML_MAX_DIMS: llama.cpp refuses more
MAX_NESTING = 8       # arrays of arrays: deeper is surely hostile (and would recurse)

# GGUF value types (gguf.GGUFValueType): name, struct code, NumPy dtype.
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, \
    FLOAT64 = range(13)
VALUE_TYPE_NAMES = ["UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32", "BOOL",
                    "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64"]
SCALAR_DTYPES: Dict[int, np.dtype] = {
    UINT8: np.dtype("<u1"), INT8: np.dtype("<i1"), UINT16: np.dtype("<u2"),
    INT16: np.dtype("<i2"), UINT32: np.dtype("<u4"), INT32: np.dtype("<i4"),
    FLOAT32: np.dtype("<f4"), BOOL: np.dtype("?"), UINT64: np.dtype("<u8"),
    INT64: np.dtype("<i8"), FLOAT64: np.dtype("<f8"),
}


@dataclasses.dataclass
class KeyValue:
    """One metadata key-value: ``type_name`` is the GGUF type ("UINT32", "STRING",
    "ARRAY[FLOAT32]", "ARRAY[ARRAY]"); ``value`` a Python scalar (int, float, bool), str (bytes
    when not valid UTF-8), a 1-d NumPy array for arrays of numbers or bools, a list for arrays
    of strings or of arrays."""

    key: str
    type_name: str
    value: Any


@dataclasses.dataclass
class TensorInfo:
    """One tensor's header entry. ``ne`` is GGUF's dimension order (ne[0] varies fastest, so
    NumPy's shape is ``ne`` reversed); ``offset`` is absolute in the file."""

    name: str
    ggml_type: int
    ne: Tuple[int, ...]
    offset: int
    nbytes: int


@dataclasses.dataclass
class Header:
    """A parsed and validated GGUF header."""

    version: int
    alignment: int
    data_offset: int
    file_size: int
    kvs: List[KeyValue]
    tensors: List[TensorInfo]


class _Cursor:
    """Bounds-checked little-endian reads over a buffer; every failure names the file."""

    def __init__(self, buf: memoryview, path: str):
        self.buf = buf
        self.size = len(buf)
        self.pos = 0
        self.path = path
        self.what = "header"

    def fail(self, msg: str) -> CorruptionError:
        return CorruptionError(f"{self.path}: GGUF {self.what}: {msg}",
                               file=self.path)

    def left(self) -> int:
        return self.size - self.pos

    def need(self, n: int) -> None:
        if n < 0 or n > self.left():
            raise self.fail(f"needs {n} bytes at offset {self.pos}, the file has "
                            f"{self.left()} left (truncated?)")

    def unpack(self, fmt: str) -> Tuple[Any, ...]:
        n = struct.calcsize(fmt)
        self.need(n)
        out = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += n
        return out

    def u32(self) -> int:
        return self.unpack("<I")[0]

    def u64(self) -> int:
        return self.unpack("<Q")[0]

    def raw_string(self) -> bytes:
        n = self.u64()
        self.need(n)
        out = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return out

    def string(self) -> Any:
        """A GGUF string as str, or bytes when it is not valid UTF-8 (token pieces may not be)."""
        b = self.raw_string()
        try:
            return b.decode("utf-8")
        except UnicodeDecodeError:
            return b

    def name(self) -> str:
        """A key or tensor name: must be UTF-8 (they become jtree key paths)."""
        b = self.raw_string()
        try:
            return b.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"name {b[:64]!r} at offset {self.pos - len(b)} is not UTF-8") \
                from None

    def array(self, n: int, dtype: np.dtype) -> np.ndarray:
        nbytes = n * dtype.itemsize
        self.need(nbytes)
        out = np.frombuffer(self.buf, dtype=dtype, count=n, offset=self.pos).copy()
        self.pos += nbytes
        return out.astype(dtype.newbyteorder("="), copy=False)


def _value(c: _Cursor, vtype: int, depth: int) -> Tuple[str, Any]:
    """Reads one value of GGUF type ``vtype``; returns (type name, value)."""
    if vtype in SCALAR_DTYPES:
        raw = c.array(1, SCALAR_DTYPES[vtype])
        if vtype == BOOL and raw.view(np.uint8)[0] > 1:
            raise c.fail(f"a bool holds the byte {raw.view(np.uint8)[0]}")
        return VALUE_TYPE_NAMES[vtype], raw[0].item()
    if vtype == STRING:
        return "STRING", c.string()
    if vtype != ARRAY:
        raise c.fail(f"unknown value type {vtype}")
    if depth >= MAX_NESTING:
        raise c.fail(f"arrays nested deeper than {MAX_NESTING}")
    etype = c.u32()
    n = c.u64()
    if etype in SCALAR_DTYPES:
        arr = c.array(n, SCALAR_DTYPES[etype])
        if etype == BOOL and arr.view(np.uint8).max(initial=0) > 1:
            raise c.fail("a bool array holds a byte other than 0 or 1")
        return f"ARRAY[{VALUE_TYPE_NAMES[etype]}]", arr
    if etype not in (STRING, ARRAY):
        raise c.fail(f"unknown array element type {etype}")
    # A string takes 8 bytes at least, an array 12: a count the file cannot hold is refused
    # before looping over it.
    least = 8 if etype == STRING else 12
    if n > c.left() // least:
        raise c.fail(f"array of {n} elements at offset {c.pos} cannot fit in the "
                     f"{c.left()} bytes left")
    if etype == STRING:
        return "ARRAY[STRING]", [c.string() for _ in range(n)]
    return "ARRAY[ARRAY]", [_value(c, ARRAY, depth + 1)[1] for _ in range(n)]


@functools.lru_cache(maxsize=None)
def _ggml_sizes() -> Dict[int, Tuple[str, int, int]]:
    """GGML type id -> (name, block size in elements, block size in bytes), from the gguf
    package (so new quantization types are known as soon as it knows them)."""
    try:
        from gguf.constants import GGML_QUANT_SIZES
    except ImportError as e:  # pragma: no cover - the reader imports gguf first
        raise NotSupportedError(f"reading GGUF needs the gguf package: {e}")
    return {int(t): (t.name, bs, ts) for t, (bs, ts) in GGML_QUANT_SIZES.items()}


def parse(buf: Any, path: str, default_alignment: int = DEFAULT_ALIGNMENT) -> Header:
    """Parses and validates the GGUF header in ``buf`` (the whole file: bytes, mmap or NumPy
    memmap). Raises CorruptionError (damaged or hostile bytes) or NotSupportedError (GGUF v1,
    big-endian files, unknown tensor types), each naming ``path``. ``default_alignment`` is
    the alignment of a file without general.alignment (GGUF's 32; a split set's shards may
    follow their first shard's, see _gguf_split.aligned_like)."""
    base = memoryview(buf)
    view = base.cast("B")
    try:
        return _parse(_Cursor(view, path), path, default_alignment)
    finally:
        # Released even when an error's traceback keeps the cursor alive: the caller's map
        # can then be closed.
        view.release()
        base.release()


def _parse(c: _Cursor, path: str, default_alignment: int) -> Header:
    if c.size < 4 or bytes(c.buf[:4]) != MAGIC:
        raise c.fail("not a GGUF file (no 'GGUF' magic)")
    c.pos = 4
    version = c.u32()
    if version & 0xFFFF == 0 and version != 0:
        raise NotSupportedError(f"{path}: big-endian GGUF files are not "
                                f"supported", file=path)
    if version not in (2, 3):
        raise NotSupportedError(f"{path}: GGUF version {version} is not "
                                f"supported (2 and 3 are)", file=path)
    n_tensors, n_kv = c.unpack("<QQ")
    # Smallest entries: a key-value is 8 (key length) + 4 (type) + 1 (a uint8/bool) bytes; a
    # tensor info 8 + 4 + 4 + 8. Counts beyond what the file can hold are refused up front.
    if n_kv > c.left() // 13:
        raise c.fail(f"{n_kv} key-values cannot fit in a file of {c.size} bytes")
    if n_tensors > c.left() // 24:
        raise c.fail(f"{n_tensors} tensors cannot fit in a file of {c.size} bytes")

    kvs: List[KeyValue] = []
    seen: Dict[str, int] = {}
    for i in range(n_kv):
        c.what = f"key-value {i}"
        key = c.name()
        c.what = f"key-value {key!r}"
        if key in seen:
            raise c.fail("duplicate key")
        seen[key] = i
        type_name, value = _value(c, c.u32(), 0)
        kvs.append(KeyValue(key, type_name, value))

    alignment = default_alignment
    if "general.alignment" in seen:
        kv = kvs[seen["general.alignment"]]
        c.what = "key-value 'general.alignment'"
        if kv.type_name != "UINT32":
            raise c.fail(f"has type {kv.type_name}, not UINT32")
        alignment = kv.value
        if alignment <= 0 or alignment & (alignment - 1):
            raise c.fail(f"{alignment} is not a power of two")

    sizes = _ggml_sizes()
    infos: List[Tuple[str, int, Tuple[int, ...], int]] = []
    names = set()
    for i in range(n_tensors):
        c.what = f"tensor info {i}"
        name = c.name()
        c.what = f"tensor {name!r}"
        if name in names:
            raise c.fail("duplicate tensor name")
        names.add(name)
        n_dims = c.u32()
        if n_dims > MAX_DIMS:
            raise c.fail(f"{n_dims} dimensions (GGML allows {MAX_DIMS})")
        ne = c.unpack(f"<{n_dims}Q")
        ggml_type, rel = c.unpack("<IQ")
        infos.append((name, ggml_type, ne, rel))

    # The data section starts at the next multiple of the alignment.
    data_offset = -(-c.pos // alignment) * alignment
    if data_offset > c.size:
        c.what = "header"
        raise c.fail(f"the data section would start at {data_offset}, past the end of the "
                     f"file ({c.size} bytes)")

    tensors: List[TensorInfo] = []
    for name, ggml_type, ne, rel in infos:
        c.what = f"tensor {name!r}"
        if ggml_type not in sizes:
            raise NotSupportedError(f"{path}: GGUF tensor {name!r} has GGML type "
                                    f"{ggml_type}, unknown to the installed gguf package",
                                    file=path, key_path=name)
        tname, block, type_size = sizes[ggml_type]
        n_elem = 1
        for d in ne:
            # ggml's ne are int64: a dimension of 2**63 or more is negative there (and past
            # what NumPy can represent, even in an empty array).
            if d >= 2 ** 63:
                raise c.fail(f"dimension {d} is not below 2**63")
            n_elem *= d  # Python ints: no overflow; bounded against the file size below
        extent = 1
        for d in ne:
            extent *= max(d, 1)
        if extent * type_size >= 2 ** 63:
            # Like llama.cpp's overflow check; also what NumPy needs to make even an empty
            # array of this shape.
            raise c.fail(f"dimensions {list(ne)} overflow 64 bits")
        if ne and ne[0] % block:
            raise c.fail(f"first dimension {ne[0]} is not a multiple of {tname}'s block size "
                         f"{block}")
        if not ne and block != 1:
            raise c.fail(f"a 0-d tensor cannot be of block type {tname}")
        nbytes = n_elem // block * type_size
        if rel % alignment:
            raise c.fail(f"data offset {rel} is not a multiple of the alignment {alignment}")
        if data_offset + rel + nbytes > c.size:
            raise c.fail(f"data [{data_offset + rel}, {data_offset + rel + nbytes}) lies past "
                         f"the end of the file ({c.size} bytes)")
        tensors.append(TensorInfo(name, ggml_type, tuple(ne), data_offset + rel, nbytes))

    # No two tensors share bytes (a hidden alias would be saved twice or mislead a reader).
    spans = sorted((t.offset, t.offset + t.nbytes, t.name) for t in tensors if t.nbytes)
    for (_, end, a), (start, _, b) in zip(spans, spans[1:]):
        if start < end:
            c.what = f"tensor {b!r}"
            raise c.fail(f"data overlaps tensor {a!r}")
    return Header(version, alignment, data_offset, c.size, kvs, tensors)


def ggml_type_name(ggml_type: int) -> str:
    """The name of a GGML type id ("F32", "Q4_0", ...)."""
    return _ggml_sizes()[ggml_type][0]


def ggml_type_id(name: str) -> Optional[int]:
    """The id of a GGML type name, or None if the gguf package does not know it."""
    for tid, (tname, _, _) in _ggml_sizes().items():
        if tname == name:
            return tid
    return None


def block_sizes(ggml_type: int) -> Tuple[int, int]:
    """(elements per block, bytes per block) of a GGML type id."""
    _, block, type_size = _ggml_sizes()[ggml_type]
    return block, type_size
