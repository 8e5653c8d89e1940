"""The torch adapter of the load planner (jtree._load_adapter describes adapters): arrays come
back as torch tensors, on the CPU (views of the file's memory map where they can be) or on
``device=`` -- to a CUDA device straight into device memory through jtree._device when this
jtree can, else moved there with ``Tensor.to``. Dtypes torch lacks go through NumPy. Slices of
an open file (``lazy_slice``, LazyArray.get) take the same paths."""
from __future__ import annotations

import sys
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from . import _device, _device_options, _device_torch, _dtypes, _lazy_slice, _placement
from . import _keypath as kp
from ._errors import InvalidArgumentError, ResourceExhaustedError
from ._load_adapter import (MMAP_MODE, Adapter, PlainPass, Placement, Thunk, array_key,
                            memo)
from ._structure import FileLeaf

NAME = "torch"


def target(loader: Any, t: Any, where: str) -> Optional[Placement]:
    """A torch tensor as a target: its dtype, shape and device (and itself, for ``out=``)."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(t, torch.Tensor):
        return None
    return Placement("torch", _dtypes.dtype_name(t.dtype, loader.name, where), tuple(t.shape),
                     device=t.device, out=t if loader.o.fill_out else None)


def settle(loader: Any, fl: FileLeaf, p: Placement, path: Tuple[Any, ...]) -> None:
    """The load's ``device=`` for targets that name none."""
    if p.device is None or p.device.type == "meta":
        # A target on the meta device gives shape and dtype only: the data goes to the
        # load's device= (default the CPU), never to meta, where it would be thrown away.
        if p.out is not None and p.out.device.type == "meta":
            p.out = None  # (a new tensor in the result: a meta tensor holds no memory)
        p.device = loader.o.device


def array(loader: Any, fl: FileLeaf, p: Placement, scalar: bool, path: Tuple[Any, ...]) -> Thunk:
    """The leaf as a tensor of dtype ``p.want``, shape ``p.shape`` on ``p.device`` (or
    ``p.out`` filled)."""
    return tensor(loader, fl, p.want, p.shape, p.device, p.out, path)


def block(loader: Any, fl: FileLeaf, box: Tuple[Tuple[int, int], ...], want: str,
          path: Tuple[Any, ...]) -> Thunk:
    """Box [begin, end) of a leaf as a CPU torch tensor of dtype ``want``."""
    import torch  # noqa: PLC0415

    where = kp.join(path)
    want_t = _dtypes.torch_dtype(want, loader.name, where)
    if _placement.torch_lacks(fl.dtype):  # through NumPy (ml_dtypes), cast there
        get = loader.host_box(fl, box, path)
        stored = fl.dtype
        return lambda: torch.from_numpy(
            np.ascontiguousarray(_dtypes.numpy_cast(get(), stored, want, loader.name, path)))
    stored_t = _dtypes.torch_dtype(fl.dtype, loader.name, where)
    shape = tuple(e - b for b, e in box)
    if loader.o.mmap and shape == fl.shape and all(b == 0 for b, _ in box):
        # The whole leaf: its bytes (mapped, or read) seen as a tensor without a copy.
        # (Torch tensors have no read-only flag: mmap="r" gives them copy-on-write too.)
        get_bytes = loader.stored_array(fl, None, path)

        def whole() -> Any:
            t = _dtypes.torch_view(get_bytes(), stored_t, shape)
            return t if t.dtype == want_t else t.to(want_t)

        return whole
    loader.reserve_array(shape, _dtypes.torch_itemsize(stored_t), path)
    t = torch.empty(shape, dtype=stored_t)
    loader.request(fl, [b for b, _ in box], [e for _, e in box], _dtypes.torch_bytes(t))
    return lambda: t if t.dtype == want_t else t.to(want_t)


