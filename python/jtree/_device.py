"""Loads straight into GPU memory (issue 22): torch tensors on a CUDA device filled by the native
staging pipeline (``jtree::read_many_to_device``: chunks read and decoded into pinned host
buffers, copied with ``cudaMemcpyAsync`` while the next ones are read), without a whole host copy
of the data first.

Whether a load takes the direct path is decided by jtree._placement (for a torch CUDA device:
this build of jtree has CUDA support (:func:`cuda_built`), jtree's CUDA runtime sees a device
(:func:`cuda_device_count`), torch sees it, and the environment variable
``JTREE_DIRECT_DEVICE_LOAD`` is not ``0``); this module does the loading. Otherwise loads fall
back to reading into host memory and ``Tensor.to(device)`` (what every load did before issue
22). ``device="cuda:N"`` where torch
itself sees no CUDA device is a NotSupportedError, raised before anything is read.

JAX arrays take the same pipeline without torch (jtree._device_jax: one allocation of JAX's own
per device, leaves as views of it).

Tests on machines without a GPU run the same planning through jtree's host-memory stand-in copy
engine: inside :func:`host_stand_in_for_tests`, loads to ``device="cpu"`` (and JAX's CPU
devices) take the direct path, their destinations being host memory (see
tests/python/test_device_load.py).
"""
import contextlib
import functools
import os
import sys
import threading
from typing import Any, Iterator, List, Optional, Sequence, Tuple

from ._errors import InvalidArgumentError, ResourceExhaustedError, error

# One queued part of a direct load: (leaf number, (begin, end) | None for the whole leaf, the
# contiguous torch tensor or the Destination it fills).
Request = Tuple[int, Optional[Tuple[List[int], List[int]]], Any]

# Set by host_stand_in_for_tests(): the counters of the stand-in engine's last load, or None
# when the hook is off.
_stand_in: Optional[dict] = None


def _native() -> Any:
    from . import _jtree  # noqa: PLC0415

    return _jtree


def cuda_built() -> bool:
    """True when this build of jtree's native module has CUDA support (False for a module built
    before issue 22, which has no such function)."""
    f = getattr(_native(), "cuda_built", None)
    return bool(f()) if f is not None else False


@functools.lru_cache(maxsize=None)
def cuda_device_count() -> int:
    """The CUDA devices jtree's own runtime can use: 0 without CUDA support, driver or device.
    (Asked once per process: it is asked for every leaf of a load to a CUDA device, and the
    devices a process sees are fixed when CUDA starts.)"""
    f = getattr(_native(), "cuda_device_count", None)
    return int(f()) if f is not None else 0


@contextlib.contextmanager
def host_stand_in_for_tests() -> Iterator[dict]:
    """TESTS ONLY. Inside the ``with`` block, loads to ``device="cpu"`` take the direct path
    through jtree's host-memory stand-in copy engine (the real planning, pinned staging buffers
    and streams, host addresses for destinations). Yields a dict that receives the engine's
    counters of the last load (``peak_pinned_bytes``, ``copies``, ``frees``...)."""
    global _stand_in
    prev, _stand_in = _stand_in, {}
    try:
        yield _stand_in
    finally:
        _stand_in = prev


class Destination:
    """A destination other than a torch tensor, whose address is known only when the load
    runs (jtree._device_jax.Dest: memory of JAX's own, allocated for the whole load at once).
    ``read`` calls ``place`` of its class once with all of a load's destinations of that class;
    then each has its ``address`` and ``native_device()`` (a CUDA ordinal; None for the host
    stand-in); until then its ``address`` is 0."""

    nbytes: int
    address: int

    @staticmethod
    def place(dests: List["Destination"]) -> None:
        raise NotImplementedError

    @staticmethod
    def place_early(dests: List["Destination"]) -> bool:
        """Gives ``dests`` their addresses now, while the load still plans, where that is
        cheap (jtree's own device memory); False, placing none of them, where it is not (they
        are then placed when the load reads them): see :func:`place_early`."""
        return False

    def native_device(self) -> Optional[int]:
        raise NotImplementedError


def nbytes(t: Any) -> int:
    """The bytes of a destination: a contiguous tensor's memory, or a Destination's."""
    return t.nbytes if isinstance(t, Destination) else t.numel() * t.element_size()


