"""Loads of JAX arrays straight into GPU memory (issue 22), without torch.

JAX cannot wrap an address as an array, and an array of its own is immutable. So a load makes
one allocation per device -- jtree's own (``_jtree.device_memory``: cudaMalloc, where the
device has the room beside what XLA's allocator holds, by default 75% of it, and still keeps
NATIVE_HEADROOM free), else one of
JAX's own (zeros, all devices in one compiled call: about 100 ms per new size on a GPU) --,
the staging pipeline fills it like any destination (``jtree._device.read``), and each leaf
comes back as a view of its bytes through DLPack (``_jtree.device_array``, which keeps the
allocation alive) -- no copy on the device or the host. The allocation is freed when the last
array of the load that views it is. ``JTREE_JAX_NATIVE_ALLOCATION=0`` makes every load take
JAX's allocation (for comparisons).

With ``JTREE_DEVICE_OVERLAP=reads`` (not the default: measured slower, jtree._device.overlap),
a load larger than its staging memory reads its leaves in batches while it still plans the
rest (``jtree._device.EarlyReads``, as torch loads then do): each batch then gets jtree's own
allocation per device as soon as it is planned (:meth:`Dest.place_early`). Where jtree cannot
allocate (the device is full, or ``JTREE_JAX_NATIVE_ALLOCATION=0``) the load reads everything
not yet read after the plan, into one allocation of JAX's -- never a compiled allocation per
batch.

Under ``jtree._device.host_stand_in_for_tests`` the same planning runs for JAX's CPU device,
the allocation in host memory (``_jtree._host_memory_for_tests``, or JAX's), through the
host-memory stand-in engine.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

from . import _device, _dtypes
from ._errors import ResourceExhaustedError

# Each destination starts at a multiple of this in its allocation: what cudaMalloc guarantees,
# and more than any dtype or DMA engine needs.
ALIGN = 256

# DLPack device types.
_DL_CPU, _DL_CUDA = 1, 2


class Dest(_device.Destination):
    """The bytes of one device slice of a JAX leaf: ``nbytes`` at ``address`` in ``arena``, an
    allocation made on ``device`` for the load when it runs (:func:`place`), or for a batch
    of its leaves read while it plans (:meth:`place_early`)."""

    __slots__ = ("device", "nbytes", "arena", "address")

    def __init__(self, device: Any, nbytes: int) -> None:
        self.device = device
        self.nbytes = nbytes
        self.arena: Any = None
        self.address = 0

    @staticmethod
    def place(dests: List[Any]) -> None:
        place(dests)

    @staticmethod
    def place_early(dests: List[Any]) -> bool:
        """jtree's own memory for ``dests`` now (False where it cannot allocate it)."""
        return place(dests, native_only=True)

    def native_device(self) -> Optional[int]:
        """The CUDA ordinal jtree copies to (None: the host stand-in)."""
        return None if _device._stand_in is not None else self.device.local_hardware_id

    def array(self, shape: Tuple[int, ...], dtype: str) -> Any:
        """The filled bytes as a JAX array of ``shape`` and ``dtype`` on ``device`` (after the
        load has run): a view of the allocation, bitcast on the device for float8."""
        import jax  # noqa: PLC0415
        import jax.numpy as jnp  # noqa: PLC0415

        view = "uint8" if dtype in _dtypes.JAX_BITCAST else dtype
        if self.nbytes == 0:
            return jax.device_put(jnp.zeros(shape, _dtypes.numpy_dtype(dtype)), self.device)
        from . import _jtree  # noqa: PLC0415

        cpu = self.native_device() is None
        dl_type = _DL_CPU if cpu else _DL_CUDA
        ordinal = 0 if cpu else self.device.local_hardware_id
        a = _import(lambda: _jtree.device_array(
            self.arena, self.address, list(shape), _dtypes.code_of_name(view), dl_type, ordinal),
            dl_type, ordinal)
        # (The stand-in's arrays land on JAX's first CPU; a GPU's on the device of the ordinal,
        # this one: not asked, a few microseconds an array.)
        if cpu and a.devices() != {self.device}:
            a = jax.device_put(a, self.device)
        if view != dtype:
            a = jax.lax.bitcast_convert_type(a, _dtypes.numpy_dtype(dtype))
        return a


# (id of a JAX backend, ordinal) -> (its device, the stream of its external ready events,
# jaxlib's import, the backend): _import_target's.
_importers: Dict[Tuple[int, int], Any] = {}
# Set once this jaxlib turned out not to have what _import calls.
_import_unavailable = False


