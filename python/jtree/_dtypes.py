"""Dtypes: jtree's table (from the C++ library) and NumPy, ml_dtypes and PyTorch types.

In memory every dtype is held as NumPy/ml_dtypes hold it (4-bit types one element per byte,
the value in the low nibble and the high nibble zero, int4 too), so arrays are handed to the library as their raw bytes. Types that
DLPack or the buffer protocol cannot describe (ml_dtypes types, big-endian arrays) are handed
over as an unsigned-integer view of the same memory plus the jtree dtype code.
"""
from __future__ import annotations

import sys
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from . import _jtree
from ._errors import InvalidArgumentError, NotSupportedError, error

# name -> (code, item_size, stored_bits), from the library.
TABLE: Dict[str, Tuple[int, int, int]] = {
    name: (code, item, bits) for code, name, item, bits in _jtree.dtypes()
}
NAME_OF: Dict[int, str] = {code: name for name, (code, _, _) in TABLE.items()}

# Types NumPy has natively; the others come from ml_dtypes.
NUMPY_NATIVE = frozenset(
    ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
     "float16", "float32", "float64", "complex64", "complex128"])
ML_DTYPES = frozenset(n for n in TABLE if n not in NUMPY_NATIVE)
# Floating-point types (the ones `cast=<dtype>` converts).
FLOATING = frozenset(
    ["float16", "bfloat16", "float32", "float64", "float8_e4m3fn", "float8_e4m3fnuz",
     "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn",
     # format version 2
     "float8_e4m3b11fnuz", "float8_e3m4", "float8_e4m3", "float6_e2m3fn", "float6_e3m2fn"])

_UINT_OF_SIZE = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32),
                 8: np.dtype(np.uint64)}

_ml_dtypes: Any = None
_ml_dtypes_checked = False


def ml_dtypes() -> Any:
    """The ml_dtypes module, or None when it is not installed."""
    global _ml_dtypes, _ml_dtypes_checked
    if not _ml_dtypes_checked:
        try:
            import ml_dtypes as m  # noqa: PLC0415  (optional dependency)
        except ImportError:
            m = None
        _ml_dtypes, _ml_dtypes_checked = m, True
    return _ml_dtypes


# name -> NumPy dtype, filled by numpy_dtype_or_none (loads look one up per leaf).
_NUMPY_OF: Dict[str, np.dtype] = {}


def numpy_dtype_or_none(name: str) -> Optional[np.dtype]:
    """The NumPy dtype of a jtree dtype name, or None where there is none: the one rule of
    which dtypes NumPy holds (its own, and ml_dtypes' types where ml_dtypes is installed and
    has the type; imported on the first such name, never by a structure read)."""
    dt = _NUMPY_OF.get(name)
    if dt is not None:
        return dt
    if name in NUMPY_NATIVE:
        dt = np.dtype(name)
    elif name not in ML_DTYPES:
        return None  # (no dtype jtree has: nothing imported)
    else:
        m = ml_dtypes()
        if m is None or not hasattr(m, name):
            return None
        dt = np.dtype(getattr(m, name))
    _NUMPY_OF[name] = dt
    return dt


def numpy_dtype(name: str, file: Optional[str] = None, key_path: Any = None) -> np.dtype:
    """The NumPy dtype of a jtree dtype name; NotSupportedError where NumPy has none (an
    ml_dtypes type without ml_dtypes installed). ``key_path`` (for the error) is a string or a
    tuple of keys (joined only on error)."""
    dt = numpy_dtype_or_none(name)
    if dt is not None:
        return dt
    if isinstance(key_path, tuple):
        from . import _keypath  # noqa: PLC0415

        key_path = _keypath.join(key_path)
    raise error(NotSupportedError, file, key_path,
                f"dtype {name} needs the ml_dtypes package, which is not installed "
                f"(pip install ml_dtypes); or load with cast= to a NumPy dtype, or as "
                f"torch tensors (framework='torch')")


def numpy_dtype_of_code(code: int) -> Optional[np.dtype]:
    """:func:`numpy_dtype_or_none` of a native dtype code (None for a code naming no dtype):
    what the native plain pass asks per dtype of a NumPy load."""
    return numpy_dtype_or_none(NAME_OF.get(code, ""))


def numpy_dtype_if_made(name: str) -> Optional[np.dtype]:
    """The NumPy dtype of ``name`` where getting it imports nothing (NumPy's own types, and
    ml_dtypes' once made); else None. A structure read asks this, so it never imports
    ml_dtypes (about 0.6 s)."""
    dt = _NUMPY_OF.get(name)
    if dt is None and name in NUMPY_NATIVE:
        dt = numpy_dtype_or_none(name)
    return dt


