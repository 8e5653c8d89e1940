"""Where a load's arrays go: the framework, the device, and whether they are read straight into
device memory (the direct path, jtree._device) or through host memory, and why not. The one
module that decides it, so that each rule has one place and one message:

- ``device=`` / ``map_location=`` places torch tensors and implies ``framework="torch"``;
  ``shardings=`` places JAX arrays and implies ``framework="jax"``; the two never mix
  (:func:`resolve`; :func:`torch_device` for the device itself).
- The direct path serves a torch CUDA device (:func:`why_not_torch_direct`) or a JAX CUDA GPU
  (:func:`why_not_jax_direct`) when this jtree has CUDA support, its runtime sees a device and
  the environment does not turn it off (:func:`switched_off`, the one reading of
  ``JTREE_DIRECT_DEVICE_LOAD``). Under jtree._device.host_stand_in_for_tests the CPU stands
  for a GPU.
- Dtypes torch lacks go through host memory (:func:`torch_lacks`).

:func:`resolve` makes a call's arguments one :class:`LoadPlacement`, once per call (by
LoadOptions for every load, by ``jtree.open`` and by ``LazyArray.get``)."""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any, Optional, Tuple

from . import _device, _dtypes
from ._errors import InvalidArgumentError, NotSupportedError, error

# The environment switch of the direct path: "0" turns it off.
SWITCH = "JTREE_DIRECT_DEVICE_LOAD"

# The one message of "device= with JAX".
DEVICE_IS_TORCH = ("device= places torch tensors; it cannot be used with framework='jax' (JAX "
                   "arrays are placed with shardings=)")


@dataclass(frozen=True)
class LoadPlacement:
    """Where one call's arrays go: ``framework`` ("numpy", "torch" or "jax"), ``device`` (the
    torch.device of ``device=`` / ``map_location=``, or None), ``direct`` (arrays for that
    device are read straight into its memory) and ``why_not_direct`` (why they are not; "" where
    they are or no device was given). JAX's per-device answer depends on the leaf's
    dtype and device: :func:`why_not_jax_direct`."""

    framework: str
    device: Any = None
    direct: bool = False
    why_not_direct: str = ""


def resolve(framework: str, device: Any = None, map_location: Any = None,
            shardings: Any = None, frameworks: Any = ("numpy", "torch", "jax"),
            file: Optional[str] = None, key_path: Optional[str] = None) -> LoadPlacement:
    """The placement of a call's ``framework=`` (one of ``frameworks``), ``device=`` /
    ``map_location=`` and ``shardings=``, each checked (InvalidArgumentError naming ``file``
    and ``key_path`` where given): ``device=`` implies torch, ``shardings=`` implies JAX, and
    they do not mix."""
    if framework not in frameworks:
        raise error(InvalidArgumentError, file, key_path,
                    f"framework must be one of {tuple(frameworks)}, not {framework!r}")
    dev = None
    if device is not None or map_location is not None:
        dev = torch_device(device, map_location)
        if framework == "jax" or shardings is not None:
            raise error(InvalidArgumentError, file, key_path, DEVICE_IS_TORCH)
        framework = "torch"
    if shardings is not None:
        _check_shardings(framework, shardings)
        framework = "jax"
    if dev is None:
        return LoadPlacement(framework)
    why = why_not_torch_direct(dev)
    return LoadPlacement(framework, dev, not why, why)


def torch_device(device: Any, map_location: Any) -> Any:
    """The torch.device a load asked for (``device=``, or its alias ``map_location=`` as in
    torch.load), or None. Refuses both at once, the meta device (it would throw the data
    away), devices this torch cannot use, and map_location's dict and function forms."""
    if device is not None and map_location is not None:
        raise InvalidArgumentError("give device= or map_location= (its alias), not both")
    value = device if device is not None else map_location
    if value is None:
        return None
    what = "device" if device is not None else "map_location"
    try:
        import torch  # noqa: PLC0415
    except ImportError:
        raise NotSupportedError(f"{what}={value!r} places torch tensors, and torch is not "
                                f"installed") from None
    if isinstance(value, torch.device):
        dev = value
    elif isinstance(value, (str, int)) and not isinstance(value, bool):
        try:
            dev = torch.device(value)
        except (RuntimeError, TypeError, ValueError) as e:
            raise InvalidArgumentError(f"{what}={value!r} is not a torch device: {e}") from None
    else:
        raise InvalidArgumentError(
            f"{what} must be a torch.device or a device string such as 'cpu' or 'cuda:0', not "
            f"a {type(value).__qualname__} (torch.load's dict and function forms of "
            f"map_location are not supported)")
    if dev.type == "meta":
        raise InvalidArgumentError(f"{what}='meta' would throw the loaded data away; load to "
                                   f"'cpu' or an accelerator")
    if dev.type == "cpu":
        return dev
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise NotSupportedError(f"{what}={str(dev)!r}: torch.cuda is not available in this "
                                f"process (torch {torch.__version__}, no CUDA device or a "
                                f"CPU-only build)")
    try:
        torch.empty(0, device=dev)
    except Exception as e:  # noqa: BLE001  (torch raises several kinds for missing backends)
        raise NotSupportedError(f"{what}={str(dev)!r}: torch cannot place tensors there: "
                                f"{e}") from None
    return dev


def _check_shardings(framework: str, shardings: Any) -> None:
    """InvalidArgumentError where ``shardings=`` comes with torch or is not a sharding."""
    if framework == "torch":
        raise InvalidArgumentError("shardings= places JAX arrays; it cannot be used with "
                                   "framework='torch'")
    if not callable(shardings) and not is_sharding(shardings):
        raise InvalidArgumentError(
            f"shardings must be a jax.sharding.Sharding or a function (key_path, "
            f"LeafSpec) -> Sharding, not a {type(shardings).__qualname__}")


