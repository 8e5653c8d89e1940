"""The settings of loads into GPU memory (``jtree.DeviceOptions``) and what such a load did
(``jtree.DeviceStats``): the Python face of ``jtree::DeviceOptions`` / ``jtree::DeviceStats``
(lib/include/jtree/device.h). The values are checked by the C++ library
(``DeviceOptions::check``, ``parse_direct_io``, ``parse_zero_copy``), when the options are
made: this module only translates.

Options given to a load that does not go to a device are never silently dropped
(:func:`not_used`): a load whose arrays all go to host memory refuses them
(InvalidArgumentError); a load bound for a device that cannot take the direct path (jtree
without CUDA, ``JTREE_DIRECT_DEVICE_LOAD=0``, dtypes torch lacks...) warns, or with
``direct_io="on"`` or ``zero_copy="on"`` fails (NotSupportedError), since the arrays then come
through the page cache and host memory.
"""
from __future__ import annotations

import os
import sys
import warnings
from typing import Any, Dict, Iterable, NamedTuple, Optional

from ._errors import InvalidArgumentError, NotSupportedError

# DeviceOptions.allocation's values (jtree._device_torch applies them).
ALLOCATIONS = ("grouped", "per_tensor")

# What a device_options= that no device load can use is refused with (the load's arrays all
# go to host memory).
WHERE_IT_APPLIES = ("device_options= applies to loads into device memory: torch tensors on a "
                    "CUDA device (device='cuda:N', or out=/pytree tensors on one) or JAX arrays "
                    "sharded over GPUs (shardings=)")


class DeviceStats(NamedTuple):
    """What a load into device memory did (``jtree::DeviceStats``), over all its native loads
    (one per device): ``direct_bytes`` read with O_DIRECT straight into the pinned staging
    buffers, ``buffered_bytes`` read through the page cache (compressed chunks, slices of
    chunks, small leaves, files O_DIRECT cannot read), ``direct_io_note``, why O_DIRECT
    was not used (or stopped being used mid-load): "" when it served every piece that
    qualifies; ``zero_copy_bytes`` copied straight from the file's pages in the page cache
    (``zero_copy``), and ``zero_copy_note``, why zero copy was not used where it was asked
    for ("" when it was off or served every piece that qualifies)."""

    direct_bytes: int
    buffered_bytes: int
    direct_io_note: str
    zero_copy_bytes: int = 0
    zero_copy_note: str = ""