_internals: Optional[Tuple[Any, Any, int]] = None


def _jax_internals() -> Tuple[Any, Any, int]:
    """(xla_bridge, jaxlib's _jax, jaxlib's extension version): what _import_target uses,
    imported once (an import statement per call costs microseconds a leaf)."""
    global _internals
    if _internals is None:
        from jax._src import xla_bridge  # noqa: PLC0415
        from jax._src.lib import _jax, jaxlib_extension_version  # noqa: PLC0415

        _internals = (xla_bridge, _jax, jaxlib_extension_version)
    return _internals


def _import_target(dl_type: int, ordinal: int) -> Tuple[Any, Any, Any]:
    """(jaxlib's device of DLPack device type ``dl_type`` and ``ordinal``, the stream of its
    external ready events or None, ``to_buffer(capsule, device, stream)``: jaxlib's own DLPack
    import, ``_jax.dlpack_managed_tensor_to_buffer``, called as this jaxlib's signature wants
    it), looked up once per backend and ordinal: the one place that knows that call, for
    :func:`_import` and to_cpu_device. AttributeError or ImportError where this jaxlib lacks
    it."""
    xla_bridge, _jax, jaxlib_extension_version = _jax_internals()
    # (Keyed by the backend too: one made anew, after jax.clear_caches or a backend restart,
    # has devices of its own. The entry keeps its backend alive.)
    backend = xla_bridge.get_backend("cpu" if dl_type == _DL_CPU else "cuda")
    key = (id(backend), ordinal)
    known = _importers.get(key)
    if known is None:
        dev = backend.device_from_local_hardware_id(ordinal)
        try:
            stream = dev.get_stream_for_external_ready_events()
        except Exception as e:  # noqa: BLE001 (as from_dlpack: UNIMPLEMENTED is none)
            if "UNIMPLEMENTED" not in str(e):
                raise
            stream = None
        f = _jax.dlpack_managed_tensor_to_buffer
        if jaxlib_extension_version >= 467:  # (the DLPack device type is an argument since)
            def to_buffer(capsule: Any, d: Any, st: Any) -> Any:
                return f(capsule, d, st, None, dl_type)
        else:
            def to_buffer(capsule: Any, d: Any, st: Any) -> Any:
                return f(capsule, d, st, None)
        known = _importers[key] = (dev, stream, to_buffer, backend)
    return known[:3]


def _import(make: Any, dl_type: int, ordinal: int) -> Any:
    """``jax.dlpack.from_dlpack(make())``, without most of its Python: it looks up the device
    and its ready-event stream on every call and passes the result through ``jnp.asarray``
    (about 30 us an array on a CPU, where the import itself takes 5: a model's 873 arrays spent
    25 ms there). The same jaxlib call, the device and stream looked up once per load device;
    ``jnp.asarray``'s canonicalisation only where it changes the dtype (64-bit types without
    jax_enable_x64). This calls jaxlib's own function (``_jax.dlpack_managed_tensor_to_buffer``,
    jax/_src/dlpack.py's), which no public API exposes: where this jaxlib lacks it or it
    refuses the arguments, ``jax.dlpack.from_dlpack`` serves this load and every later one."""
    global _import_unavailable
    import jax  # noqa: PLC0415

    if not _import_unavailable:
        try:
            dev, stream, to_buffer = _import_target(dl_type, ordinal)
            arr = to_buffer(make().__dlpack__(stream=stream), dev, stream)
        except (ImportError, AttributeError, TypeError):
            _import_unavailable = True  # (the public function from now on)
        else:
            canonical = jax.dtypes.canonicalize_dtype(arr.dtype)
            return arr if canonical == arr.dtype else jax.numpy.asarray(arr, dtype=canonical)
    return jax.dlpack.from_dlpack(make())


# (NumPy dtype, jax_enable_x64) -> the jtree dtype code to_cpu_device imports it with, or
# None where it does not (asked once per dtype).
_cpu_codes: Dict[Tuple[Any, bool], Optional[int]] = {}
# JAX CPU device -> to_cpu_device's import into it, or None where imports do not land there
# (or this jaxlib lacks the call).
_cpu_importers: Dict[Any, Any] = {}


