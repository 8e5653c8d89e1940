"""The JAX adapter of the load planner (jtree._load_adapter describes adapters): arrays come
back as jax.Arrays, on the default device or placed by a sharding (a target's, or the load's
``shardings=``), each device's slice read on its own -- straight into GPU memory through
jtree._device where it can."""
from __future__ import annotations

import sys
from typing import Any, Dict, List, Optional, Tuple

from . import _device, _dtypes
from . import _keypath as kp
from ._errors import InvalidArgumentError
from ._load_adapter import Placement, Thunk, dtype_name
from ._load_numpy import block as _numpy_block
from ._structure import FileLeaf

NAME = "jax"


def target(loader: Any, t: Any, where: str) -> Optional[Placement]:
    """A jax.Array or jax.ShapeDtypeStruct as a target: its dtype, shape and sharding."""
    jax = sys.modules.get("jax")
    if jax is None or not isinstance(t, (jax.Array, jax.ShapeDtypeStruct)):
        return None
    return Placement("jax", dtype_name(t.dtype, loader.name, where), tuple(t.shape),
                     sharding=getattr(t, "sharding", None))


def settle(loader: Any, fl: FileLeaf, p: Placement, path: Tuple[Any, ...]) -> None:
    """The load's ``shardings=`` for targets that name no sharding."""
    if p.sharding is None and loader.o.shardings is not None:
        s = loader.o.shardings
        p.sharding = s(kp.join(path), fl.spec()) if callable(s) else s
        if p.sharding is not None and not is_sharding(p.sharding):
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


def jax_array(loader: Any, fl: FileLeaf, want: str, shape: Tuple[int, ...], sharding: Any,
              path: Tuple[Any, ...]) -> Thunk:
    """The leaf as a JAX array of dtype ``want`` and ``shape`` (padded or truncated): on the
    default device, or (``sharding``) each device's slice read on its own."""
    import jax  # noqa: PLC0415

    stored = fl.dtype
    if sharding is None:
        loader.note_host_path(lambda: _device.is_jax_device_target(jax.devices()[0]),
                              lambda: "JAX arrays without shardings= are placed by "
                                      "jax.device_put (give shardings= for the direct path)")
        get = loader.host_box(fl, tuple((0, n) for n in shape), path)
        return lambda: _dtypes.jax_device_put(loader.numpy_cast(get(), stored, want, path),
                                              None, loader.name, kp.join(path))
    # Each device's slice is read on its own (replicas once): the global array is never
    # assembled in host memory.
    index_map = sharding.addressable_devices_indices_map(shape)
    per_device = [(dev, tuple(_slice_bounds(s, n) for s, n in zip(index, shape)))
                  for dev, index in index_map.items()]
    direct = direct_to_devices(loader, fl, want, shape, sharding, per_device, path)
    if direct is not None:
        return direct
    loader.note_host_path(lambda: any(_device.is_jax_device_target(d) for d, _ in per_device),
                          lambda: _why_host(fl, per_device, path))
    boxes: Dict[Tuple[Tuple[int, int], ...], Thunk] = {}
    for _dev, box in per_device:
        if box not in boxes:
            boxes[box] = loader.host_box(fl, box, path)

    def build() -> Any:
        host = {b: loader.numpy_cast(g(), stored, want, path) for b, g in boxes.items()}
        arrays = [_dtypes.jax_device_put(host[b], d, loader.name, kp.join(path))
                  for d, b in per_device]
        return jax.make_array_from_single_device_arrays(shape, sharding, arrays)

    return build


def direct_to_devices(loader: Any, fl: FileLeaf, want: str, shape: Tuple[int, ...],
                      sharding: Any, per_device: List[Tuple[Any, Tuple[Tuple[int, int], ...]]],
                      path: Tuple[Any, ...]) -> Optional[Thunk]:
    """A sharded JAX leaf whose device slices are read straight into each device's memory:
    a contiguous torch tensor per device filled by the staging pipeline (jtree._device),
    handed to JAX through DLPack without a copy (replicas are read once per device).
    None where that path does not apply: a device that is not a CUDA GPU jtree and torch
    both see, a dtype torch lacks, float8 (older torch and JAX versions do not pass it
    through DLPack alike), padding (pad_truncate)."""
    if fl.dtype in _dtypes.TORCH_MISSING or fl.dtype.startswith("float8") or not per_device:
        return None
    if any(e > n for _, box in per_device for (_, e), n in zip(box, fl.shape)):
        return None
    devs = [_device.torch_device_of_jax(d) for d, _ in per_device]
    if any(td is None for td in devs):
        return None
    import jax  # noqa: PLC0415
    import torch  # noqa: PLC0415

    stored_t = _dtypes.torch_dtype(fl.dtype, loader.name, kp.join(path))
    size = torch.empty((), dtype=stored_t).element_size()
    cast = None if want == fl.dtype else _dtypes.numpy_dtype(want, loader.name, path)
    tensors = []
    for (_, box), td in zip(per_device, devs):
        bshape = tuple(e - b for b, e in box)
        loader.reserve_array(bshape, size, path)
        t = torch.empty(bshape, dtype=stored_t, device=td)
        whole = bshape == fl.shape
        loader.device_requests.append(
            (fl.index, None if whole else ([b for b, _ in box], [e for _, e in box]), t))
        tensors.append(t)

    def build() -> Any:
        arrays = []
        for (d, _), t in zip(per_device, tensors):
            a = jax.dlpack.from_dlpack(t)
            if a.devices() != {d}:  # (the stand-in's host tensors land on JAX's first CPU)
                a = jax.device_put(a, d)
            arrays.append(a if cast is None else a.astype(cast))
        return jax.make_array_from_single_device_arrays(shape, sharding, arrays)

    return build


def _why_host(fl: FileLeaf, per_device: List[Tuple[Any, Tuple[Tuple[int, int], ...]]],
              path: Tuple[Any, ...]) -> str:
    """Why direct_to_devices did not take a sharded leaf (for device_options' messages)."""
    where = kp.join(path)
    if fl.dtype in _dtypes.TORCH_MISSING or fl.dtype.startswith("float8"):
        return f"{fl.dtype} JAX arrays are read through host memory ({where})"
    if any(e > n for _, box in per_device for (_, e), n in zip(box, fl.shape)):
        return f"pad_truncate pads {where}"
    for d, _ in per_device:
        if _device.torch_device_of_jax(d) is None and _device.is_jax_device_target(d):
            if d.platform != "gpu":
                return f"the direct path serves CUDA GPUs, not JAX's {d.platform!r} devices"
            try:
                import torch  # noqa: PLC0415
            except ImportError:
                return "torch is not installed (the direct path fills torch tensors for JAX)"
            return _device.why_not_direct(torch.device("cuda", d.local_hardware_id))
    return f"the direct path does not take {where}"


def is_sharding(x: Any) -> bool:
    """True for a jax.sharding.Sharding (what device_put and make_array_from_single_device_arrays
    take); checked without importing JAX when it is not loaded."""
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(x, jax.sharding.Sharding)


def _slice_bounds(s: Any, n: int) -> Tuple[int, int]:
    start, stop, step = s.indices(n)
    if step != 1:
        raise InvalidArgumentError(f"sharding index with step {step}")
    return start, stop
