"""jtree -> GGUF, for `jtree convert model.jtree model.gguf` (the way back of _from_gguf).

The .jtree file must have the layout _from_gguf writes ("tensors", "tensor_types", "metadata",
"metadata_types"). The GGUF is written with the gguf package's own ``GGUFWriter``, so a file that
GGUFWriter wrote comes back byte for byte: key-values in their order with their GGUF types,
tensors in their order with their GGML types, shapes and bytes, the alignment of
"general.alignment". What GGUFWriter cannot express, this writer adds in a subclass: empty
arrays and arrays of arrays (GGUFWriter refuses them); NumPy arrays are packed with their exact
bytes. Differences from the source file that are GGUFWriter's: the version is always 3, and
tensor data is laid out in info order, each aligned, with no gaps (a file written otherwise gets
the same key-values, tensor infos and tensor bytes, at GGUFWriter's offsets).

Memory: one tensor at a time (GGUFWriter's streaming calls: infos first, then
``write_tensor_data`` per tensor, each read from the .jtree file as a view of its map or a
decoded array). The GGUF is written to a temporary file next to ``dst`` and renamed into place
when complete: a failure leaves no partial file and keeps an existing ``dst``.
"""
from __future__ import annotations

import os
import uuid
from typing import Any, Callable, Dict, Optional

import numpy as np

from .. import _dtypes
from .._errors import InvalidArgumentError, NotSupportedError
from . import _gguf_parse

FORMAT = "gguf"

_LAYOUT = ("tensors", "tensor_types", "metadata", "metadata_types")
# GGML types that _from_gguf stores as arrays of their dtype (the rest are raw uint8 blocks).
_ARRAY_TYPE_NAMES = ("F32", "F16", "F64", "BF16", "I8", "I16", "I32", "I64")


def _gguf() -> Any:
    try:
        import gguf
    except ImportError as e:
        raise NotSupportedError(f"writing GGUF needs the gguf package "
                                f"(pip install gguf): {e}") from e
    return gguf


def _type_of(type_name: str, src: str, key: str) -> tuple:
    """'ARRAY[FLOAT32]' -> (ARRAY, FLOAT32); 'UINT32' -> (UINT32, None)."""
    V = _gguf().GGUFValueType
    name, sub = type_name, None
    if type_name.startswith("ARRAY[") and type_name.endswith("]"):
        name, sub = "ARRAY", type_name[6:-1]
    try:
        return V[name], (V[sub] if sub is not None else None)
    except KeyError:
        raise InvalidArgumentError(f"{src}: metadata_types/{key} is "
                                   f"{type_name!r}, not a GGUF value type",
                                   file=src, key_path=f"metadata_types/{key}") from None


def _writer_class() -> type:
    """GGUFWriter with the array values it refuses (empty arrays, arrays of arrays) and exact
    packing of NumPy arrays; everything GGUFWriter itself packs goes through it unchanged."""
    gguf = _gguf()
    V = gguf.GGUFValueType

    class Writer(gguf.GGUFWriter):
        def _pack_val(self, val: Any, vtype: Any, add_vtype: bool,
                      sub_type: Optional[Any] = None) -> bytes:
            if vtype != V.ARRAY or not (isinstance(val, np.ndarray) or len(val) == 0
                                        or sub_type == V.ARRAY):
                return super()._pack_val(val, vtype, add_vtype, sub_type=sub_type)
            out = bytearray(self._pack("I", vtype) if add_vtype else b"")
            if sub_type is None:
                sub_type = _element_type(val)
            out += self._pack("I", sub_type)
            out += self._pack("Q", len(val))
            if isinstance(val, np.ndarray):
                # The bytes struct would pack one by one, at once (and NaN payloads kept).
                dt = _gguf_parse.SCALAR_DTYPES[int(sub_type)]
                out += np.ascontiguousarray(val, dtype=dt).tobytes()
            elif sub_type == V.ARRAY:
                for item in val:
                    out += self._pack_val(item, V.ARRAY, add_vtype=False,
                                          sub_type=_element_type(item))
            else:
                for item in val:
                    out += self._pack_val(item, sub_type, add_vtype=False)
            return bytes(out)

    def _element_type(val: Any) -> Any:
        """The element type of an inner array of an array of arrays (no type recorded for it):
        a NumPy array's dtype, else strings, else arrays; an empty list is taken as strings."""
        if isinstance(val, np.ndarray):
            for vt, dt in _gguf_parse.SCALAR_DTYPES.items():
                if dt == val.dtype.newbyteorder("<"):
                    return V(vt)
            raise NotSupportedError(f"a GGUF array cannot hold {val.dtype}")
        if val and isinstance(val[0], (list, tuple, np.ndarray)):
            return V.ARRAY
        return V.STRING

    return Writer


