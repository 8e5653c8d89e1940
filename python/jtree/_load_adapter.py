"""What the load planner (jtree._load) and its framework adapters share.

An adapter is one module (``_load_numpy``, ``_load_torch``, ``_load_jax``) that turns an array
leaf the planner chose into a thunk building that framework's array. It has:

- ``NAME``: the ``framework=`` value it serves;
- ``target(loader, t, where)``: the :class:`Placement` an array of its framework given as a
  target (``pytree`` or ``out=`` leaf) asks for, or None when ``t`` is not one of its arrays
  (checked without importing the framework: ``sys.modules``);
- ``settle(loader, fl, p, path)``: the defaults the load's options add to a placement
  (torch: ``device=``; JAX: ``shardings=``), once the planner checked dtype and shape;
- ``array(loader, fl, p, scalar, path)``: plans the whole leaf (the planner memoises the thunk);
- ``block(loader, fl, box, want, path)``: one block of a :class:`GlobalArray` target;
- ``part(loader, fl, box, want, out, path)``: the box a load's ``slices=`` names (a rank's
  shard), of dtype ``want``, into ``out`` when the load has one (jtree._shard);
- ``index(array, post)``: the rest of a ``slices=`` index once its box is read (ints that
  drop a dimension, steps).

Adapters plan through the Loader (``loader.host_box`` for NumPy host buffers,
``loader.request`` for reads into memory the adapter allocated, ``loader.reserve_array`` before
allocating, ``loader.device_requests`` for device memory, ``loader.device_planned`` after
adding one whose reading may start early) and never import jtree._load: the
planner imports them (a new framework is a new adapter module plus its line in
``jtree._load.ADAPTERS``).
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

Thunk = Callable[[], Any]


class Placement:
    """Where an array leaf goes: the framework, the dtype name wanted (None: the stored one,
    or the ``cast=`` option's), the shape, and the framework's placement (a torch device, a
    JAX sharding, a caller's ``out`` array to fill)."""

    __slots__ = ("framework", "want", "shape", "device", "sharding", "out")

    def __init__(self, framework: str, want: Optional[str], shape: Tuple[int, ...], *,
                 device: Any = None, sharding: Any = None, out: Any = None):
        self.framework = framework
        self.want = want
        self.shape = shape
        self.device = device
        self.sharding = sharding
        self.out = out


def memo(f: Thunk) -> Thunk:
    """``f`` called once, its result kept (tied leaves share one array)."""
    box: List[Any] = []

    def get() -> Any:
        if not box:
            box.append(f())
        return box[0]

    return get


def array_key(fl: Any, framework: str, want: Optional[str], shape: Tuple[int, ...],
              sharding: Any = None, device: Any = None, out: Any = None) -> Tuple[Any, ...]:
    """The key of Loader.cache under which an array leaf's thunk is kept: one leaf loaded the
    same way (tied leaves, a target naming it twice) gives one array. Loader.array() and the
    adapters' fast paths use it, so that each finds what the other planned."""
    return (fl.index, framework, want, shape, id(sharding), str(device), id(out))
