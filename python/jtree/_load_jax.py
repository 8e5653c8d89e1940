"""The JAX adapter of the load planner (jtree._load_adapter describes adapters): arrays come
back as jax.Arrays, on the default device or placed by a sharding (a target's, or the load's
``shardings=``), each device's slice read on its own -- straight into GPU memory through
jtree._device_jax where it can. Slices of an open file (``lazy_slice``, LazyArray.get) go
straight to the process's one device the same way, else through ``jax.device_put``."""
from __future__ import annotations

import math
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from . import _device, _device_jax, _device_options, _dtypes, _lazy_slice, _placement
from . import _keypath as kp
from ._errors import InvalidArgumentError
from ._load_adapter import (MMAP_MODE, Adapter, PlainPass, Placement, Thunk, array_key,
                            memo)
from ._load_numpy import block as _numpy_block
from ._structure import FileLeaf

NAME = "jax"


def target(loader: Any, t: Any, where: str) -> Optional[Placement]:
    """A jax.Array or jax.ShapeDtypeStruct as a target: its dtype, shape and sharding."""
    jax = sys.modules.get("jax")
    if jax is None or not isinstance(t, (jax.Array, jax.ShapeDtypeStruct)):
        return None
    return Placement("jax", _dtypes.dtype_name(t.dtype, loader.name, where), tuple(t.shape),
                     sharding=getattr(t, "sharding", None))


def settle(loader: Any, fl: FileLeaf, p: Placement, path: Tuple[Any, ...]) -> None:
    """The load's ``shardings=`` for targets that name no sharding."""
    if p.sharding is None and loader.o.shardings is not None:
        s = loader.o.shardings
        p.sharding = s(kp.join(path), fl.spec()) if callable(s) else s
        if p.sharding is not None and not _placement.is_sharding(p.sharding):
            raise loader.err(InvalidArgumentError, path,
                             f"the shardings function returned a "
                             f"{type(p.sharding).__qualname__}, not a jax.sharding.Sharding "
                             f"(or None)")


def array(loader: Any, fl: FileLeaf, p: Placement, scalar: bool, path: Tuple[Any, ...]) -> Thunk:
    """The leaf as a JAX array of dtype ``p.want``, shape ``p.shape``, placed by
    ``p.sharding``."""
    return jax_array(loader, fl, p.want, p.shape, p.sharding, path)


# GlobalArray blocks of a JAX load are NumPy arrays (as they were before adapters).
block = _numpy_block


def part(loader: Any, fl: FileLeaf, box: Tuple[Tuple[int, int], ...], want: str, out: Any,
         path: Tuple[Any, ...]) -> Thunk:
    """Box [begin, end) of a leaf (a load's ``slices=``) as a JAX array of dtype ``want`` on
    the default device (read into host memory, then placed). JAX arrays are immutable: an
    ``out=`` is refused."""
    if out is not None:
        raise loader.err(InvalidArgumentError, path, "out= cannot be filled with JAX arrays "
                         "(they are immutable)")
    get = _numpy_block(loader, fl, box, want, path)
    name, where = loader.name, kp.join(path)
    return lambda: _dtypes.jax_device_put(get(), None, name, where)


def index(a: Any, post: Tuple[Any, ...]) -> Any:
    """``a[post]``: the rest of a basic index once its box is read (ints, steps)."""
    return a[post]