def empty(shape: Tuple[int, ...], dtype: Any, device: Any, file: Optional[str],
          where: Any) -> Any:
    """A new torch tensor on ``device`` for a load's leaf (or slice) to be read into. Out of
    device memory is ResourceExhaustedError naming the file, the key path (``where``: the
    text, or a function giving it, asked only then) and the bytes, with torch's own message
    (what the device holds) after it and as its cause."""
    import torch  # noqa: PLC0415

    try:
        return torch.empty(shape, dtype=dtype, device=device)
    except torch.cuda.OutOfMemoryError as e:  # (torch.OutOfMemoryError, any device)
        nbytes = torch.empty((), dtype=dtype, device="meta").element_size()
        for n in shape:
            nbytes *= n
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise error(ResourceExhaustedError, file, where() if callable(where) else where,
                    f"out of memory on {device} allocating {nbytes} bytes for it "
                    f"(torch: {first})") from e


def usable_out(out: Any, device: Any, dtype: Any, shape: Tuple[int, ...]) -> bool:
    """Whether the caller's ``out=`` tensor can be filled in place by the direct path: on
    ``device``, of the stored dtype and the shape, contiguous."""
    return (out is not None and out.device == device and out.dtype == dtype
            and tuple(out.shape) == tuple(shape) and out.is_contiguous())


# jtree::DeviceOptions::staging_bytes's default (device.h).
DEFAULT_STAGING_BYTES = 128 << 20


# JTREE_DEVICE_OVERLAP's values (overlap()).
OVERLAP_MODES = ("pin", "reads", "0")


def overlap() -> str:
    """What a large load to a device does while it plans (Loader.device_planned), from the
    environment variable ``JTREE_DEVICE_OVERLAP``:

    - ``pin`` (the default): its staging buffers are pinned ahead, on a native thread, while
      it plans and allocates; everything is read after the plan, in one native call.
    - ``reads``: besides, each staging memory's worth of planned requests starts being read on
      a worker thread while the plan goes on (EarlyReads). Measured slower on an H200 host
      (bench/gpu.md, 2026-11-27: 134 against 90 ms for 1 GiB to torch, 138-151 against 105 ms
      to JAX): the batches read at 10-13 GB/s where one call reads at 17-28, and the device
      allocations made meanwhile take twice as long. Kept for hosts and sources where reading
      is the slow part, and for comparisons.
    - ``0``: neither (the serial load: plan and allocate, then pin and read).

    Any other value is an InvalidArgumentError (a misspelt setting must not be ignored)."""
    mode = os.environ.get("JTREE_DEVICE_OVERLAP", "pin")
    if mode not in OVERLAP_MODES:
        raise InvalidArgumentError(
            f"JTREE_DEVICE_OVERLAP={mode!r}: the values are 'pin' (the default: pin the staging "
            "buffers ahead), 'reads' (also read while the load plans) and '0' (neither)")
    return mode


def planned(cache: dict, device: Any, nbytes: int, options: Any) -> None:
    """Notes that a load (whose per-load ``cache`` dict this is) plans ``nbytes`` more for the
    torch ``device`` on the direct path. Once it has planned half the staging memory (what
    makes its staging buffers the full-size ones; ``options``: its jtree.DeviceOptions or
    None), the buffers start being pinned on a native thread (pin_ahead), so that the rest of
    its planning and its device allocations overlap with the pinning (about 25 ms for the
    default 128 MiB on an H200 host: a quarter of a 1 GiB load; bench/gpu.md). Smaller loads
    pin what they need when they run."""
    key = ("planned bytes", device)
    before = cache.get(key, 0)
    cache[key] = after = before + nbytes
    threshold = staging_bytes(options) // 2
    if before < threshold <= after:
        pin_ahead(device, options)


def staging_bytes(options: Any) -> int:
    """The staging memory per device of a load with ``options`` (a jtree.DeviceOptions or None:
    the default)."""
    staging = options._staging_bytes if options is not None else None
    return staging if staging else DEFAULT_STAGING_BYTES


def pin_ahead(device: Any, options: Any) -> None:
    """Starts pinning the staging buffers of a coming load to ``device`` (a torch CUDA device
    or a JAX GPU) with ``options`` (jtree::pin_staging_buffers_async: a native thread;
    returns at once). Nothing under the host stand-in (its engine pins nothing)."""
    if _stand_in is not None:
        return
    kw = {} if options is None else dict(staging_bytes=options._staging_bytes,
                                         staging_buffers=options._staging_buffers)
    ordinal = getattr(device, "local_hardware_id", None)  # (a JAX device's CUDA ordinal)
    if ordinal is None:
        ordinal = _torch_native_device(device)
    _native().pin_staging_buffers_async(ordinal, **kw)