def spec_dtype(name: str) -> Any:
    """A LeafSpec's dtype: the NumPy dtype of ``name``, or the name itself where NumPy has
    none (a structure describes every leaf; only loading one needs its type)."""
    dt = numpy_dtype_or_none(name)
    return name if dt is None else dt


def stored_numpy_dtype(name: str, file: Optional[str] = None,
                       key_path: Any = None) -> np.dtype:
    """The NumPy dtype a host load reads a stored ``name`` leaf into: :func:`numpy_dtype`, but
    bfloat16 without ml_dtypes as its uint16 bit patterns (:func:`numpy_cast` converts them to
    float32 or float64)."""
    if name == "bfloat16" and numpy_dtype_or_none(name) is None:
        return np.dtype(np.uint16)
    return numpy_dtype(name, file, key_path)


def numpy_cast(a: np.ndarray, stored: str, want: str, file: Optional[str] = None,
               key_path: Any = None) -> np.ndarray:
    """``a``, read as :func:`stored_numpy_dtype` of ``stored``, as a NumPy array of dtype
    ``want`` (``a`` itself when they are the same); the clear error where NumPy has no
    ``want`` (or, without ml_dtypes, a bfloat16 leaf is wanted as other than float32/64)."""
    if stored == want:
        return a
    if stored == "bfloat16" and numpy_dtype_or_none(stored) is None:
        if want not in ("float32", "float64"):
            numpy_dtype(stored, file, key_path)  # raises the clear error
        f32 = (a.astype(np.uint32) << 16).view(np.float32)
        return f32 if want == "float32" else f32.astype(np.float64)
    return a.astype(numpy_dtype(want, file, key_path))


# NumPy dtype -> jtree name and NumPy dtype -> (byteswap, native-order dtype or None,
# unsigned view dtype or None), filled on first use: a save asks once per leaf, and NumPy
# computes `dtype.name` in Python (three calls cost more than the rest of a small leaf's
# save). Only dtypes jtree has are kept, so the tables stay as small as the dtype table.
_NAME_OF_NUMPY: Dict[np.dtype, str] = {}
_HOST_VIEW_OF: Dict[np.dtype, Tuple[bool, Optional[np.dtype], Optional[np.dtype]]] = {}


def name_of_numpy(dt: np.dtype) -> Optional[str]:
    """The jtree dtype name of a NumPy dtype (either byte order), or None if jtree has none."""
    name = _NAME_OF_NUMPY.get(dt)
    if name is not None:
        return name
    name = _name_of_numpy_uncached(dt)
    if name is not None:
        _NAME_OF_NUMPY[dt] = name
    return name


def _name_of_numpy_uncached(dt: np.dtype) -> Optional[str]:
    if dt.fields is not None or dt.subdtype is not None:
        return None
    # ml_dtypes types are registered with NumPy under their own names (some with kind 'f').
    if getattr(dt.type, "__module__", "").startswith("ml_dtypes"):
        return dt.name if dt.name in ML_DTYPES else None
    if dt.kind in "biufc" and dt.name in NUMPY_NATIVE:
        return dt.name
    return None


def dtype_name(d: Any, file: Optional[str] = None, key_path: Optional[str] = None) -> str:
    """The jtree name of a dtype given as a NumPy/ml_dtypes dtype, a torch dtype or a name;
    InvalidArgumentError naming ``file`` and ``key_path`` where jtree has none."""
    if isinstance(d, str) and d in TABLE:
        return d
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(d, torch.dtype):
        name = name_of_torch(d)
    else:
        try:
            name = name_of_numpy(np.dtype(d))
        except TypeError:
            name = None
    if name is None:
        raise error(InvalidArgumentError, file, key_path, f"{d!r} is not a dtype jtree has")
    return name


def code_of_name(name: str) -> int:
    """The native dtype code of a jtree dtype name (KeyError for a name jtree has not)."""
    return TABLE[name][0]


def host_view(arr: np.ndarray) -> Tuple[np.ndarray, bool]:
    """(a view the native module accepts, byteswap): same memory, same strides.

    ml_dtypes arrays become unsigned-integer views; big-endian arrays a native-order view
    whose bytes the library swaps while it reads them.
    """
    dt = arr.dtype
    plan = _HOST_VIEW_OF.get(dt)
    if plan is None:
        plan = _host_view_plan(dt)
        if name_of_numpy(dt) is not None:
            _HOST_VIEW_OF[dt] = plan
    byteswap, native, uint_view = plan
    if native is not None:
        arr = arr.view(native)
    if uint_view is not None:
        arr = arr.view(uint_view)
    return arr, byteswap