def jax_array(loader: Any, fl: FileLeaf, want: str, shape: Tuple[int, ...], sharding: Any,
              path: Tuple[Any, ...]) -> Thunk:
    """The leaf as a JAX array of dtype ``want`` and ``shape`` (padded or truncated): on the
    default device, or (``sharding``) each device's slice read on its own."""
    import jax  # noqa: PLC0415

    stored = fl.dtype
    if sharding is None:
        only, why_not_only = _placement.only_jax_device()
        whole = [(only, tuple((0, n) for n in shape))]
        if only is not None:
            # (Where jax.device_put would place it; committed there, which is the same
            # placement where the process has one device.)
            direct = direct_to_devices(loader, fl, want, shape,
                                       jax.sharding.SingleDeviceSharding(only), whole, path)
            if direct is not None:
                return direct
        loader.note_host_path(
            lambda: _placement.is_jax_device_target(jax.devices()[0]),
            lambda: _why_host(fl, whole, path) if only is not None else why_not_only)
        get = loader.host_box(fl, tuple((0, n) for n in shape), path)
        # (The process's only device, a CPU: a DLPack import, else jax.device_put's default
        # placement.)
        return lambda: _to_device(
            loader, _dtypes.numpy_cast(get(), stored, want, loader.name, path), only, None, path)
    # Each device's slice is read on its own (replicas once): the global array is never
    # assembled in host memory.
    index_map = sharding.addressable_devices_indices_map(shape)
    per_device = [(dev, tuple(_slice_bounds(s, n) for s, n in zip(index, shape)))
                  for dev, index in index_map.items()]
    direct = direct_to_devices(loader, fl, want, shape, sharding, per_device, path)
    if direct is not None:
        return direct
    loader.note_host_path(lambda: any(_placement.is_jax_device_target(d) for d, _ in per_device),
                          lambda: _why_host(fl, per_device, path))
    distinct = {b for _, b in per_device}
    on_cpus = all(d.platform == "cpu" for d, _ in per_device)
    if (fl.nbytes <= SMALL_LEAF_BYTES and tuple(shape) == tuple(fl.shape)
            and (len(distinct) > 1 or (on_cpus and len(per_device) > 1))
            and sum(math.prod(hi - lo for lo, hi in b) for b in distinct) == math.prod(shape)):
        # (A small leaf split or replicated over this process's devices, all of it theirs:
        # one read of the whole leaf, where a read per slice cost about 25 us each in planning
        # alone. Where other processes hold part of it, each process still reads only its own
        # slices.)
        whole = loader.host_box(fl, tuple((0, n) for n in shape), path)
        if on_cpus:
            # (CPU devices: jax.device_put of the whole leaf with its sharding cuts and places
            # every slice in XLA's C++: 0.6-0.8x the time of a DLPack import per slice and
            # make_array_from_single_device_arrays (bench/python/jax_sharded_cpu_cost.py).
            # Replicas may share the leaf's bytes, as jax.device_put's own do; a donating
            # computation does not write into such a buffer (tests/python/
            # test_jax_cpu_loads.py).)
            return lambda: _dtypes.jax_device_put(
                _dtypes.numpy_cast(whole(), stored, want, loader.name, path), sharding,
                loader.name, kp.join(path))

        def slices() -> Dict[Tuple[Tuple[int, int], ...], Any]:
            w = _dtypes.numpy_cast(whole(), stored, want, loader.name, path)
            return {b: np.ascontiguousarray(w[tuple(slice(lo, hi) for lo, hi in b)])
                    for _, b in per_device}
        return lambda: _assemble(loader, slices(), per_device, shape, sharding, path)
    boxes: Dict[Tuple[Tuple[int, int], ...], Thunk] = {}
    for _dev, box in per_device:
        if box not in boxes:
            boxes[box] = loader.host_box(fl, box, path)
    return lambda: _assemble(
        loader,
        {b: _dtypes.numpy_cast(g(), stored, want, loader.name, path) for b, g in boxes.items()},
        per_device, shape, sharding, path)


# Leaves up to this size split over several devices of this process (or replicated over its
# CPU devices), and wholly theirs, are read whole, once (jax_array).
SMALL_LEAF_BYTES = 1 << 20


def _assemble(loader: Any, host: Dict[Any, Any], per_device: List[Any], shape: Tuple[int, ...],
              sharding: Any, path: Tuple[Any, ...]) -> Any:
    """The global JAX array of ``shape`` and ``sharding`` from ``host``, each device's slice
    (by its box in ``per_device``) as a host array: slices of different boxes never share
    bytes (disjoint parts of a leaf at most), and each further device given the same box gets
    its own copy (a CPU device's DLPack import may keep the host bytes as they are, and a
    computation donating one shard would then write into another's)."""
    import jax  # noqa: PLC0415

    arrays, placed = [], set()
    for d, b in per_device:
        a = host[b]
        if b in placed and d.platform == "cpu":
            a = a.copy()
        placed.add(b)
        arrays.append(_to_device(loader, a, d, d, path))
    return jax.make_array_from_single_device_arrays(shape, sharding, arrays)