def _finisher(want_t: Any, out: Any, device: Any) -> Any:
    """What makes a read tensor the result: cast to ``want_t``, then copied into ``out`` (and
    ``out`` returned) or moved to ``device``."""
    def finish(t: Any) -> Any:
        if t.dtype != want_t:
            t = t.to(want_t)
        if out is not None:
            if t is not out:
                out.copy_(t)
            return out
        return t if device is None or t.device == device else t.to(device)

    return finish


def part(loader: Any, fl: FileLeaf, box: Tuple[Tuple[int, int], ...], want: str, out: Any,
         path: Tuple[Any, ...]) -> Thunk:
    """Box [begin, end) of a leaf (a load's ``slices=``: a rank's shard) as a tensor of dtype
    ``want`` on the load's ``device=`` (default the CPU), or read into ``out`` (a tensor of
    the box's shape). To a device the direct path serves, the box's chunks are read straight
    into device memory in the load's one device pass (jtree._device), else read on the host
    and moved."""
    import torch  # noqa: PLC0415

    where = kp.join(path)
    want_t = _dtypes.torch_dtype(want, loader.name, where)
    device = out.device if out is not None else loader.o.device
    shape = tuple(e - b for b, e in box)

    finish = _finisher(want_t, out, device)
    if out is not None and not isinstance(out, torch.Tensor):
        raise loader.err(InvalidArgumentError, path, f"out= holds a {type(out).__qualname__} "
                         f"here; a torch load fills torch tensors")
    direct = not _placement.torch_lacks(fl.dtype) and _direct(loader, device)
    if direct:
        stored_t = _dtypes.torch_dtype(fl.dtype, loader.name, where)
        if _device.usable_out(out, device, stored_t, shape):
            dst = out
        else:
            loader.reserve_array(shape, _dtypes.torch_itemsize(stored_t), path)
            dst = _device_torch.new(device, shape, stored_t, loader.o.device_options,
                                    loader.name, where)
        loader.device_requests.append((fl.index, ([b for b, _ in box], [e for _, e in box]),
                                       dst))
        loader.device_planned(device, _device.nbytes(dst))
        return lambda: finish(_device_torch.value(dst))
    loader.note_host_path(lambda: _placement.is_device_target(device),
                          lambda: _why_host(fl, device, where))
    if out is None and not _placement.torch_lacks(fl.dtype):
        # A view of the file's map where it maps (rows of a raw leaf: no copy; columns: one
        # copy), read as _dtypes.torch_holder's NumPy type, seen as the torch dtype.
        # (Writable: torch tensors have no read-only flag, so mmap="r" gives them
        # copy-on-write views too.)
        view = loader.mapped_part(fl, box, _dtypes.torch_holder(fl.dtype), path, True)
        if view is not None:
            t = _dtypes.torch_view(view, _dtypes.torch_dtype(fl.dtype, loader.name, where))
            return lambda: finish(t)
    get = block(loader, fl, box, want, path)
    return lambda: finish(get())


def index(t: Any, post: Tuple[Any, ...]) -> Any:
    """``t[post]``, contiguous: the rest of a basic index once its box is read (ints drop
    their dimension, positive steps; jtree._shard refuses negative ones, which torch lacks)."""
    return t[post].contiguous()


def as_stored(loader: Any, fl: FileLeaf, path: Tuple[Any, ...]) -> Optional[Thunk]:
    """The common cases of Loader.array() for torch, without the general per-leaf planning (a
    load of 10,000 small leaves spent half its time there): the whole leaf, of its stored
    dtype, as a CPU tensor over the file's memory map (what block() does for it), or on a
    device the direct path serves, a new device tensor filled by it (what tensor() does for
    it). None where the general path is needed (no memory map for a CPU tensor, a device
    without the direct path, a dtype torch lacks)."""
    device = loader.o.device
    if _placement.torch_lacks(fl.dtype):
        return None
    on_device = loader.o.placement.direct
    if not on_device and (not loader.o.mmap or (device is not None and device.type != "cpu")):
        return None
    shape = fl.shape
    key = array_key(fl, "torch", fl.dtype, shape, device=device)  # (tied leaves: one tensor)
    thunk = loader.cache.get(key)
    if thunk is not None:
        return thunk
    stored_t = _dtypes.torch_dtype_or_none(fl.dtype)
    if stored_t is None:
        return None  # (the general path raises the clear error)
    if on_device:
        return _new_on_device(loader, fl, stored_t, device, key, path)
    # (The bytes, writable: torch tensors have no read-only flag, so mmap="r" gives them
    # copy-on-write too.)
    get_bytes = loader.stored_array(fl, None, path)
    thunk = memo(lambda: _dtypes.torch_view(get_bytes(), stored_t, shape))
    loader.cache[key] = thunk
    return thunk


