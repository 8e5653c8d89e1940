"""What every framework's slice of an open file's array leaf shares. ``LazyArray.get`` hands a
slice to its framework's adapter (the ``slice`` hook, jtree._load_adapter); the hooks call
these: the box an index touches (:func:`box`), the size check before allocating
(:func:`check_size`), the box as NumPy, viewed in the file's memory map or read
(:func:`numpy`), the box read straight into device memory (:func:`read_to_device`), and the
refusal of device options for a slice bound for host memory (:func:`host_only`).

Each takes the LazyArray (``lazy``: its File ``lazy._f``, FileLeaf ``lazy._leaf`` and key path
``lazy.path``) and never imports jtree._file, which imports the adapters."""
from __future__ import annotations

from typing import Any, List, Optional, Tuple

import numpy as np

from . import _device, _device_options, _dtypes, _jtree
from ._errors import NotSupportedError, ResourceExhaustedError, error
from ._index import box_of, mapped_box

Box = Tuple[List[int], List[int], Tuple[Any, ...]]


def where(lazy: Any) -> str:
    """"file: key/path", the prefix of device_options' messages."""
    return f"{lazy._f.name}: {lazy.path}"


def host_only(lazy: Any, options: Any) -> None:
    """InvalidArgumentError where ``options`` (a DeviceOptions) are given to a slice bound for
    host memory."""
    if options is not None:
        raise _device_options.not_a_device_load(where(lazy))


def box(lazy: Any, index: Any) -> Box:
    """(begin, end, post) of a basic index (jtree._index.box_of)."""
    return box_of(index, lazy._leaf.shape, lazy._f.name, lazy.path)


def check_size(lazy: Any, shape: Tuple[int, ...], itemsize: int) -> int:
    """The slice's size in bytes; refuses a slice NumPy cannot represent, or one over the
    file's memory limits."""
    # Bounded before allocating, as loads are (Loader.reserve): one slice is one call, with
    # a budget of its own (jtree::MemoryBudget).
    nbytes = itemsize
    span = itemsize  # (what NumPy checks: the product of the non-zero dimensions)
    for n in shape:
        nbytes *= n
        span *= max(n, 1)
    if span >= 2 ** 63:
        raise error(NotSupportedError, lazy._f.name, lazy.path,
                    f"an array of shape {shape} is too large for NumPy to represent "
                    f"(even empty)")
    why = _jtree.MemoryBudget(*lazy._f._reader.memory_limits()).try_reserve(nbytes)
    if why is not None:
        raise error(ResourceExhaustedError, lazy._f.name, lazy.path, f"the slice {why}")
    return nbytes


def numpy(lazy: Any, index: Any, npdt: np.dtype, writable: Optional[bool] = None) -> np.ndarray:
    """The slice as NumPy type ``npdt`` (the stored type, or one of its item size): a view
    of the file's memory map where the leaf maps (see _mapped; ``writable`` None:
    read-only when the File's mmap is "r"), else read into a new array."""
    f = lazy._f
    begin, end, post = box(lazy, index)
    shape = tuple(e - b for b, e in zip(begin, end))
    view = _mapped(lazy, begin, end, shape, npdt, f.mmap != "r" if writable is None else writable)
    if view is not None:
        return view[post]
    nbytes = check_size(lazy, shape, npdt.itemsize)
    try:
        arr = np.empty(shape, npdt)
    except MemoryError:
        raise error(ResourceExhaustedError, f.name, lazy.path,
                    f"out of memory allocating {nbytes} bytes for the slice") from None
    if arr.size:
        f._reader.read_many([(lazy._leaf.index, begin, end, _dtypes.numpy_bytes(arr))],
                            f.verify_checksums, f.threads)
    return arr[post]


def _mapped(lazy: Any, begin: List[int], end: List[int], shape: Tuple[int, ...],
            npdt: np.dtype, writable: bool) -> Optional[np.ndarray]:
    """The box as a view of the file's memory map (jtree._index.mapped_box: as whole
    mapped leaves are); None where the File's mmap is off or the leaf does not map: the
    slice is then read as before."""
    f, leaf = lazy._f, lazy._leaf
    if not f.mmap or not leaf.chunked:
        return None
    return mapped_box(f._reader, leaf.index, leaf.shape, begin, end, npdt, f.verify_checksums,
                      f.threads, writable)


def read_to_device(lazy: Any, begin: List[int], end: List[int], dest: Any,
                   options: Any) -> None:
    """Reads box [begin, end) straight into the device destination ``dest`` (jtree._device:
    a torch tensor, a jtree._device_jax.Dest), with the File's checksum and thread settings."""
    f = lazy._f
    _device.read(f._reader, [(lazy._leaf.index, (begin, end), dest)], verify=f.verify_checksums,
                 threads=f.threads, options=options)