def _to_device(loader: Any, a: Any, device: Any, placed: Any, path: Tuple[Any, ...]) -> Any:
    """The host array ``a`` as a JAX array on ``device``: where that is a CPU device, through
    a DLPack import where it can (_device_jax.to_cpu_device: a quarter of jax.device_put's
    time), else ``jax.device_put`` to ``placed`` (``device``, or None: JAX's default
    placement, uncommitted, for a load without shardings=)."""
    if device is not None and device.platform == "cpu":
        got = _device_jax.to_cpu_device(a, device)
        if got is not None:
            return got
    return _dtypes.jax_device_put(a, placed, loader.name, kp.join(path))


# Loader.cache key of as_stored's answer for the load: the one device, or False.
_ONE_DEVICE = ("jax fast path",)


def as_stored(loader: Any, fl: FileLeaf, path: Tuple[Any, ...]) -> Optional[Thunk]:
    """The common case of Loader.array() for JAX, without the general per-leaf planning (a
    model's 873 arrays spent about half their Python there; bench/python/device_plan_cost.py):
    the whole leaf, of its stored dtype, read straight into the memory of the one device the
    load places everything on -- its ``shardings=`` a SingleDeviceSharding, or none given
    where the process has a single JAX device (jax_array's rule) -- when the direct path
    serves that device and dtype (what direct_to_devices does for it). None where the
    general path is needed."""
    device = loader.cache.get(_ONE_DEVICE)
    if device is None:
        device = loader.cache[_ONE_DEVICE] = _placement.one_jax_device(loader.o.shardings)
    if device is False:
        return None
    if device.platform == "cpu" and _device._stand_in is None:
        return _on_cpu(loader, fl, device, path)
    key = ("jax fast path", fl.dtype)
    item = loader.cache.get(key)
    if item is None:  # (asked once per dtype and load: why_not looks at the environment)
        direct = _placement.why_not_jax_direct(device, fl.dtype) is None
        item = loader.cache[key] = (_dtypes.numpy_dtype(fl.dtype, loader.name, path).itemsize
                                    if direct else 0)
    if not item:
        return None
    # (The general path's key, so that each finds what the other planned: tied leaves.)
    key = array_key(fl, NAME, fl.dtype, fl.shape, loader.o.shardings)
    thunk = loader.cache.get(key)
    if thunk is not None:
        return thunk
    shape = fl.shape
    loader.reserve_array(shape, item, path)
    dest = _device_jax.Dest(device, item * math.prod(shape))
    loader.device_requests.append((fl.index, None, dest))
    loader.device_planned(device, dest.nbytes)
    thunk = loader.cache[key] = memo(lambda: dest.array(shape, fl.dtype))
    return thunk


def _on_cpu(loader: Any, fl: FileLeaf, device: Any, path: Tuple[Any, ...]) -> Optional[Thunk]:
    """as_stored for a CPU ``device``: the whole leaf read into host memory (a view of the
    file's map where it can be), then moved as jax_array moves it (_to_device: a DLPack
    import, else ``jax.device_put`` to ``device`` for a SingleDeviceSharding, or to JAX's
    default placement without shardings=). None for a dtype DLPack does not carry into JAX
    (the general path)."""
    if fl.dtype not in _dtypes.JAX_DLPACK:
        return None
    key = array_key(fl, NAME, fl.dtype, fl.shape, loader.o.shardings)  # (the general path's)
    thunk = loader.cache.get(key)
    if thunk is not None:
        return thunk
    get = loader.stored_array(fl, _dtypes.numpy_dtype(fl.dtype, loader.name, path), path)
    placed = None if loader.o.shardings is None else device
    thunk = loader.cache[key] = memo(lambda: _to_device(loader, get(), device, placed, path))
    return thunk


def from_template(loader: Any, fl: FileLeaf, t: Any, path: Tuple[Any, ...]) -> Optional[Thunk]:
    """The common case of a JAX target (``jax.eval_shape``'s ShapeDtypeStructs, a restore's
    abstract tree) without the general per-leaf planning: a ShapeDtypeStruct of the stored
    shape and dtype with no sharding of its own is the leaf as stored, placed by
    the load's ``shardings=`` (what jax_array makes of it): :func:`as_stored`. None for
    every other target: the general path."""
    jax = sys.modules.get("jax")
    if (jax is None or not isinstance(t, jax.ShapeDtypeStruct)
            or getattr(t, "sharding", None) is not None or tuple(t.shape) != fl.shape):
        return None
    if _dtypes.name_of_numpy(t.dtype) != fl.dtype:
        return None  # (another dtype: a cast; or none jtree has: the general path's error)
    return as_stored(loader, fl, path)