def from_template(loader: Any, fl: FileLeaf, t: Any, path: Tuple[Any, ...]) -> Optional[Thunk]:
    """The common case of a torch tensor as a leaf's target, without the general per-leaf
    planning (what a server's load into tensors it allocated meets; gpu_load.py's out= and
    like= rows): a target of the stored dtype and shape on a device the direct path serves.
    With ``out=`` the tensor itself is filled (when contiguous), else a new device tensor is
    (what tensor() does for them). None for every other target: the general path."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(t, torch.Tensor) or _placement.torch_lacks(fl.dtype):
        return None
    if t.shape != fl.shape or t.dtype != _dtypes.torch_dtype_or_none(fl.dtype):
        return None
    device = t.device
    if not _direct(loader, device):
        return None
    if loader.o.fill_out:
        if not t.is_contiguous():
            return None  # (the general path fills it through a tensor of its own)
        loader.device_requests.append((fl.index, None, t))
        loader.device_planned(device, fl.nbytes)
        return lambda: t
    key = array_key(fl, "torch", fl.dtype, fl.shape, device=device)  # (tied: one tensor)
    thunk = loader.cache.get(key)
    return thunk if thunk is not None else _new_on_device(loader, fl, t.dtype, device, key, path)


def _direct(loader: Any, device: Any) -> bool:
    """Whether arrays for ``device`` take the direct path: the load's placement for its own
    device=, else _placement.torch_direct(device) asked once per load and device (it asks
    torch and the native module: microseconds a leaf, milliseconds over a model's leaves)."""
    if device == loader.o.placement.device:
        return loader.o.placement.direct
    key = ("direct", device)
    known = loader.cache.get(key)
    if known is None:
        known = loader.cache[key] = _placement.torch_direct(device)
    return known


def _why_host(fl: FileLeaf, device: Any, where: str) -> str:
    """Why a leaf (or box) for ``device`` is read through host memory: a dtype torch lacks, or
    the direct path not serving the device."""
    lacks = _placement.torch_lacks(fl.dtype)
    return f"{lacks} ({where})" if lacks else _placement.why_not_torch_direct(device)


def _new_on_device(loader: Any, fl: FileLeaf, stored_t: Any, device: Any, key: Any,
                   path: Tuple[Any, ...]) -> Thunk:
    """A new tensor of the leaf's stored dtype and shape on ``device``, filled straight in
    device memory by jtree._device (as tensor() plans it): jtree._device_torch.new's (a view
    of the load's one allocation, unless the device options say per tensor); remembered
    under ``key``."""
    loader.reserve_array(fl.shape, _dtypes.torch_itemsize(stored_t), path)
    dst = _device_torch.new(device, fl.shape, stored_t, loader.o.device_options, loader.name,
                            lambda: kp.join(path))
    loader.device_requests.append((fl.index, None, dst))
    loader.device_planned(device, fl.nbytes)
    thunk = memo(lambda: _device_torch.value(dst))
    loader.cache[key] = thunk
    return thunk


def tensor(loader: Any, fl: FileLeaf, want: str, shape: Tuple[int, ...], device: Any,
           out: Any, path: Tuple[Any, ...]) -> Thunk:
    """The leaf as a tensor of dtype ``want`` and ``shape`` (padded or truncated) on
    ``device``, or read into ``out`` (straight into it when its dtype and layout allow)."""
    import torch  # noqa: PLC0415

    where = kp.join(path)
    want_t = _dtypes.torch_dtype(want, loader.name, where)

    finish = _finisher(want_t, out, device)
    box = tuple((0, n) for n in shape)
    bound = lambda: _placement.is_device_target(device)  # noqa: E731
    if _placement.torch_lacks(fl.dtype):  # through NumPy (ml_dtypes), cast there
        loader.note_host_path(bound, lambda: _why_host(fl, device, where))
        get = block(loader, fl, box, want, path)
        return lambda: finish(get())
    stored_t = _dtypes.torch_dtype(fl.dtype, loader.name, where)
    inner = tuple(min(a, b) for a, b in zip(shape, fl.shape))
    zeros = (0,) * len(shape)
    direct = _direct(loader, device)
    if not (inner == shape and direct):
        loader.note_host_path(bound, lambda: _placement.why_not_torch_direct(device)
                              if not direct else f"pad_truncate pads {where}")
    if inner == shape and direct:
        # Straight into device memory (jtree._device): no host copy of the leaf first.
        if _device.usable_out(out, device, stored_t, shape):
            dst = out
        else:
            loader.reserve_array(shape, _dtypes.torch_itemsize(stored_t), path)
            dst = _device_torch.new(device, shape, stored_t, loader.o.device_options,
                                    loader.name, where)
        loader.device_requests.append((fl.index, None, dst))
        return lambda: finish(_device_torch.value(dst))
    if inner == shape:
        if (out is not None and out.dtype == stored_t and out.device.type == "cpu"
                and tuple(out.shape) == shape and out.is_contiguous()):
            loader.request(fl, zeros, shape, _dtypes.torch_bytes(out))  # straight into it
            return lambda: finish(out)
        get = block(loader, fl, box, want, path)  # a new tensor, cast to `want`
        return lambda: finish(get())
    size = _dtypes.torch_itemsize(stored_t)
    loader.reserve_array(shape, size, path)
    loader.reserve_array(inner, size, path)
    full = torch.zeros(shape, dtype=stored_t)
    tmp = torch.empty(inner, dtype=stored_t)
    loader.request(fl, zeros, inner, _dtypes.torch_bytes(tmp))

    def padded() -> Any:
        full[tuple(slice(0, n) for n in inner)] = tmp
        return finish(full)

    return padded


# ---- slices of an open file (LazyArray.get) ----

def lazy_slice(lazy: Any, index: Any, placement: Any, options: Any) -> Any:
    """The elements a basic index selects of the LazyArray ``lazy`` as a tensor: on the CPU
    without a device, else on ``placement.device`` -- straight into device memory where the
    direct path serves it (_device_slice), else read on the host and moved there with
    ``Tensor.to``, ``options`` then unused (a warning, or NotSupportedError, naming why)."""
    dev = placement.device
    if dev is None:
        _lazy_slice.host_only(lazy, options)
        return _host_slice(lazy, index)
    t = _device_slice(lazy, index, dev, options) if placement.direct else None
    if t is not None:
        return t
    if options is not None:
        where = _lazy_slice.where(lazy)
        if not _placement.is_device_target(dev):
            raise _device_options.not_a_device_load(where)
        why = (placement.why_not_direct or _placement.torch_lacks(lazy._leaf.dtype)
               or "a slice with a negative step is read on the host (torch takes none)")
        _device_options.not_used(options, where, why)
    t = _host_slice(lazy, index)
    return t if dev.type == "cpu" else t.to(dev)


def _host_slice(lazy: Any, index: Any) -> Any:
    """The slice as a CPU tensor of the stored dtype."""
    name, file, where = lazy._leaf.dtype, lazy._f.name, lazy.path
    stored_t = _dtypes.torch_dtype(name, file, where)
    # Read as _dtypes.torch_holder's NumPy type, indexed there (NumPy takes any step),
    # then seen as the torch dtype without a copy. (A mapped slice stays a view: torch
    # tensors have no read-only flag, so mmap="r" gives them copy-on-write views, as
    # loads do.)
    holder = _dtypes.torch_holder(name)
    a = np.ascontiguousarray(_lazy_slice.numpy(lazy, index, holder, writable=True))
    return _dtypes.torch_view(a, stored_t)


def _device_slice(lazy: Any, index: Any, dev: Any, options: Any) -> Any:
    """The slice as a tensor on ``dev`` whose box of chunks was read straight into device
    memory (jtree._device); None where that path does not apply (negative steps, which
    torch cannot index, and dtypes torch lacks)."""
    name, file, where = lazy._leaf.dtype, lazy._f.name, lazy.path
    if _placement.torch_lacks(name):
        return None
    begin, end, post = _lazy_slice.box(lazy, index)
    if any(isinstance(p, slice) and (p.step or 1) < 0 for p in post):
        return None
    stored_t = _dtypes.torch_dtype(name, file, where)
    shape = tuple(e - b for b, e in zip(begin, end))
    _lazy_slice.check_size(lazy, shape, _dtypes.torch_itemsize(stored_t))
    t = _device.empty(shape, stored_t, dev, file, where)
    _lazy_slice.read_to_device(lazy, begin, end, t, options)
    return t[post].contiguous()


# ---- the native plain pass (jtree._load_plain) ----

def plain_on_host(o: Any) -> bool:
    """Whether a torch host load takes the plain pass: on the CPU from the memory map
    (as_stored's case; without the map torch makes the tensors), not the direct path's host
    stand-in for a device."""
    if not o.mmap:
        return False
    return o.device is None or (o.device.type == "cpu" and not o.placement.direct)


def host_pass(o: Any) -> PlainPass:
    """Each array read as _dtypes.torch_holder_of_code's NumPy dtype, made a tensor of its
    stored dtype over the same memory (as as_stored makes it); copy-on-write views for
    mmap="r" too: torch tensors have no read-only flag."""
    viewers: Dict[int, Callable[[np.ndarray], Any]] = {}  # (one _dtypes.torch_viewer a code)

    def wrap(a: np.ndarray, code: int) -> Any:
        view = viewers.get(code)
        if view is None:
            t = _dtypes.torch_dtype_or_none(_dtypes.NAME_OF[code])
            view = viewers[code] = _dtypes.torch_viewer(t)
        return view(a)

    return PlainPass(_dtypes.torch_holder_of_code, wrap, MMAP_MODE[True])


def plain_device(o: Any) -> Any:
    """The load's ``device=`` where the direct path serves it (the tests' host stand-in's CPU
    too), else None."""
    return o.device if o.placement.direct else None


def device_pass(o: Any, device: Any, file: str, planned: Callable[[Any, int], None],
                fill: Callable[..., bool]) -> PlainPass:
    """Each array a tensor of its stored dtype in ``device``'s memory (its dtypes those
    _dtypes.torch_holder_of_code gives: the others decline; errors name ``file``), made as
    _new_on_device makes it (jtree._device_torch.new), ``planned`` told of each; out of torch's device memory (or
    the grouped placement's own ResourceExhaustedError, in fill, which knows no key path)
    declines to the general loader, whose error names the leaf."""
    import torch  # noqa: PLC0415

    def new_device(shape: Tuple[int, ...], code: int) -> Any:
        t = _device_torch.new(device, shape, _dtypes.torch_dtype_or_none(_dtypes.NAME_OF[code]),
                              o.device_options, file, "")
        planned(device, _device.nbytes(t))
        return t

    return PlainPass(_dtypes.torch_holder_of_code, lambda dest, code: _device_torch.value(dest),
                     0, new_device=new_device, fill=fill,
                     declines_on=(torch.cuda.OutOfMemoryError, ResourceExhaustedError))


ADAPTER = Adapter(NAME, target=target, settle=settle, array=array, block=block, part=part,
                  index=index, as_stored=as_stored, from_template=from_template,
                  plain_on_host=plain_on_host, host_pass=host_pass, plain_device=plain_device,
                  device_pass=device_pass, slice=lazy_slice)