def _value(v: Any, vtype: Any, V: Any) -> Any:
    """A value as GGUFWriter wants it: Python scalars, str/bytes, lists or NumPy arrays."""
    if isinstance(v, np.ndarray) and vtype != V.ARRAY:
        v = v.item()
    if vtype == V.ARRAY and isinstance(v, tuple):
        v = list(v)
    return v


def _read_layout(f: Any, src: str) -> Dict[str, Any]:
    for k in _LAYOUT:
        if k not in f:
            raise InvalidArgumentError(
                f"{src} has no {k!r} entry: only trees converted from GGUF "
                f"({', '.join(_LAYOUT)}) can be written as GGUF", file=src)
    return {k: f[k] for k in _LAYOUT}


def write(file: Any, dst: str, *, progress: Optional[Callable[[int], None]] = None) -> None:
    """Writes the GGUF-layout jtree ``file`` (a jtree.File) as the GGUF file ``dst``, one
    tensor in memory at a time, through a temporary file renamed into place when complete.
    ``progress(n)`` is called with the bytes of each tensor once written."""
    gguf = _gguf()
    V = gguf.GGUFValueType
    src = str(getattr(file, "name", "") or "the .jtree file")
    parts = _read_layout(file, src)
    meta = parts["metadata"].load()
    mtypes = parts["metadata_types"].load()
    ttypes = parts["tensor_types"].load()
    tensors = parts["tensors"]
    if list(meta) != list(mtypes):
        raise InvalidArgumentError(f"{src}: 'metadata' and 'metadata_types' "
                                   f"name different keys", file=src)
    names = list(tensors.keys())
    if names != list(ttypes):
        raise InvalidArgumentError(f"{src}: 'tensors' and 'tensor_types' name "
                                   f"different tensors", file=src)

    d = os.path.dirname(os.path.abspath(dst)) or "."
    # A fresh name GGUFWriter creates itself (open "wb": the usual permissions, not mkstemp's
    # 0600), renamed over dst only when complete.
    tmp = os.path.join(d, f".{os.path.basename(dst)}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        w = _writer_class()(tmp, arch="")  # arch="" adds no key: every key comes from the file
        for key, value in meta.items():
            vtype, sub = _type_of(mtypes[key], src, key)
            v = _value(value, vtype, V)
            try:
                # Packed once here so that a value its type cannot hold (300 as UINT8, a str
                # as FLOAT32) is reported with its key, not later by struct with none.
                w._pack_val(v, vtype, add_vtype=True, sub_type=sub)
            except Exception as e:  # noqa: BLE001 - struct/ValueError/TypeError of a bad value
                raise InvalidArgumentError(
                    f"{src}: metadata/{key} cannot be written as GGUF {mtypes[key]} "
                    f"({type(e).__name__}: {e})", file=src, key_path=f"metadata/{key}") from e
            w.add_key_value(key, v, vtype, sub_type=sub)
            if key == "general.alignment":
                if vtype != V.UINT32 or not isinstance(v, int) or v <= 0 or v & (v - 1):
                    raise InvalidArgumentError(f"{src}: metadata/general.alignment must be a "
                                               f"UINT32 power of two", file=src,
                                               key_path="metadata/general.alignment")
                w.data_alignment = v
        for name in names:
            leaf = tensors[name]
            if not hasattr(leaf, "shape"):
                raise InvalidArgumentError(f"{src}: tensors/{name} is not an array",
                                           file=src, key_path=f"tensors/{name}")
            tid = _gguf_parse.ggml_type_id(str(ttypes[name]))
            if tid is None:
                raise NotSupportedError(f"{src}: tensor_types/{name} is "
                                        f"{ttypes[name]!r}, unknown to the gguf package",
                                        file=src, key_path=f"tensors/{name}")
            qtype = gguf.GGMLQuantizationType(tid)
            shape = tuple(leaf.shape)
            dtype = np.dtype(leaf.dtype)
            _, type_size = _gguf_parse.block_sizes(tid)
            if qtype.name not in _ARRAY_TYPE_NAMES:
                # Raw blocks: the last dimension is a row's bytes; GGUFWriter turns it back
                # into elements (quant_shape_from_byte_shape).
                if dtype != np.uint8 or not shape or shape[-1] % type_size:
                    raise InvalidArgumentError(
                        f"{src}: tensors/{name} ({qtype.name}) is {dtype} of "
                        f"shape {shape}: it must be uint8 rows of whole {type_size}-byte "
                        f"blocks", file=src, key_path=f"tensors/{name}")
            elif dtype.itemsize != type_size or dtype.kind not in "fiuV":
                raise InvalidArgumentError(
                    f"{src}: tensors/{name} is {dtype} but tensor_types says "
                    f"{qtype.name}", file=src, key_path=f"tensors/{name}")
            nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
            w.add_tensor_info(name, shape, dtype, nbytes, raw_dtype=qtype)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        for name in names:
            arr = np.ascontiguousarray(np.asarray(tensors[name]))
            w.write_tensor_data(_dtypes.numpy_bytes(arr))
            n = arr.nbytes
            del arr  # one tensor in memory at a time
            if progress:
                progress(n)
        w.flush()
        for fout in w.fout or []:
            os.fsync(fout.fileno())
        w.close()
        os.replace(tmp, dst)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _same(a: Any, b: Any) -> bool:
    """Equal bit for bit: arrays by dtype, shape and bytes; floats by their bits (NaN too)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return (a.dtype == b.dtype and a.shape == b.shape
                and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes())
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return np.float64(a).tobytes() == np.float64(b).tobytes()
    return type(a) is type(b) and a == b


def verify(file: Any, dst: str) -> None:
    """Re-reads the GGUF ``dst`` (_from_gguf) and compares it with the .jtree ``file``: every
    key-value with its GGUF type, every tensor's name, GGML type, shape and bytes, in order.
    CorruptionError naming the first difference."""
    from .._errors import CorruptionError
    from . import _from_gguf

    def differs(what: str) -> CorruptionError:
        return CorruptionError(f"{dst}: verify: {what} differs from the source",
                               file=dst, key_path=what)

    # The file alone, as written: a tree holding a shard's split.* key-values (a shard
    # converted with an older jtree) writes a GGUF that open_source would read as its set.
    source = _from_gguf.open_file(dst)
    try:
        got = source.tree
        for k in ("metadata_types", "tensor_types", "metadata"):
            want = file[k].load()
            if list(want) != list(got[k]):
                raise differs(f"the keys of {k}")
            for key, v in want.items():
                if not _same(v, got[k][key]):
                    raise differs(f"{k}/{key}")
        if list(file["tensors"].keys()) != list(got["tensors"]):
            raise differs("the tensor names")
        for name, leaf in got["tensors"].items():
            mine = np.asarray(file["tensors"][name])
            theirs = leaf.fetch() if hasattr(leaf, "fetch") else leaf
            if not _same(mine, np.asarray(theirs)):
                raise differs(f"tensors/{name}")
            del mine, theirs
    finally:
        source.close()
