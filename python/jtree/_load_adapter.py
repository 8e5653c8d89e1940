"""The seam between the framework-neutral loader and the frameworks: the :class:`Adapter`
interface, the :class:`Placement` of an array leaf and the :class:`PlainPass` one framework hands
the native plain pass.

Each framework is one module (``_load_numpy``, ``_load_torch``, ``_load_jax``) that ends with one
``ADAPTER = Adapter(...)``, registered by a line in ``jtree._load.ADAPTERS``: the loader (the
plan walk, jtree._load_plan; the plain pass, jtree._load_plain) reaches a framework only through
``ADAPTERS[framework]`` or the adapters' ``target`` hook, never by module name; so does an open
file's slice (``LazyArray.get``, jtree._file: the ``slice`` hook). Adding a framework is one
adapter module and its registration.

Adapters plan through the Loader (``loader.host_box`` for NumPy host buffers,
``loader.request`` for reads into memory the adapter allocated, ``loader.reserve_array`` before
allocating, ``loader.device_requests`` for device memory, ``loader.device_planned`` after
adding one whose reading may start early) and never import the loader.
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

from ._errors import NotSupportedError, error

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


# mmap= as the native plain pass's mmap_mode: 0 copies, 1 copy-on-write views, 2 read-only views.
MMAP_MODE = {False: 0, True: 1, "r": 2}


def _none(*_args: Any) -> None:
    """The default of the optional hooks: no fast path, no plain pass (the general path)."""
    return None


def _no_slice(lazy: Any, index: Any, placement: Any, options: Any) -> Any:
    """The default ``slice`` hook: a framework without one has no slices of an open file."""
    name = placement.framework
    raise error(NotSupportedError, lazy._f.name, lazy.path,
                f"framework {name!r} has no slices of an open file's arrays (its adapter has "
                f"no slice hook); read the whole leaf with .read(framework={name!r})")


class PlainPass:
    """What the native plain pass (``Reader.load_plain``, bindings/python/src/plain_load.cc)
    needs of one framework for one load, read there once per call:

    - ``dtype_of(code)``: the NumPy dtype an array of that dtype code is read as (its item
      size), or None to decline the file to the general loader;
    - ``wrap(array_or_destination, code)``: the tree's value made of a read array (host) or of
      a filled device destination; None: the NumPy array itself;
    - ``mmap_mode``: 0 new arrays, 1 copy-on-write views of the file's map, 2 read-only views;
    - ``new_device(shape, code)`` and ``fill(requests)``: for a load into device memory, each
      array's destination, then all filled at once (False declines); both None on the host;
    - ``declines_on``: the exceptions (out of device memory) that decline the load to the
      general loader instead of failing it."""

    __slots__ = ("dtype_of", "wrap", "mmap_mode", "new_device", "fill", "declines_on")

    def __init__(self, dtype_of: Callable[[int], Any], wrap: Optional[Callable[[Any, int], Any]],
                 mmap_mode: int, *, new_device: Optional[Callable[..., Any]] = None,
                 fill: Optional[Callable[[List[Any]], bool]] = None,
                 declines_on: Tuple[type, ...] = ()):
        self.dtype_of = dtype_of
        self.wrap = wrap
        self.mmap_mode = mmap_mode
        self.new_device = new_device
        self.fill = fill
        self.declines_on = declines_on


class Adapter:
    """One framework's every hook, called by the loader with the Loader (``loader``), the
    FileLeaf (``fl``), its key path parts (``path``):

    - ``name``: the ``framework=`` value it serves;
    - ``target(loader, t, where)``: the :class:`Placement` an array of its framework given as a
      target (``pytree`` or ``out=`` leaf) asks for, or None when ``t`` is not one of its
      arrays (checked without importing the framework: ``sys.modules``);
    - ``settle(loader, fl, p, path)``: the defaults the load's options add to a placement
      (torch: ``device=``; JAX: ``shardings=``), once the planner checked dtype and shape;
    - ``array(loader, fl, p, scalar, path)``: plans the whole leaf (the planner memoises it);
    - ``block(loader, fl, box, want, path)``: one block of a :class:`GlobalArray` target;
    - ``part(loader, fl, box, want, out, path)``: the box a load's ``slices=`` names, of dtype
      ``want``, into ``out`` when the load has one (jtree._shard);
    - ``index(array, post)``: the rest of a ``slices=`` index once its box is read;
    - ``as_stored(loader, fl, path)``: the leaf as stored in the load's placement, planned
      without the general per-leaf work, or None (the general path);
    - ``from_template(loader, fl, t, path)``: the same for a target of its framework of the
      stored dtype and shape, or None;
    - ``plain_on_host(o)``: whether a host load with LoadOptions ``o`` may take the native
      plain pass (the plain pass checks what every framework shares);
    - ``host_pass(o)``: the :class:`PlainPass` of such a load;
    - ``plain_device(o)``: the device a load puts every array on, whole, through the direct
      path, or None (not a device load for the plain pass);
    - ``device_pass(o, device, file, planned, fill)``: the :class:`PlainPass` of such a load
      of the file named ``file``, ``planned(device, nbytes)`` told of each destination,
      ``fill`` its ``fill``;
    - ``slice(lazy, index, placement, options)``: the elements a basic index selects of the
      LazyArray ``lazy`` (an open file's array leaf: ``LazyArray.get``, ``a[...]``) as the
      framework's array, where the call's LoadPlacement ``placement`` (jtree._placement) puts
      it, ``options`` its checked DeviceOptions or None; what every framework shares (the
      box, its size check, its read or map view, its read into device memory) is
      jtree._lazy_slice.

    ``as_stored``, ``from_template``, ``plain_device`` default to None (no fast path) and
    ``plain_on_host`` to False (no plain pass): a framework may start with the general path's
    hooks only. ``slice`` defaults to a NotSupportedError naming the framework: its loads work
    without it, and its open file's slices say so (``LazyArray.read`` still loads the leaf)."""

    __slots__ = ("name", "target", "settle", "array", "block", "part", "index", "as_stored",
                 "from_template", "plain_on_host", "host_pass", "plain_device", "device_pass",
                 "slice")

    def __init__(self, name: str, *, target: Callable[..., Optional[Placement]],
                 settle: Callable[..., None], array: Callable[..., Thunk],
                 block: Callable[..., Thunk], part: Callable[..., Thunk],
                 index: Callable[[Any, Tuple[Any, ...]], Any],
                 as_stored: Callable[..., Optional[Thunk]] = _none,
                 from_template: Callable[..., Optional[Thunk]] = _none,
                 plain_on_host: Callable[[Any], bool] = lambda o: False,
                 host_pass: Callable[[Any], PlainPass] = _none,
                 plain_device: Callable[[Any], Any] = _none,
                 device_pass: Callable[..., PlainPass] = _none,
                 slice: Callable[..., Any] = _no_slice):  # noqa: A002  (the hook's name)
        self.name = name
        self.target = target
        self.settle = settle
        self.array = array
        self.block = block
        self.part = part
        self.index = index
        self.as_stored = as_stored
        self.from_template = from_template
        self.plain_on_host = plain_on_host
        self.host_pass = host_pass
        self.plain_device = plain_device
        self.device_pass = device_pass
        self.slice = slice