def direct_to_devices(loader: Any, fl: FileLeaf, want: str, shape: Tuple[int, ...],
                      sharding: Any, per_device: List[Tuple[Any, Tuple[Tuple[int, int], ...]]],
                      path: Tuple[Any, ...]) -> Optional[Thunk]:
    """A sharded JAX leaf whose device slices are read straight into each device's memory
    (jtree._device_jax: an allocation of JAX's own per device and load, filled by the staging
    pipeline, each slice a DLPack view of it; replicas are read once per device). None where
    that path does not apply (_why_host says why): a device that is not a CUDA GPU jtree
    sees, a dtype JAX's DLPack import lacks (4-bit and 6-bit types), padding (pad_truncate)."""
    if not per_device or _why_direct_not(fl, per_device) is not None:
        return None
    import jax  # noqa: PLC0415

    item = _dtypes.numpy_dtype(fl.dtype, loader.name, path).itemsize
    cast = None if want == fl.dtype else _dtypes.numpy_dtype(want, loader.name, path)
    dests = []
    for d, box in per_device:
        bshape = tuple(e - b for b, e in box)
        loader.reserve_array(bshape, item, path)
        dest = _device_jax.Dest(d, item * math.prod(bshape))
        whole = bshape == fl.shape
        loader.device_requests.append(
            (fl.index, None if whole else ([b for b, _ in box], [e for _, e in box]), dest))
        loader.device_planned(d, dest.nbytes)
        dests.append((bshape, dest))

    single = isinstance(sharding, jax.sharding.SingleDeviceSharding)

    def build() -> Any:
        arrays = []
        for bshape, dest in dests:
            a = dest.array(bshape, fl.dtype)
            arrays.append(a if cast is None else a.astype(cast))
        if single:  # (already that array: a third of the cost of a small leaf saved)
            return arrays[0]
        return jax.make_array_from_single_device_arrays(shape, sharding, arrays)

    return build


def _why_direct_not(fl: FileLeaf, per_device: List[Tuple[Any, Tuple[Tuple[int, int], ...]]]
                    ) -> Optional[str]:
    """None when every device slice of the leaf can be read straight into device memory;
    else why not."""
    if any(e > n for _, box in per_device for (_, e), n in zip(box, fl.shape)):
        return "pad_truncate pads it"
    for d, _ in per_device:
        why = _placement.why_not_jax_direct(d, fl.dtype)
        if why is not None:
            return why
    return None


def _why_host(fl: FileLeaf, per_device: List[Tuple[Any, Tuple[Tuple[int, int], ...]]],
              path: Tuple[Any, ...]) -> str:
    """Why direct_to_devices did not take a sharded leaf (for device_options' messages)."""
    why = _why_direct_not(fl, per_device)
    return f"{kp.join(path)}: {why or 'the direct path does not take it'}"


def _slice_bounds(s: Any, n: int) -> Tuple[int, int]:
    start, stop, step = s.indices(n)
    if step != 1:
        raise InvalidArgumentError(f"sharding index with step {step}")
    return start, stop


# ---- slices of an open file (LazyArray.get) ----

def lazy_slice(lazy: Any, index: Any, placement: Any, options: Any) -> Any:
    """The elements a basic index selects of the LazyArray ``lazy`` as a JAX array: straight
    into device memory where the process has one JAX device the direct path serves
    (_device_slice), else read into host memory and placed with ``jax.device_put``,
    ``options`` then unused (a warning, or NotSupportedError, naming why; on JAX's CPU an
    InvalidArgumentError)."""
    a, why = _device_slice(lazy, index, options)
    if a is not None:
        return a
    if options is not None:
        import jax  # noqa: PLC0415

        if not _placement.is_jax_device_target(jax.devices()[0]):
            raise _device_options.not_a_device_load(_lazy_slice.where(lazy))
        _device_options.not_used(options, _lazy_slice.where(lazy), why)
    file, where = lazy._f.name, lazy.path
    out = _lazy_slice.numpy(lazy, index, _dtypes.numpy_dtype(lazy._leaf.dtype, file, where))
    return _dtypes.jax_device_put(out, None, file, where)