def _host_view_plan(dt: np.dtype) -> Tuple[bool, Optional[np.dtype], Optional[np.dtype]]:
    byteswap = dt.byteorder == (">" if sys.byteorder == "little" else "<")
    native = dt.newbyteorder("=") if byteswap else None
    if (native or dt).name in NUMPY_NATIVE:
        return byteswap, native, None
    return byteswap, native, _UINT_OF_SIZE[dt.itemsize]


def is_floating(name: str) -> bool:
    """Whether the jtree dtype name is a floating-point type (what ``cast=`` converts)."""
    return name in FLOATING


# ---- JAX ------------------------------------------------------------------------------------

# Dtypes JAX imports through DLPack (jax/_src/dlpack.py's SUPPORTED_DTYPES), and the 1-byte
# dtypes read as uint8 and bitcast on the device (JAX's DLPack import takes no float8).
JAX_DLPACK = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                        "uint64", "float16", "bfloat16", "float32", "float64", "complex64",
                        "complex128"})
JAX_BITCAST = frozenset({"float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
                         "float8_e4m3b11fnuz", "float8_e3m4", "float8_e4m3", "float8_e8m0fnu"})


def jax_numpy_dtype_of_code(code: int) -> Optional[np.dtype]:
    """The NumPy dtype a host JAX load reads a native dtype code's leaf into where DLPack
    carries it into JAX (:data:`JAX_DLPACK`); None for the others (float8, int4...), which
    ``jax.device_put`` places: what the native plain pass asks per dtype of a JAX load."""
    name = NAME_OF.get(code, "")
    return numpy_dtype_or_none(name) if name in JAX_DLPACK else None


def jax_device_put(x: Any, device: Any = None, file: Optional[str] = None,
                   key_path: Optional[str] = None) -> Any:
    """jax.device_put, with a jtree error for a dtype the JAX backend cannot hold (XLA's CPU
    client has no float6 types, say) instead of XLA's own exception."""
    import jax  # noqa: PLC0415

    try:
        return jax.device_put(x) if device is None else jax.device_put(x, device)
    except Exception as e:  # XLA's error types vary with the jaxlib version
        name = getattr(getattr(x, "dtype", None), "name", "")
        if name in ML_DTYPES and name in str(e):
            raise error(NotSupportedError, file, key_path,
                        f"JAX cannot hold {name} arrays on this backend ({e}); load it as "
                        f"NumPy (ml_dtypes) or pass cast= to a type JAX has") from e
        raise


# ---- PyTorch --------------------------------------------------------------------------------

# jtree dtypes torch cannot hold one element per byte (its float4 is packed, int4 experimental)
# or has not at all (format version 2's float8 and float6 types): loaded through NumPy
# (ml_dtypes), so cast= to a torch type works.
TORCH_MISSING = frozenset(["float4_e2m1fn", "int4", "uint4", "float8_e4m3b11fnuz", "float8_e3m4",
                           "float8_e4m3", "float6_e2m3fn", "float6_e3m2fn"])


# Stored dtypes NumPy has and torch.from_numpy takes (uint16/32/64 only since torch 2.3): a
# leaf of one of them becomes a tensor in one call (viewing the bytes in torch costs three,
# about 2 us more per leaf).
TORCH_FROM_NUMPY = frozenset(["bool", "int8", "int16", "int32", "int64", "uint8", "float16",
                              "float32", "float64", "complex64", "complex128"])

# name -> torch dtype or None, filled by torch_dtype_or_none (loads ask per leaf).
_TORCH_OF: Dict[str, Any] = {}


def torch_dtype_or_none(name: str) -> Any:
    """torch's dtype for jtree dtype ``name``, or None where torch has none (TORCH_MISSING,
    or a torch too old for it)."""
    if name in _TORCH_OF:
        return _TORCH_OF[name]
    import torch  # noqa: PLC0415

    t = getattr(torch, name, None) if name not in TORCH_MISSING else None
    t = _TORCH_OF[name] = t if isinstance(t, torch.dtype) else None
    return t


def torch_holder(name: str) -> np.dtype:
    """The NumPy dtype a torch tensor of jtree dtype ``name`` is read into before
    :func:`torch_view` sees it as the torch dtype: the type itself where torch.from_numpy
    takes it, else the unsigned integer of its item size (bfloat16 and float8 then need no
    ml_dtypes, whose import costs a fresh process's first load milliseconds)."""
    return np.dtype(name) if name in TORCH_FROM_NUMPY else _UINT_OF_SIZE[TABLE[name][1]]


def torch_holder_of_code(code: int) -> Optional[np.dtype]:
    """:func:`torch_holder` of a native dtype code where torch has the dtype; None where it
    has none (loaded through NumPy, or the clear error, by the general loader): what the
    native plain pass asks per dtype of a torch load."""
    name = NAME_OF.get(code, "")
    return torch_holder(name) if torch_dtype_or_none(name) is not None else None