def place_early(requests: Sequence[Request]) -> bool:
    """Gives the Destinations among ``requests`` their addresses now, so that the requests
    can be read while the load still plans (EarlyReads): True when each Destination class
    placed its own (Destination.place_early; torch tensors need nothing), False when one
    declined, nothing then placed by any of them (the requests are read after the plan, when
    :func:`read` places them)."""
    by_class: dict = {}
    for _, _, t in requests:
        if isinstance(t, Destination):
            by_class.setdefault(type(t), []).append(t)
    if len(by_class) > 1:
        return False  # (one class could place and the next decline: keep it all-or-nothing)
    return all(cls.place_early(dests) for cls, dests in by_class.items())


def sync_streams(requests: Sequence[Request]) -> None:
    """Synchronizes torch's current stream of each device the torch tensors of ``requests``
    are on (none under the host stand-in): the tensors were allocated, and maybe written for
    out=, in that stream's order, and jtree copies on streams of its own. torch's current
    stream is the calling thread's: call it from the thread that allocated them."""
    if _stand_in is not None:
        return
    devices = {t.device for _, _, t in requests
               if not isinstance(t, Destination) and t.numel() > 0}
    for dev in devices:
        sys.modules["torch"].cuda.current_stream(dev).synchronize()


def read(reader: Any, requests: Sequence[Request], *, verify: bool = True, threads: int = 0,
         options: Any = None, progress: Any = None, fresh: bool = True,
         synced: bool = False) -> Any:
    """Fills the requests' destinations with one native call per device, the devices' calls
    running at once on threads of their own (each has its own staging buffers, copy engine and
    PCIe link; the file's reader and its worker threads are shared), the GIL released, with
    the settings of ``options`` (a jtree.DeviceOptions; None: the defaults; staging_bytes is
    per device). Before it, torch's current stream of each device is synchronized
    (:func:`sync_streams`; ``synced``: the caller did, in the thread that allocated the
    tensors, as EarlyReads does before its worker thread calls this), and Destinations not
    placed yet (:func:`place_early`) get their addresses (``place``). When it returns the data
    is on the devices. ``progress(done, total)`` sees bytes queued for copying, over all
    devices (never called concurrently with itself; False cancels every device's load). The
    first error stops the other devices' loads and is raised once they have ended. Returns the
    load's DeviceStats (summed over the devices), also stored in ``options.last_stats``.
    ``fresh`` False: a later batch of the same Python load (EarlyReads), whose stand-in
    counters add to the batches' before it."""
    from ._device_options import combined  # noqa: PLC0415

    # Grouped by the native target: a CUDA ordinal; under the test hook, one group per device
    # (JAX's CPU devices, torch's CPU), all served by the host stand-in (native device None).
    by_device: dict = {}
    placed: dict = {}
    for _, _, t in requests:
        if isinstance(t, Destination) and not t.address:  # (not placed early)
            placed.setdefault(type(t), []).append(t)
    for cls, dests in placed.items():
        try:
            cls.place(dests)  # (JAX's allocations for them, ready)
        except ResourceExhaustedError as e:  # (the device is full: say for which file)
            if e.file is not None:
                raise  # (it says)
            raise ResourceExhaustedError(f"{reader.name}: {e}") from e
    for leaf, box, t in requests:
        if isinstance(t, Destination):
            if t.nbytes:
                key = (t.native_device(), str(t.device) if _stand_in is not None else "")
                by_device.setdefault(key, []).append((leaf, box, t.address, t.nbytes))
            continue
        if t.numel() == 0:
            continue  # (nothing to read; and an empty tensor may have no address)
        if not t.is_contiguous():
            raise InvalidArgumentError("a direct device load needs contiguous destinations")
        key = (_torch_native_device(t.device), "torch" if _stand_in is not None else "")
        by_device.setdefault(key, []).append((leaf, box, t.data_ptr(), nbytes(t)))
    if not synced:
        sync_streams(requests)
    if options is not None:
        options.last_stats = None
    if _stand_in is not None and fresh:
        _stand_in.clear()
    groups = [(dev, reqs) for (dev, _), reqs in by_device.items()]
    total = sum(n for _, reqs in groups for _, _, _, n in reqs)
    settings = options._native_kwargs() if options is not None else {}
    lock = threading.Lock()
    stop = threading.Event()  # cancelled, or a device's load failed: the others stop too
    done = [0] * len(groups)
    first_error: List[BaseException] = []

    def report_for(i: int) -> Any:
        if progress is None and len(groups) == 1:
            return None

        def report(d: int, _total: int) -> bool:
            with lock:
                if stop.is_set():
                    return False
                done[i] = d
                if progress is None:
                    return True
                try:
                    r = progress(sum(done), total)
                except BaseException:
                    stop.set()  # (the native load re-raises it)
                    raise
                if r is not None and not r:  # (None goes on, as everywhere in jtree)
                    stop.set()
                    return False
            return True
        return report

    def one(i: int) -> dict:
        dev, reqs = groups[i]
        kw = dict(settings, verify=verify, threads=threads, progress=report_for(i))
        try:
            got = _native_load(reader, reqs, dev, kw)
        except BaseException as e:
            with lock:
                if not first_error:
                    first_error.append(e)
                stop.set()
            raise
        if _stand_in is not None:
            with lock:
                for k, v in got.items():
                    if isinstance(v, int):
                        prev = _stand_in.get(k, 0)
                        _stand_in[k] = max(prev, v) if k.startswith("peak") else prev + v
                    else:
                        _stand_in[k] = v
        return got

    if len(groups) <= 1:
        parts = [one(0)] if groups else []
    else:
        import concurrent.futures  # noqa: PLC0415  (when used: jtree._api says why)

        with concurrent.futures.ThreadPoolExecutor(len(groups),
                                                   thread_name_prefix="jtree-device") as ex:
            futures = [ex.submit(one, i) for i in range(len(groups))]
            concurrent.futures.wait(futures)
        if first_error:
            raise first_error[0]
        parts = [f.result() for f in futures]
    stats = combined(parts)
    if options is not None:
        options.last_stats = stats
    return stats