def _device_slice(lazy: Any, index: Any, options: Any) -> Tuple[Any, str]:
    """(the slice as a JAX array whose box of chunks was read straight into device memory,
    "") where the process has one JAX device and the direct path serves it and the dtype
    (jtree._device_jax, as loads without shardings=); else (None, why not)."""
    device, why = _placement.only_jax_device()
    if device is None:
        return None, why
    name = lazy._leaf.dtype
    why = _placement.why_not_jax_direct(device, name)
    if why is not None:
        return None, why
    begin, end, post = _lazy_slice.box(lazy, index)
    shape = tuple(e - b for b, e in zip(begin, end))
    item = _dtypes.numpy_dtype(name, lazy._f.name, lazy.path).itemsize
    _lazy_slice.check_size(lazy, shape, item)
    dest = _device_jax.Dest(device, item * math.prod(shape))
    _lazy_slice.read_to_device(lazy, begin, end, dest, options)
    a = dest.array(shape, name)
    whole = all(isinstance(p, slice) and p == slice(0, None, 1) for p in post)
    return (a if whole and len(post) == len(shape) else a[post]), ""


# ---- the native plain pass (jtree._load_plain) ----

def plain_on_host(o: Any) -> bool:
    """Whether a JAX host load takes the plain pass: no shardings= and the process's one JAX
    device a CPU (jtree._placement.only_jax_cpu_device)."""
    return o.shardings is None and _placement.only_jax_cpu_device() is not None


def host_pass(o: Any) -> PlainPass:
    """Each array read as a NumPy array of its stored dtype (a view of the file's map where it
    can be; _dtypes.jax_numpy_dtype_of_code: dtypes DLPack does not carry into JAX decline to
    the general loader, whose ``jax.device_put`` error names the leaf), moved to the one CPU
    device as jax_array moves it (_device_jax.to_cpu_device, else ``jax.device_put``).
    Copy-on-write for mmap="r" too: XLA keeps an aligned leaf's mapped bytes as they are, and a
    JAX array has no read-only flag to carry."""
    device = _placement.only_jax_cpu_device()

    def wrap(a: np.ndarray, code: int) -> Any:
        got = _device_jax.to_cpu_device(a, device)
        return got if got is not None else _dtypes.jax_device_put(a)

    return PlainPass(_dtypes.jax_numpy_dtype_of_code, wrap, MMAP_MODE[bool(o.mmap)])


def plain_device(o: Any) -> Any:
    """The one device a load places everything on (``shardings=`` a SingleDeviceSharding, or
    none where the process has one device) where it is not a CPU (the tests' host stand-in's
    CPU is), else None."""
    if o.device is not None:
        return None
    device = _placement.one_jax_device(o.shardings)
    if device is False or (device.platform == "cpu" and _device._stand_in is None):
        return None
    return device


def device_pass(o: Any, device: Any, file: str, planned: Callable[[Any, int], None],
                fill: Callable[..., bool]) -> PlainPass:
    """Each array's bytes a jtree._device_jax.Dest (placed for the whole load when it is read:
    one allocation per device), then a JAX array over them (Dest.array), as as_stored makes
    it; ``planned`` told of each. Dtypes the direct path does not take to ``device``
    (_placement.why_not_jax_direct) decline to the general loader."""
    shapes: Dict[int, Tuple[int, ...]] = {}  # id(Dest) -> its array's shape

    def dtype_of(code: int) -> Optional[np.dtype]:
        if _placement.why_not_jax_direct(device, _dtypes.NAME_OF.get(code, "")) is not None:
            return None
        return _dtypes.numpy_dtype_of_code(code)

    def new_device(shape: Tuple[int, ...], code: int) -> Any:
        n = _dtypes.TABLE[_dtypes.NAME_OF[code]][1] * math.prod(shape)
        dest = _device_jax.Dest(device, n)
        shapes[id(dest)] = shape
        planned(device, n)
        return dest

    def wrap(dest: Any, code: int) -> Any:
        return dest.array(shapes[id(dest)], _dtypes.NAME_OF[code])

    return PlainPass(dtype_of, wrap, 0, new_device=new_device, fill=fill)


ADAPTER = Adapter(NAME, target=target, settle=settle, array=array, block=block, part=part,
                  index=index, as_stored=as_stored, from_template=from_template,
                  plain_on_host=plain_on_host, host_pass=host_pass, plain_device=plain_device,
                  device_pass=device_pass, slice=lazy_slice)