def to_cpu_device(a: Any, device: Any) -> Any:
    """The NumPy array ``a`` as a JAX array on the CPU device ``device``, through a DLPack
    import (jaxlib's own call, as :func:`_import` makes it, with the device and the dtype's
    checks looked up once: about 12 us an array, where ``jax.device_put`` takes about 45 on
    a CPU; a tree of 20,000 small arrays spent 2 s there); None where that does not serve,
    for the caller's ``jax.device_put``: a dtype DLPack does not carry into JAX (float8,
    int4...; not _dtypes.JAX_DLPACK), one JAX makes narrower (64-bit types without
    jax_enable_x64: the cast is device_put's), an empty or non-contiguous array, a device imports do not land on
    (:func:`_cpu_importer` checks each device once), or a jaxlib without the call. The array
    is committed to ``device`` (DLPack imports are), where ``jax.device_put(a)`` leaves it
    uncommitted there: the same placement in a process whose only device it is
    (jtree._placement.only_jax_device), and what the shards of a sharded array are anyway.
    XLA copies the bytes or, aligned, keeps them as they are: ``a`` stays alive with the
    result, and a caller placing the same bytes on several devices gives each its own copy (a
    computation that donates one shard may write into its memory)."""
    import jax  # noqa: PLC0415

    key = (a.dtype, jax.config.jax_enable_x64)
    code = _cpu_codes.get(key, -1)
    if code == -1:
        name = _dtypes.name_of_numpy(a.dtype)
        viewed = name in _dtypes.JAX_DLPACK
        code = _cpu_codes[key] = (
            _dtypes.code_of_name(name)
            if viewed and jax.dtypes.canonicalize_dtype(a.dtype) == a.dtype else None)
    if code is None or not a.size or not a.flags.c_contiguous:
        return None
    importer = _cpu_importers.get(device, False)
    if importer is False:
        importer = _cpu_importers[device] = _cpu_importer(device)
    if importer is None:
        return None
    try:
        return importer(a, code)
    except Exception:  # noqa: BLE001 (XLA's error types vary with the jaxlib version)
        # This jaxlib refuses the call or the dtype (an older one may take no bool over
        # DLPack): jax.device_put for this dtype from now on, which gives the same array.
        _cpu_codes[key] = None
        return None


def _cpu_importer(device: Any) -> Any:
    """``import(a, code)`` for to_cpu_device: ``a``'s bytes as a DLPack tensor of jtree dtype
    ``code`` (_jtree.device_array, which keeps ``a`` alive: NumPy's own export has no
    bfloat16) imported into the CPU device ``device`` (any of a process's CPU devices: the
    tensor says "CPU", jaxlib places it on the device it is given; :func:`_import_target`);
    None where this jaxlib lacks the call, or where a first import, of one float32, does not
    come back on ``device`` with its value (asked once per device)."""
    import numpy as np  # noqa: PLC0415

    from . import _jtree  # noqa: PLC0415

    ordinal = getattr(device, "local_hardware_id", None)
    if ordinal is None:
        return None
    try:
        dev, stream, to_buffer = _import_target(_DL_CPU, ordinal)
    except (ImportError, AttributeError):
        return None
    if dev != device:
        return None
    make = _jtree.device_array

    def imported(a: Any, code: int) -> Any:
        return to_buffer(
            make(a, a.ctypes.data, list(a.shape), code, _DL_CPU, 0).__dlpack__(stream=stream),
            dev, stream)

    probe = np.array([1.5], np.float32)
    try:
        got = imported(probe, _dtypes.code_of_name("float32"))
        if got.devices() != {device} or float(np.asarray(got)[0]) != 1.5:
            return None
    except Exception:  # noqa: BLE001 (XLA's error types vary with the jaxlib version)
        return None
    return imported