def is_sharding(x: Any) -> bool:
    """True for a jax.sharding.Sharding (what device_put and make_array_from_single_device_arrays
    take); checked without importing JAX when it is not loaded."""
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(x, jax.sharding.Sharding)


def switched_off() -> bool:
    """Whether the environment turns the direct path off (``JTREE_DIRECT_DEVICE_LOAD=0``): the
    one reading of that switch, asked at each call (tests and users set it at run time)."""
    return os.environ.get(SWITCH, "1") == "0"


def _why_not_native() -> str:
    """Why jtree itself cannot load into CUDA memory now ("" where it can): the switch, a
    build without CUDA, a runtime that sees no device."""
    if switched_off():
        return f"{SWITCH}=0 turns the direct path off"
    if not _device.cuda_built():
        return "this build of jtree has no CUDA support"
    if _device.cuda_device_count() == 0:
        return "jtree's CUDA runtime sees no device"
    return ""


def why_not_torch_direct(device: Any) -> str:
    """"" when arrays for the torch.device ``device`` take the direct path; else why not
    ("" for None too: no device; see :func:`torch_direct`)."""
    if device is None:
        return ""
    if _device._stand_in is not None and device.type == "cpu":
        return ""
    if device.type != "cuda":
        return f"the direct path serves CUDA devices, not {device.type!r}"
    if _device._stand_in is not None:
        return "the test hook serves the CPU, not CUDA devices"
    why = _why_not_native()
    if why:
        return why
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return ""


def torch_direct(device: Any) -> bool:
    """Whether arrays for the torch.device ``device`` (or None) take the direct path."""
    return device is not None and not why_not_torch_direct(device)


def why_not_jax_direct(d: Any, dtype: str) -> Optional[str]:
    """None when a ``dtype`` leaf (or slice) for JAX device ``d`` can be read straight into
    its memory; else why not (for device_options' messages)."""
    if dtype not in _dtypes.JAX_DLPACK and dtype not in _dtypes.JAX_BITCAST:
        return f"{dtype} JAX arrays are read through host memory"
    if _device._stand_in is not None:
        return (None if d.platform == "cpu"
                else f"the test hook serves CPU devices, not {d.platform!r}")
    if d.platform != "gpu":
        return f"the direct path serves CUDA GPUs, not JAX's {d.platform!r} devices"
    if "cuda" not in str(getattr(d.client, "platform_version", "")).lower():
        return f"the direct path serves CUDA GPUs; JAX's GPU runs on {d.client.platform_version!r}"
    return _why_not_native() or None


def only_jax_device() -> Tuple[Any, str]:
    """(the process's one JAX device, "") when arrays without a sharding may go straight to
    it: it has only one and no default device is configured; else (None, why not).
    jax.device_put would place an array there uncommitted, and the direct path gives committed
    arrays (jax.dlpack.from_dlpack's): with one device that is the same placement; with
    several, an uncommitted array may still move to where a computation runs, so those go
    through jax.device_put."""
    import jax  # noqa: PLC0415

    why = "JAX arrays without shardings= are placed by jax.device_put where "
    if jax.config.jax_default_device is not None:
        return None, why + "a default device is configured (give shardings= for the direct path)"
    if jax.process_count() != 1:
        return None, why + "the job has several processes (give shardings= for the direct path)"
    devices = jax.local_devices()
    if len(devices) != 1:
        return None, why + "the process has several devices (give shardings= for the direct path)"
    return devices[0], ""


def one_jax_device(shardings: Any) -> Any:
    """The JAX device every array of a load with ``shardings=`` goes to as a whole: a
    SingleDeviceSharding's, or (None) the process's only device where no default device is
    set (jax_array's rule); else False."""
    import jax  # noqa: PLC0415  (a JAX load: imported by now or for its first array)

    if shardings is None:
        only, _ = only_jax_device()
        return only if only is not None else False
    if isinstance(shardings, jax.sharding.SingleDeviceSharding):
        (device,) = shardings.device_set
        return device
    return False


def only_jax_cpu_device() -> Any:
    """The JAX device a plain JAX load puts its arrays on: the process's one device where that
    is a CPU and nothing else decides a placement (:func:`only_jax_device`: no default
    device configured, one process); else None (several devices: jax.device_put places
    uncommitted arrays, which the general loader makes; a GPU: the direct path)."""
    if _device._stand_in is not None:
        return None  # (the tests' hook: JAX's CPUs stand for GPUs, the direct path's)
    device, _ = only_jax_device()
    return device if device is not None and device.platform == "cpu" else None


def is_device_target(device: Any) -> bool:
    """Whether arrays for the torch.device ``device`` are bound for device memory (what a
    DeviceOptions applies to): a device other than the CPU (and meta); under the test hook,
    the CPU too (it then stands for a GPU)."""
    if device is None:
        return False
    if _device._stand_in is not None:
        return device.type == "cpu"
    return device.type not in ("cpu", "meta")


def is_jax_device_target(d: Any) -> bool:
    """Whether JAX device ``d`` is device memory for a DeviceOptions (as is_device_target):
    anything but a CPU device, or under the test hook, the CPU too."""
    return _device._stand_in is not None or d.platform != "cpu"


def torch_lacks(dtype: str) -> str:
    """Why a ``dtype`` leaf cannot be a torch tensor as stored ("torch has no X"), or "" where
    torch has the dtype."""
    return f"torch has no {dtype}" if dtype in _dtypes.TORCH_MISSING else ""
