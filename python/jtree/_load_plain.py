"""The plain load: ``jtree.load(f)`` / ``File.load()`` of a whole file (or of a part of it,
``jtree.load(f["params"])``) as NumPy arrays (or, with
``framework="torch"`` on the CPU and the memory map on, torch tensors; with ``framework="jax"``
where the process's one JAX device is a CPU, JAX arrays; to a device the direct path serves,
torch tensors or JAX arrays in its memory, filled by jtree._device) and Python values, with
no cast, target or progress (the call made most), a ``keys=`` selection allowed (with or
without prune), done in one native pass (``Reader.load_plain``, bindings/python/src/plain_load.cc;
a selection's rules in node_selection.h, its patterns the same jtree::KeyPathPatterns the
general loader asks) instead of the general loader's plan of a Python frame, thunk and
reservation per leaf (jtree._load). Same rules, same result; where the file needs more
(pickled or custom leaves loaded, a dtype NumPy or torch lacks, the memory limits, a damaged
str) the native pass declines and the general loader loads it."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from . import _device, _device_torch, _dtypes, _placement
from ._errors import ResourceExhaustedError

# mmap= as Reader.load_plain's mmap_mode: 0 copies, 1 copy-on-write views, 2 read-only views.
_MMAP_MODE = {False: 0, True: 1, "r": 2}


def applies(o: Any) -> bool:
    """Whether a load with LoadOptions ``o`` is a plain one (the caller checks that the target
    is everything, of the file or of one node's subtree): NumPy, or torch on the CPU from the
    memory map (jtree._load_torch.as_stored's case; without the map torch tensors are made by
    torch), or torch or JAX to a device the direct path serves (:func:`_device_target`), or
    JAX with no shardings= where the process's one JAX device is a CPU
    (jtree._placement.only_jax_cpu_device); a keys= selection with or without prune (prune
    alone, which selects everything, takes the general loader). Only a device load may have
    device_options, or JAX's shardings= (a SingleDeviceSharding)."""
    if o.slices is not None:
        return False  # (parts of leaves: the general loader's one pass)
    if _device_target(o) is not None:
        return (o.cast is None and (o.keys is not None or not o.prune) and not o.fill_out
                and o.progress is None)
    if o.framework == "torch":
        if not o.mmap or (o.device is not None and (o.device.type != "cpu"
                                                    or o.placement.direct)):
            return False  # (direct(cpu): the tests' host stand-in for a device)
    elif o.framework == "jax":
        if o.shardings is not None or _placement.only_jax_cpu_device() is None:
            return False
    elif o.framework != "numpy" or o.device is not None:
        return False
    return (o.cast is None and (o.keys is not None or not o.prune) and not o.fill_out
            and o.progress is None and o.device_options is None and o.shardings is None)


def _device_target(o: Any) -> Any:
    """The device a load with LoadOptions ``o`` puts every array on, whole, through the direct
    path (the tests' host stand-in's CPU too), as _load_torch.as_stored and _load_jax.as_stored
    plan it: torch's ``device=``, or JAX's one device (``shardings=`` a SingleDeviceSharding,
    or none where the process has one device) where it is not a CPU; None for every other
    load, and with JTREE_DEVICE_OVERLAP=reads, whose reads while planning only the general
    loader does (a setting this pass would ignore)."""
    if o.framework == "torch":
        if not o.placement.direct:
            return None
        device = o.device
    elif o.framework == "jax" and o.device is None:
        device = _placement.one_jax_device(o.shardings)
        if device is False or (device.platform == "cpu" and _device._stand_in is None):
            return None
    else:
        return None
    return device if _device.overlap() != "reads" else None


def _torch_wrap() -> Callable[[np.ndarray, int], Any]:
    """The wrap of a torch plain load: each array, read as _dtypes.torch_holder_of_code's
    NumPy dtype, made a tensor of its stored dtype over the same memory, as
    _load_torch.as_stored makes it (_dtypes.torch_viewer, looked up once per dtype code)."""
    viewers: Dict[int, Callable[[np.ndarray], Any]] = {}

    def wrap(a: np.ndarray, code: int) -> Any:
        view = viewers.get(code)
        if view is None:
            t = _dtypes.torch_dtype_or_none(_dtypes.NAME_OF[code])
            view = viewers[code] = _dtypes.torch_viewer(t)
        return view(a)

    return wrap


def _jax_wrap() -> Callable[[np.ndarray, int], Any]:
    """The wrap of a JAX plain load: each array, read as a NumPy array of its stored dtype (a
    view of the file's map where it can be; _dtypes.jax_numpy_dtype_of_code: dtypes DLPack
    does not carry into JAX, float8, int4..., decline to the general loader, whose
    ``jax.device_put`` error for one the backend cannot hold names the leaf), moved to the
    process's one CPU device as the general loader moves it (jtree._load_jax.jax_array: a
    DLPack import, jtree._device_jax.to_cpu_device, else ``jax.device_put``)."""
    from . import _device_jax  # noqa: PLC0415

    device = _placement.only_jax_cpu_device()

    def wrap(a: np.ndarray, code: int) -> Any:
        got = _device_jax.to_cpu_device(a, device)
        return got if got is not None else _dtypes.jax_device_put(a)

    return wrap


def _torch_destinations(device: Any, planned: Callable[[Any, int], None], options: Any,
                        file: str) -> Tuple[Callable[[Tuple[int, ...], int], Any],
                                            Callable[[Any, int], Any]]:
    """(new_device, wrap) of a plain torch load to ``device`` (its dtypes those
    _dtypes.torch_holder_of_code gives: the others decline to the general loader, through
    NumPy or its clear error): each array a tensor of its stored dtype in the device's
    memory, made as _load_torch._new_on_device makes it (jtree._device_torch.new: by default
    a view of the load's one allocation, placed when the load reads it; ``options``, the
    load's DeviceOptions, may say per tensor), its value the tensor (wrap);
    ``planned(device, nbytes)`` told of each."""
    def new_device(shape: Tuple[int, ...], code: int) -> Any:
        t = _device_torch.new(device, shape, _dtypes.torch_dtype_or_none(_dtypes.NAME_OF[code]),
                              options, file, "")
        planned(device, _device.nbytes(t))
        return t

    def wrap(dest: Any, code: int) -> Any:
        return _device_torch.value(dest)

    return new_device, wrap


def _jax_destinations(device: Any, planned: Callable[[Any, int], None]) -> Tuple[
        Callable[[int], Optional[np.dtype]], Callable[[Tuple[int, ...], int], Any],
        Callable[[Any, int], Any]]:
    """(numpy_dtype_of, new_device, wrap) of a plain JAX load to ``device``: each array's
    bytes a jtree._device_jax.Dest (placed for the whole load when it is read: one allocation
    per device), then a JAX array over them (Dest.array), as _load_jax.as_stored makes it;
    ``planned(device, nbytes)`` told of each. Dtypes the direct path does not take to that
    device (_placement.why_not_jax_direct) decline to the general loader."""
    from . import _device_jax  # noqa: PLC0415

    shapes: Dict[int, Tuple[int, ...]] = {}  # id(Dest) -> its array's shape

    def dtype_of(code: int) -> Optional[np.dtype]:
        if _placement.why_not_jax_direct(device, _dtypes.NAME_OF.get(code, "")) is not None:
            return None
        return _dtypes.numpy_dtype_of_code(code)

    def new_device(shape: Tuple[int, ...], code: int) -> Any:
        n = _dtypes.TABLE[_dtypes.NAME_OF[code]][1]
        for k in shape:
            n *= k
        dest = _device_jax.Dest(device, n)
        shapes[id(dest)] = shape
        planned(device, n)
        return dest

    def wrap(dest: Any, code: int) -> Any:
        return dest.array(shapes[id(dest)], _dtypes.NAME_OF[code])

    return dtype_of, new_device, wrap


def load(reader: Any, container: Any, o: Any, node: int = 0,
         path: Tuple[Any, ...] = ()) -> Optional[Tuple[Any, List[int]]]:
    """``(tree, [])``: the file of the native ``reader`` loaded (the subtree of ``node``,
    whose key path is ``path``; what ``o.keys`` selects of it), containers other than dicts,
    lists and tuples made by ``container`` (jtree._load.container_builder); ``(None,
    numbers)`` when keys= patterns match nothing (nothing read: the caller's NotFoundError
    names them); None when the general loader must load it."""
    keys = o.keys.native if o.keys is not None else None
    device = _device_target(o)
    if device is not None:
        return _load_to_device(reader, container, o, device, keys, node, path)
    if o.framework == "jax":
        # (Copy-on-write for mmap="r" too, as torch's: XLA keeps an aligned leaf's mapped
        # bytes as they are, no copy, and a JAX array has no read-only flag to carry.)
        return reader.load_plain(_dtypes.jax_numpy_dtype_of_code, container, _jax_wrap(),
                                 _MMAP_MODE[bool(o.mmap)], o.verify, o.threads, keys, o.prune,
                                 node, path)
    if o.framework == "torch":
        # (Copy-on-write for mmap="r" too: torch tensors have no read-only flag.)
        return reader.load_plain(_dtypes.torch_holder_of_code, container, _torch_wrap(),
                                 _MMAP_MODE[True], o.verify, o.threads, keys, o.prune, node,
                                 path)
    return reader.load_plain(_dtypes.numpy_dtype_of_code, container, None, _MMAP_MODE[o.mmap],
                             o.verify, o.threads, keys, o.prune, node, path)


def _load_to_device(reader: Any, container: Any, o: Any, device: Any, keys: Any, node: int,
                    path: Tuple[Any, ...]) -> Optional[Tuple[Any, List[int]]]:
    """:func:`load` to ``device`` (:func:`_device_target`): the tree planned and its device
    destinations made in the native pass, filled by one jtree._device.read (pinned staging,
    the GIL released; the staging buffers pinned ahead once half their size is planned, as
    the general loader's Loader.device_planned does), then made the tree's values. Out of
    torch's device memory while allocating, and a load with device_options but no array (the
    general loader's error for device_options it cannot use), decline to the general loader,
    which raises its own clear error naming the leaf or the setting."""
    pin = _device.overlap() != "0"
    cache: dict = {}

    def planned(dev: Any, nbytes: int) -> None:
        if pin:
            _device.planned(cache, dev, nbytes, o.device_options)

    def fill(requests: List[Any]) -> bool:
        if o.device_options is not None and not requests:
            return False
        _device.read(reader, requests, verify=o.verify, threads=o.threads,
                     options=o.device_options)
        return True

    if o.framework == "jax":
        dtype_of, new_device, wrap = _jax_destinations(device, planned)
        out_of_memory: Any = ()  # (JAX's allocation is made in fill: its own clear error)
    else:
        import torch  # noqa: PLC0415

        dtype_of = _dtypes.torch_holder_of_code
        new_device, wrap = _torch_destinations(device, planned, o.device_options, reader.name)
        # (torch.OutOfMemoryError, any device; ResourceExhaustedError: the grouped placement's
        # own, in fill, which knows no key path: the general loader's names the leaf.)
        out_of_memory = (torch.cuda.OutOfMemoryError, ResourceExhaustedError)
    try:
        return reader.load_plain(dtype_of, container, wrap, 0, o.verify, o.threads, keys,
                                 o.prune, node, path, new_device=new_device, fill=fill)
    except out_of_memory:
        return None