class DeviceOptions:
    """Settings of loads straight into GPU memory (``jtree::DeviceOptions``, docs/gpu.md),
    for :func:`jtree.load` (and ``File.load``, ``nonblocking_load``, ``LazyArray.read``) and
    ``LazyArray.get(..., device=...)``::

        opts = jtree.DeviceOptions(staging_bytes=1 << 30, staging_buffers=8, direct_io="on")
        model = jtree.load("ckpt.jtree", device="cuda:0", device_options=opts)
        print(opts.last_stats)   # DeviceStats(direct_bytes=..., buffered_bytes=..., ...)

    ``staging_bytes``: the pinned host memory a load may use per device, all buffers together
    (default 128 MiB; smaller loads pin less; the buffers are pinned as a load first needs them and
    kept for the process's next load). ``staging_buffers``: how many buffers it is cut into,
    each copied on its own stream, 1 to 64 (default 8: 2 overlap reading with copying, more
    keep the copies busy when reads come in bursts); each buffer at least 4096 bytes,
    ``staging_bytes`` at most 1 TiB. ``direct_io``: whether chunks stored raw
    (``compression=None``) are read from a local file with O_DIRECT straight into the pinned
    buffers (no page-cache copy, and the page cache is not filled with the checkpoint):
    ``"auto"`` (default) where the file system allows it and less than half of the file is
    in the page cache (a warm file is copied out of memory faster), else through the page
    cache, the reason in ``last_stats.direct_io_note``; ``"on"`` whatever the page cache
    holds, and a file O_DIRECT cannot read (a remote file, a file system refusing it, buffers
    too small for its alignment) is a :class:`NotSupportedError` naming the file; ``"off"``
    never. ``zero_copy`` (EXPERIMENTAL, default ``"off"``): whether raw chunks are copied to
    the device straight from the file's pages in the page cache (the pages registered with
    CUDA, read-only; no staging buffer and no copy into pinned memory; checksums hashed by the
    CPU meanwhile): ``"auto"`` for a local file at least half in the page cache on a device
    that can register read-only memory, else staged (the reason in
    ``last_stats.zero_copy_note``); ``"on"`` whatever the page cache holds, and a load that
    cannot (a remote file, a device without read-only registration) is a
    :class:`NotSupportedError`; ``"off"`` never. On an H200 host it was slower than the
    staging buffers (bench/gpu.md: registering the pages cost more than copying them):
    measure before turning it on.
    ``zero_copy="on"`` with ``direct_io="on"`` is refused (both claim the raw chunks).
    ``allocation``: the device memory of a load's torch tensors: ``"grouped"`` (default) makes
    all the tensors a load puts on one device views of one allocation of torch's (its caching
    allocator serves it), so that thousands of small tensors cost one allocator call, not one
    each; that memory returns to torch when the last of them is freed. ``"per_tensor"`` gives
    each tensor its own allocation, for callers who free tensors one by one. (JAX arrays are
    always grouped; tensors given as ``out=`` are filled where they are.) Bad values are an
    :class:`InvalidArgumentError` naming the setting, raised here (the C++ library's check;
    ``allocation``, which the Python layer applies, checked by it).

    ``last_stats``: the :class:`DeviceStats` of the last load made with these options
    (summed over its devices); ``None`` before the first, after a load that failed, and
    after a load that took no direct device path. Sharing one DeviceOptions
    between loads running at once is safe, but ``last_stats`` is then the last one's.

    A load given ``device_options`` must go to a device: one whose arrays all go to host
    memory (NumPy, CPU tensors, JAX without GPU shardings) is an
    :class:`InvalidArgumentError`. One bound for a device that cannot take the direct path
    (this jtree without CUDA, no device jtree sees, ``JTREE_DIRECT_DEVICE_LOAD=0``; and for
    a slice ``LazyArray.get``, a dtype torch lacks or a negative step) reads through host
    memory and ``Tensor.to``: with ``direct_io="on"`` that is a :class:`NotSupportedError`
    (O_DIRECT was asked for), else a ``RuntimeWarning`` saying why. In a load where some
    arrays take the direct path and others cannot (a dtype torch lacks, ``pad_truncate``),
    the options apply to the first and the others are read as without them.
    """

    __slots__ = ("_staging_bytes", "_staging_buffers", "_direct_io", "_zero_copy",
                 "_allocation", "last_stats")

    def __init__(self, *, staging_bytes: Optional[int] = None,
                 staging_buffers: Optional[int] = None, direct_io: str = "auto",
                 zero_copy: str = "off", allocation: str = "grouped"):
        for name, v in (("staging_bytes", staging_bytes), ("staging_buffers", staging_buffers)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
                raise InvalidArgumentError(f"{name} must be an int (or None for the default), "
                                           f"not {type(v).__name__} {v!r}")
        if staging_bytes is not None and staging_bytes < 0:
            # (The native setting is unsigned: a negative number would wrap around.)
            raise InvalidArgumentError(f"staging_bytes is {staging_bytes}; it must be positive")
        for name, v in (("direct_io", direct_io), ("zero_copy", zero_copy)):
            if not isinstance(v, str):
                raise InvalidArgumentError(f"{name} must be 'auto', 'on' or 'off', not "
                                           f"{type(v).__name__} {v!r}")
        if allocation not in ALLOCATIONS:
            raise InvalidArgumentError(f"allocation must be one of {', '.join(ALLOCATIONS)}, "
                                       f"not {allocation!r}")
        from . import _jtree  # noqa: PLC0415

        # The library's checks (DeviceOptions::check, parse_direct_io, parse_zero_copy).
        _jtree.check_device_options(staging_bytes, staging_buffers, direct_io, zero_copy)
        self._staging_bytes = staging_bytes
        self._staging_buffers = staging_buffers
        self._direct_io = direct_io
        self._zero_copy = zero_copy
        self._allocation = allocation
        self.last_stats: Optional[DeviceStats] = None

    @property
    def staging_bytes(self) -> Optional[int]:
        """Pinned host memory of a load, all buffers together (None: the default, 128 MiB)."""
        return self._staging_bytes

    @property
    def staging_buffers(self) -> Optional[int]:
        """Number of staging buffers, 1 to 64 (None: the default, 8)."""
        return self._staging_buffers

    @property
    def direct_io(self) -> str:
        """O_DIRECT reads of raw chunks: "auto", "on" or "off"."""
        return self._direct_io

    @property
    def zero_copy(self) -> str:
        """Copies of raw chunks straight from the page cache: "auto", "on" or "off"."""
        return self._zero_copy

    @property
    def allocation(self) -> str:
        """Device memory of a load's torch tensors: "grouped" or "per_tensor"."""
        return self._allocation

    def _native_kwargs(self) -> Dict[str, Any]:
        """The keyword arguments of the native ``Reader.read_to_device`` these options give."""
        return dict(staging_bytes=self._staging_bytes, staging_buffers=self._staging_buffers,
                    direct_io=self._direct_io, zero_copy=self._zero_copy)

    def __repr__(self) -> str:
        return (f"jtree.DeviceOptions(staging_bytes={self._staging_bytes!r}, "
                f"staging_buffers={self._staging_buffers!r}, direct_io={self._direct_io!r}, "
                f"zero_copy={self._zero_copy!r}, allocation={self._allocation!r})")


def checked(options: Any) -> Optional[DeviceOptions]:
    """``device_options=`` as given to a load: None or a DeviceOptions."""
    if options is None or isinstance(options, DeviceOptions):
        return options
    raise InvalidArgumentError(f"device_options must be a jtree.DeviceOptions, not "
                               f"{type(options).__qualname__}")


def combined(parts: Iterable[Dict[str, Any]]) -> DeviceStats:
    """The stats of one load made of several native loads (one per device): bytes summed, the
    distinct notes joined."""
    direct = buffered = zero_copy = 0
    notes: list = []
    zc_notes: list = []
    for p in parts:
        direct += int(p["direct_bytes"])
        buffered += int(p["buffered_bytes"])
        zero_copy += int(p["zero_copy_bytes"])
        if p["direct_io_note"] and p["direct_io_note"] not in notes:
            notes.append(p["direct_io_note"])
        if p["zero_copy_note"] and p["zero_copy_note"] not in zc_notes:
            zc_notes.append(p["zero_copy_note"])
    return DeviceStats(direct, buffered, "; ".join(notes), zero_copy, "; ".join(zc_notes))


def _caller_stacklevel() -> int:
    """The warnings.warn stacklevel of the first frame outside the jtree package (the user's
    call), however deep the load's call chain is."""
    package = os.path.dirname(os.path.abspath(__file__))
    level, frame = 1, sys._getframe(1)
    while frame is not None and os.path.dirname(
            os.path.abspath(frame.f_code.co_filename)).startswith(package):
        level += 1
        frame = frame.f_back
    return level


def not_used(options: DeviceOptions, where: str, why: str) -> None:
    """A load bound for a device went through host memory (``why``), its ``options`` unused:
    NotSupportedError with direct_io="on" (O_DIRECT was asked for) or zero_copy="on", else a
    RuntimeWarning."""
    options.last_stats = None
    msg = (f"{where}: device_options not used: {why}; the arrays were read into host memory "
           f"(through the page cache) and copied to the device")
    if options.direct_io == "on":
        raise NotSupportedError(msg + " (direct_io='on' asks for O_DIRECT reads into the "
                                      "staging buffers)")
    if options.zero_copy == "on":
        raise NotSupportedError(msg + " (zero_copy='on' asks for copies straight from the "
                                      "file's pages)")
    warnings.warn(msg, RuntimeWarning, stacklevel=_caller_stacklevel())


def not_a_device_load(where: str) -> InvalidArgumentError:
    """The error for device_options given to a load whose arrays all go to host memory."""
    return InvalidArgumentError(f"{where}: {WHERE_IT_APPLIES}; this load reads its arrays into "
                                f"host memory")


def release_pinned_memory() -> int:
    """Frees the pinned host memory that loads into GPU memory keep for the process's next load
    (their staging buffers, up to 256 MiB; ``jtree::release_pinned_memory``) and returns how
    many bytes that was: 0 when none is kept, and always without CUDA. A server that loads its
    model once calls it after the load; the next load pins its buffers again."""
    from . import _jtree  # noqa: PLC0415

    return int(_jtree.release_pinned_memory())
