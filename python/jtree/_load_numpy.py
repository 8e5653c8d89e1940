"""The NumPy adapter of the load planner (jtree._load_adapter describes adapters): arrays come
back as NumPy arrays (bfloat16, float8, float4, int4 as ml_dtypes types), read straight into
the returned array or the caller's ``out`` where the dtype allows, else cast after the read.
Slices of an open file (``lazy_slice``, LazyArray.get) are views of its map or read boxes."""
from __future__ import annotations

from typing import Any, Optional, Tuple

import numpy as np

from . import _dtypes, _lazy_slice
from . import _keypath as kp
from ._errors import InvalidArgumentError
from ._load_adapter import (MMAP_MODE, Adapter, PlainPass, Placement, Thunk, array_key,
                            memo)
from ._structure import FLAG_SCALAR, FileLeaf

NAME = "numpy"


def target(loader: Any, t: Any, where: str) -> Optional[Placement]:
    """A NumPy array as a target: its dtype and shape (and itself, to fill, for ``out=``)."""
    if not isinstance(t, np.ndarray):
        return None
    return Placement("numpy", _dtypes.dtype_name(t.dtype, loader.name, where), t.shape,
                     out=t if loader.o.fill_out else None)


def settle(loader: Any, fl: FileLeaf, p: Placement, path: Tuple[Any, ...]) -> None:
    """(NumPy arrays need nothing of the load's options.)"""


def array(loader: Any, fl: FileLeaf, p: Placement, scalar: bool, path: Tuple[Any, ...]) -> Thunk:
    """The leaf as a NumPy array of dtype ``p.want`` and shape ``p.shape`` (a NumPy scalar for a
    saved scalar)."""
    get = numpy(loader, fl, p.want, p.shape, p.out, path)
    return (lambda: get()[()]) if scalar else get


def block(loader: Any, fl: FileLeaf, box: Tuple[Tuple[int, int], ...], want: str,
          path: Tuple[Any, ...]) -> Thunk:
    """Box [begin, end) of a leaf (a GlobalArray block) as a NumPy array of dtype ``want``."""
    stored = fl.dtype
    h = loader.host_box(fl, box, path)
    return lambda: _dtypes.numpy_cast(h(), stored, want, loader.name, path)


def part(loader: Any, fl: FileLeaf, box: Tuple[Tuple[int, int], ...], want: str, out: Any,
         path: Tuple[Any, ...]) -> Thunk:
    """Box [begin, end) of a leaf (a load's ``slices=``) as a NumPy array of dtype ``want``,
    or read into ``out`` (a NumPy array of the box's shape: straight into it when it is
    contiguous and of the stored dtype)."""
    if out is None:
        npdt = _dtypes.numpy_dtype_or_none(fl.dtype) if want == fl.dtype else None
        if npdt is not None:
            view = loader.mapped_part(fl, box, npdt, path, loader.o.mmap != "r")
            if view is not None:  # (a view of the file's map, as whole leaves are)
                return lambda: view
        return block(loader, fl, box, want, path)
    if not isinstance(out, np.ndarray):
        raise loader.err(InvalidArgumentError, path, f"out= holds a {type(out).__qualname__} "
                         f"here; a NumPy load fills NumPy arrays")
    stored_np = _dtypes.stored_numpy_dtype(fl.dtype, loader.name, path)
    if out.dtype == stored_np and out.flags.c_contiguous:
        loader.host_box(fl, box, path, dst=out)
        return lambda: out
    get = block(loader, fl, box, _dtypes.dtype_name(out.dtype, loader.name, kp.join(path)), path)

    def fill() -> np.ndarray:
        out[...] = get()
        return out

    return fill


def index(a: Any, post: Tuple[Any, ...]) -> Any:
    """``a[post]``: the rest of a basic index once its box is read (ints, steps)."""
    return a[post]


def as_stored(loader: Any, fl: FileLeaf, path: Tuple[Any, ...]) -> Optional[Thunk]:
    """The common case of Loader.array(): the whole leaf as a new NumPy array of the stored
    dtype, read straight into it (None when the dtype needs the general path)."""
    npdt = _dtypes.numpy_dtype_or_none(fl.dtype)
    if npdt is None:
        return None  # (bfloat16 through numpy_cast, or the clear error)
    shape = fl.shape
    key = array_key(fl, "numpy", fl.dtype, shape)  # (tied leaves: one array)
    thunk = loader.cache.get(key)
    if thunk is not None:
        return thunk
    get = loader.stored_array(fl, npdt, path)
    if fl.flags & FLAG_SCALAR and shape == ():
        thunk = memo(lambda: get()[()])
    else:
        thunk = get
    loader.cache[key] = thunk
    return thunk


def numpy(loader: Any, fl: FileLeaf, want: str, shape: Tuple[int, ...],
          out: Optional[np.ndarray], path: Tuple[Any, ...]) -> Thunk:
    """The leaf as a NumPy array of dtype ``want`` and ``shape`` (padded or truncated), read
    into ``out`` when given (straight into it when its dtype and layout allow)."""
    # Both raise the clear error now, before anything is read, when ml_dtypes is missing.
    want_np = out.dtype if out is not None else _dtypes.numpy_dtype(want, loader.name, path)
    stored_np = _dtypes.stored_numpy_dtype(fl.dtype, loader.name, path)
    box = tuple((0, n) for n in shape)
    if want == fl.dtype and stored_np == want_np:
        if out is None:
            return loader.host_box(fl, box, path)  # straight into the returned array
        if out.flags.c_contiguous and out.flags.writeable and out.shape == shape:
            return loader.host_box(fl, box, path, dst=out)  # straight into the caller's
    get = loader.host_box(fl, box, path)
    stored = fl.dtype

    def done() -> np.ndarray:
        a = _dtypes.numpy_cast(get(), stored, want, loader.name, path)
        if out is None:
            return a
        np.copyto(out, a, casting="unsafe")
        return out

    return done


# ---- slices of an open file (LazyArray.get) ----

def lazy_slice(lazy: Any, index: Any, placement: Any, options: Any) -> Any:
    """The elements a basic index selects of the LazyArray ``lazy`` as a NumPy array of the
    stored dtype (a view of the file's map where it can be); ``options`` refused (host
    memory)."""
    _lazy_slice.host_only(lazy, options)
    npdt = _dtypes.numpy_dtype(lazy._leaf.dtype, lazy._f.name, lazy.path)
    return _lazy_slice.numpy(lazy, index, npdt)


# ---- the native plain pass (jtree._load_plain) ----

def plain_on_host(o: Any) -> bool:
    """Every NumPy load without ``device=`` may take the native plain pass."""
    return o.device is None


def host_pass(o: Any) -> PlainPass:
    """Each array a NumPy array of its stored dtype (None: declined; bfloat16 without
    ml_dtypes), a view of the file's map as ``mmap=`` says."""
    return PlainPass(_dtypes.numpy_dtype_of_code, None, MMAP_MODE[o.mmap])


ADAPTER = Adapter(NAME, target=target, settle=settle, array=array, block=block, part=part,
                  index=index, as_stored=as_stored, plain_on_host=plain_on_host,
                  host_pass=host_pass, slice=lazy_slice)