def place(dests: List[Dest], native_only: bool = False) -> bool:
    """Makes one allocation per device for those of ``dests`` not placed yet and gives each
    its address there (every destination at a multiple of ALIGN); True. Waits until the
    allocations exist: jtree's copies run on streams of their own. ``native_only``: only
    jtree's own allocation (what a load can make while it still plans, for its early reads:
    JAX's would compile a computation for each new size), else nothing is placed and the
    result is False."""
    by_device: Dict[Any, List[Dest]] = {}
    for d in dests:
        if d.nbytes > 0 and d.arena is None:
            by_device.setdefault(d.device, []).append(d)
    if not by_device:
        return True
    layout = {}
    for device, mine in by_device.items():
        offsets = []
        size = 0
        for d in mine:
            offsets.append(size)
            size += -(-d.nbytes // ALIGN) * ALIGN
        # (XLA aligns a GPU allocation to 256 bytes or more, its CPU ones to 64: each
        # device's first destination starts at the first multiple of ALIGN.)
        layout[device] = (offsets, size + ALIGN)
    arenas = _native_arenas({device: size for device, (_, size) in layout.items()})
    if arenas is None and native_only:
        return False
    if arenas is None:
        # (One compiled call for all the devices: each gets the largest size.)
        size = max(size for _, size in layout.values())
        try:
            arenas = allocate(list(by_device), size)
        except Exception as e:  # noqa: BLE001 (XLA's error types vary with the jaxlib version)
            if "RESOURCE_EXHAUSTED" not in str(e) and "out of memory" not in str(e).lower():
                raise
            raise ResourceExhaustedError(
                f"JAX cannot allocate {size} bytes on each of {', '.join(map(str, by_device))} "
                f"for the arrays of this load ({e})") from e
    for device, mine in by_device.items():
        arena = arenas[device]
        base = arena.address if hasattr(arena, "address") else arena.unsafe_buffer_pointer()
        base += -base % ALIGN
        for d, off in zip(mine, layout[device][0]):
            d.arena = arena
            d.address = base + off
    return True


# Bytes of each GPU that jtree's own allocations leave free (jtree::allocate_device_memory's
# keep_free): XLA allocates outside its pool too (compiled kernels, cuBLAS and cuDNN workspaces,
# NCCL communicators), and a load that took every byte beside the pool would make the next
# jit or collective fail with out of memory. Past it, the load takes JAX's allocation, inside
# the pool.
NATIVE_HEADROOM = 2 << 30


def _native_arenas(sizes: Dict[Any, int]) -> Optional[Dict[Any, Any]]:
    """``sizes[device]`` bytes on each device from jtree's native module
    (jtree::allocate_device_memory: cudaMalloc, leaving NATIVE_HEADROOM free; under the test
    hook, host memory), device -> the memory; None where a device lacks that room outside what
    JAX's allocator holds (by default XLA takes 75% of a GPU's memory when it starts), so that
    the load takes JAX's own allocation instead (:func:`allocate`). Why not always JAX's: its
    allocation is a computation compiled per size, about 100 ms for each new size on an H200
    host (bench/gpu.md), more than the rest of the load."""
    from . import _jtree  # noqa: PLC0415

    if os.environ.get("JTREE_JAX_NATIVE_ALLOCATION", "1") == "0":
        return None
    got: Dict[Any, Any] = {}
    try:
        for d, size in sizes.items():
            got[d] = (_jtree._host_memory_for_tests(size) if _device._stand_in is not None
                      else _jtree.device_memory(d.local_hardware_id, size,
                                                keep_free=NATIVE_HEADROOM))
    except ResourceExhaustedError:
        return None  # (what was allocated is freed with `got`)
    return got


# (devices, size) -> the compiled allocation (jax.jit caches its compilations per size).
_allocators: Dict[Tuple[Any, ...], Any] = {}


def allocate(devices: List[Any], size: int) -> Dict[Any, Any]:
    """``size`` bytes of JAX's own memory on each of ``devices`` (zeros: a fill costs next to
    nothing on a GPU, and XLA's uninitialised allocation does not partition over devices),
    ready: device -> a uint8 array. One compiled call for all the devices (so one compilation
    per set of devices and size, not one per device); a device whose slices need less than
    ``size`` still gets ``size``."""
    import jax  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415

    key = tuple(devices)
    f = _allocators.get(key)
    if f is None:
        if len(devices) == 1:
            sharding = jax.sharding.SingleDeviceSharding(devices[0])
            f = jax.jit(lambda n: jnp.zeros((n,), jnp.uint8), static_argnums=0,
                        out_shardings=sharding)
        else:
            import numpy as np  # noqa: PLC0415

            mesh = jax.sharding.Mesh(np.array(devices), ("jtree_load",))
            sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("jtree_load"))
            count = len(devices)
            f = jax.jit(lambda n: jnp.zeros((count, n), jnp.uint8), static_argnums=0,
                        out_shardings=sharding)
        _allocators[key] = f
    arena = f(size)
    arena.block_until_ready()
    if len(devices) == 1:
        return {devices[0]: arena}
    return {shard.device: shard.data for shard in arena.addressable_shards}
