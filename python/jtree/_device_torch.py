"""Where a load's torch tensors bound for device memory live: by default all of one load's
tensors on one device are views of one allocation (``Slot``), as fastsafetensors and
safetensors' prefetch make them, so that 4,000 small tensors cost one allocator call and
4,000 views instead of 4,000 allocator calls (in a fresh process, each new block of torch's
caching allocator is a cudaMalloc). The allocation is torch's own (``torch.empty``: the
caching allocator serves and keeps it), freed when the last of its tensors is.
``DeviceOptions(allocation="per_tensor")`` gives each tensor its own allocation instead, for
callers who free tensors one by one (grouped, a freed tensor's memory returns only with the
rest of its load's). This module owns that choice for the torch loads of the direct path
(jtree._load_plain's native pass and jtree._load_torch's planner).
"""
from __future__ import annotations

import sys
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from . import _device, _dtypes

# Offsets of the tensors in a grouped allocation are multiples of this: every dtype's
# alignment, and the alignment CUDA gives its own allocations.
ALIGN = 256

Where = Union[str, Callable[[], str]]


class Slot(_device.Destination):
    """One tensor of a load (``shape``, torch ``dtype``, ``nbytes``) on torch ``device``,
    whose memory is placed when the load reads it (:meth:`place`): a view of its load's one
    allocation on that device. ``tensor()`` is the tensor, once placed."""

    __slots__ = ("device", "shape", "dtype", "nbytes", "arena", "own", "offset", "address",
                 "file", "where")

    def __init__(self, device: Any, shape: Tuple[int, ...], dtype: Any, nbytes: int,
                 file: Optional[str], where: Where) -> None:
        self.device = device
        self.shape = shape
        self.dtype = dtype
        self.nbytes = nbytes
        self.arena: Any = None  # the load's allocation (uint8), or this tensor's own
        self.own = False  # (arena is this tensor)
        self.offset = 0
        self.address = 0
        self.file = file  # for errors: the file, and the key path (or a function giving it)
        self.where = where

    @staticmethod
    def place(dests: List[Any]) -> None:
        place(dests)

    @staticmethod
    def place_early(dests: List[Any]) -> bool:
        """Placed now (torch allocates at once, on the planning thread)."""
        place(dests)
        return True

    def native_device(self) -> Optional[int]:
        return _device._torch_native_device(self.device)

    def tensor(self) -> Any:
        """The tensor (after the load has read it; an empty one needs no placing)."""
        torch = sys.modules["torch"]
        if self.nbytes == 0:
            return torch.empty(self.shape, dtype=self.dtype, device=self.device)
        if self.own:
            return self.arena
        return (self.arena[self.offset:self.offset + self.nbytes].view(self.dtype)
                .view(self.shape))


def new(device: Any, shape: Tuple[int, ...], dtype: Any, options: Any, file: Optional[str],
        where: Where) -> Any:
    """A destination of ``shape`` and torch ``dtype`` on ``device`` for a direct load: a
    :class:`Slot`, grouped with the load's others when it is read, or with
    ``options.allocation == "per_tensor"`` a tensor of its own now (jtree._device.empty)."""
    if options is not None and options.allocation == "per_tensor":
        return _device.empty(shape, dtype, device, file, where)
    nbytes = _dtypes.torch_itemsize(dtype)
    for n in shape:
        nbytes *= n
    return Slot(device, shape, dtype, nbytes, file, where)


def value(dest: Any) -> Any:
    """The tensor a destination made by :func:`new` holds once the load has read it."""
    return dest.tensor() if isinstance(dest, Slot) else dest


def place(dests: List[Slot]) -> None:
    """Gives every slot its memory: one torch allocation per device for all of them, each a
    view at an aligned offset. Where the device has no room for that one allocation but may
    have for the parts (its free memory in pieces), each slot gets its own; out of memory
    even so is ResourceExhaustedError naming the file and the leaf (jtree._device.empty)."""
    torch = sys.modules["torch"]
    by_device: Dict[Any, List[Slot]] = {}
    for s in dests:
        if s.nbytes:
            by_device.setdefault(s.device, []).append(s)
    for device, slots in by_device.items():
        total = 0
        for s in slots:
            s.offset = total
            total += -(-s.nbytes // ALIGN) * ALIGN
        try:
            arena = torch.empty(total, dtype=torch.uint8, device=device)
        except torch.cuda.OutOfMemoryError:  # (torch.OutOfMemoryError, any device)
            arena = None
        for s in slots:
            if arena is None:
                s.arena = _device.empty(s.shape, s.dtype, device, s.file, s.where)
                s.own = True
                s.offset = 0
                s.address = s.arena.data_ptr()
            else:
                s.arena = arena
                s.address = arena.data_ptr() + s.offset
        if device.type == "cuda" and _device._stand_in is None:
            # (The memory may be a block torch freed while its current stream still used it;
            # jtree copies on streams of its own.)
            torch.cuda.current_stream(device).synchronize()