def torch_view(a: np.ndarray, t: Any, shape: Optional[Tuple[int, ...]] = None) -> Any:
    """A tensor of torch dtype ``t`` and ``shape`` over the memory of the C-contiguous NumPy
    array ``a``, without a copy: ``a`` holds the elements (of :func:`torch_holder`'s dtype;
    ``shape`` then defaults to its own) or their bytes (flat uint8)."""
    if shape is not None:
        twin = _numpy_twin_of_torch().get(t)
        holder = twin if twin is not None else _UINT_OF_SIZE[torch_itemsize(t)]
        if a.dtype != holder or a.shape != shape:  # (the bytes: seen as the elements)
            a = a.view(holder).reshape(shape)
    return torch_viewer(t)(a)


# torch dtype -> its torch_viewer, filled on first use.
_VIEWER_OF: Dict[Any, Callable[[np.ndarray], Any]] = {}


def torch_viewer(t: Any) -> Callable[[np.ndarray], Any]:
    """The function making a tensor of torch dtype ``t`` over a C-contiguous NumPy array of
    torch_holder's dtype for ``t`` (same shape, no copy): torch.from_numpy itself where it
    makes ``t``; else one seeing the array's bytes as ``t``, and an empty array as a new empty
    tensor (torch views no empty bytes). Looked up once per dtype by a load making a tensor
    per leaf."""
    view = _VIEWER_OF.get(t)
    if view is None:
        view = _VIEWER_OF[t] = _new_torch_viewer(t)
    return view


def _new_torch_viewer(t: Any) -> Callable[[np.ndarray], Any]:
    import torch  # noqa: PLC0415

    from_numpy, empty, uint8 = torch.from_numpy, torch.empty, np.uint8
    if t in _numpy_twin_of_torch():
        return from_numpy

    def from_bytes(a: np.ndarray) -> Any:
        if not a.size:
            return empty(a.shape, dtype=t)
        return from_numpy(a.reshape(-1).view(uint8)).view(t).reshape(a.shape)

    return from_bytes


# torch dtype -> the NumPy dtype torch.from_numpy makes it from (TORCH_FROM_NUMPY), filled by
# the first torch_view (it needs torch).
_TWIN: Dict[Any, np.dtype] = {}


def _numpy_twin_of_torch() -> Dict[Any, np.dtype]:
    if not _TWIN:
        import torch  # noqa: PLC0415

        _TWIN.update((getattr(torch, n), np.dtype(n)) for n in TORCH_FROM_NUMPY)
    return _TWIN


def torch_dtype(name: str, file: Optional[str] = None, key_path: Optional[str] = None) -> Any:
    """torch's dtype for jtree dtype ``name``; NotSupportedError naming ``file`` and
    ``key_path`` where torch has none."""
    t = torch_dtype_or_none(name)
    if t is None:
        raise error(NotSupportedError, file, key_path,
                    f"PyTorch has no dtype for {name}; load it as NumPy (ml_dtypes) or pass "
                    f"cast= to a type PyTorch has")
    return t


def torch_itemsize(t: Any) -> int:
    """The bytes of one element of torch dtype ``t`` (torch.dtype.itemsize, torch 2.1 and
    later; an empty tensor's element_size() before: a tensor made per leaf cost a load of many
    small leaves a few microseconds each)."""
    size = getattr(t, "itemsize", None)
    if size is None:
        import torch  # noqa: PLC0415

        size = torch.empty((), dtype=t).element_size()
    return size


def name_of_torch(t: Any) -> Optional[str]:
    """The jtree dtype name of a torch dtype, None where jtree or torch lacks it."""
    name = str(t).rsplit(".", 1)[-1]
    return name if name in TABLE and name not in TORCH_MISSING else None


def torch_raw_view(t: Any) -> Any:
    """A same-size integer view of a tensor (DLPack cannot describe every torch dtype)."""
    import torch  # noqa: PLC0415

    size = t.element_size()
    if t.dtype in (torch.bool, torch.complex128):
        return t
    raw = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[size]
    return t if t.dtype == raw else t.view(raw)


def torch_bytes(t: Any) -> Any:
    """A contiguous tensor's memory as a flat uint8 tensor (a view)."""
    import torch  # noqa: PLC0415

    flat = t.reshape(-1)
    if flat.dtype == torch.complex128:
        flat = torch.view_as_real(flat).reshape(-1)
    return flat.view(torch.uint8)


def numpy_bytes(a: np.ndarray) -> np.ndarray:
    """A C-contiguous array's memory as a flat uint8 array (a view)."""
    flat = a.reshape(-1)
    return flat.view(np.uint8)
