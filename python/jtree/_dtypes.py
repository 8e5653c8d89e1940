"""Dtypes: jtree's table (from the C++ library) and NumPy, ml_dtypes and PyTorch types.

In memory every dtype is held as NumPy/ml_dtypes hold it (4-bit types one element per byte,
the value in the low nibble and the high nibble zero, int4 too), so arrays are handed to the library as their raw bytes. Types that
DLPack or the buffer protocol cannot describe (ml_dtypes types, big-endian arrays) are handed
over as an unsigned-integer view of the same memory plus the jtree dtype code.
"""
from __future__ import annotations

import sys
from typing import Any, Dict, Optional, Tuple

import numpy as np

from . import _jtree
from ._errors import NotSupportedError, error

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


# name -> NumPy dtype, filled by numpy_dtype (loads look one up per leaf).
_NUMPY_OF: Dict[str, np.dtype] = {}


def numpy_dtype(name: str, file: Optional[str] = None, key_path: Any = None) -> np.dtype:
    """The NumPy dtype of a jtree dtype name; ml_dtypes types need ml_dtypes installed.
    ``key_path`` (for the error) is a string or a tuple of keys (joined only on error)."""
    dt = _NUMPY_OF.get(name)
    if dt is not None:
        return dt
    if name in NUMPY_NATIVE:
        dt = np.dtype(name)
    else:
        m = ml_dtypes()
        if m is None or not hasattr(m, name):
            if isinstance(key_path, tuple):
                from . import _keypath  # noqa: PLC0415

                key_path = _keypath.join(key_path)
            raise error(NotSupportedError, file, key_path,
                        f"dtype {name} needs the ml_dtypes package, which is not installed "
                        f"(pip install ml_dtypes); or load with cast= to a NumPy dtype, or as "
                        f"torch tensors (framework='torch')")
        dt = np.dtype(getattr(m, name))
    _NUMPY_OF[name] = dt
    return dt


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


def code_of_name(name: str) -> int:
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
    return name in FLOATING


# ---- JAX ------------------------------------------------------------------------------------

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


def torch_dtype_or_none(name: str) -> Any:
    """torch's dtype for jtree dtype ``name``, or None where torch has none (TORCH_MISSING,
    or a torch too old for it)."""
    import torch  # noqa: PLC0415

    t = getattr(torch, name, None) if name not in TORCH_MISSING else None
    return t if isinstance(t, torch.dtype) else None


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