class EarlyReads:
    """The reads of a load's device requests started while the load still plans (and
    allocates the device memory of) the rest, with JTREE_DEVICE_OVERLAP=reads only
    (:func:`overlap`): planning 873 arrays and their allocations take about 36 ms of a 1 GiB
    load's 99, time the reads were meant to overlap, but on the one GPU host measured
    (bench/gpu.md, 2026-11-27) the batched reads and the allocations beside them slowed each
    other down, and the load took longer. Batches are read in the order given, one after
    the other, on one worker thread (each batch one :func:`read`; the native call releases
    the GIL, so the planning goes on meanwhile; one at a time, so the batches share the
    cached staging buffers). No batch
    starts after one has failed. :meth:`finish` reads the last batch, waits for all and raises
    the first error; a load that fails before that calls :meth:`settle` (no copy may still be
    writing into memory the failed load lets go)."""

    def __init__(self, reader: Any, verify: bool, threads: int, options: Any) -> None:
        import concurrent.futures  # noqa: PLC0415  (when used: jtree._api says why)

        self._pool = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix="jtree-early-read")
        self._futures: List[Any] = []
        self._reader, self._verify, self._threads, self._options = (reader, verify, threads,
                                                                     options)

    def submit(self, requests: List[Request]) -> None:
        """Starts reading ``requests`` once the batches before them are read (none, where one
        of those failed: finish raises its error)."""
        if not requests or any(f.done() and f.exception() is not None for f in self._futures):
            return
        # (Here, not in the worker: torch's current stream is per thread, and the caller's
        # is the one the tensors were allocated on.)
        sync_streams(requests)
        self._futures.append(self._pool.submit(
            read, self._reader, requests, verify=self._verify, threads=self._threads,
            options=self._options, fresh=not self._futures, synced=True))

    def finish(self, requests: List[Request]) -> Any:
        """Reads ``requests`` (the last batch) after the others and waits for all; raises the
        first batch's error, if any. Returns the load's DeviceStats over all the batches, also
        stored in ``options.last_stats``."""
        from ._device_options import combined  # noqa: PLC0415

        self.submit(requests)
        try:
            parts = [f.result() for f in self._futures]
        finally:
            self.settle()
        stats = combined(p._asdict() for p in parts)
        if self._options is not None:
            self._options.last_stats = stats
        return stats

    def settle(self) -> None:
        """Waits until no batch is running any more (their errors are left to finish)."""
        self._pool.shutdown(wait=True)


def _native_load(reader: Any, reqs: List[Any], device: Optional[int], kw: dict) -> dict:
    """One device's native load (``device`` None: the host stand-in engine); its stats."""
    if device is None:
        return reader._read_staged_host_for_tests(reqs, **kw)
    return reader.read_to_device(reqs, device=device, **kw)


def _torch_native_device(dev: Any) -> Optional[int]:
    """The CUDA ordinal of a torch device the direct path fills (None: the host stand-in)."""
    if _stand_in is not None:
        return None
    return dev.index if dev.index is not None else sys.modules["torch"].cuda.current_device()
