"""The plain load: ``jtree.load(f)`` / ``File.load()`` of a whole file (or of a part of it,
``jtree.load(f["params"])``) with no cast, target or progress (the call made most), a ``keys=``
selection allowed (with or without prune), done in one native pass (``Reader.load_plain``,
bindings/python/src/plain_load.cc; a selection's rules in node_selection.h, its patterns the
same jtree::KeyPathPatterns the general loader asks) instead of the general loader's plan of a
Python frame, thunk and reservation per leaf (jtree._load_plan). Same rules, same result; where
the file needs more (pickled or custom leaves loaded, a dtype the framework lacks, the memory
limits, a damaged str) the native pass declines and the general loader loads it.

This module decides what every framework shares; the load's adapter (``o.adapter``,
jtree._load_adapter) says whether its framework takes the pass and hands the native pass one
:class:`~jtree._load_adapter.PlainPass`: on the host, NumPy arrays (torch tensors over them
on the CPU with the memory map on; JAX arrays where the process's one JAX device is a CPU);
to a device the direct path serves, arrays in its memory filled by jtree._device."""
from __future__ import annotations

import functools
from typing import Any, List, Optional, Tuple

from . import _device


def applies(o: Any) -> bool:
    """Whether a load with LoadOptions ``o`` is a plain one (the caller checks that the target
    is everything, of the file or of one node's subtree): no slices=, cast=, out=, progress=,
    a keys= selection with or without prune (prune alone, which selects everything, takes the
    general loader), and either a device load (:func:`_device_target`) or a host load the
    adapter takes (``plain_on_host``) without device_options or shardings=."""
    if (o.slices is not None or o.cast is not None or (o.keys is None and o.prune)
            or o.fill_out or o.progress is not None):
        return False
    if _device_target(o) is not None:
        return True
    return (o.adapter.plain_on_host(o) and o.device_options is None
            and o.shardings is None)


def _device_target(o: Any) -> Any:
    """The device a load with LoadOptions ``o`` puts every array on, whole, through the direct
    path (the adapter's ``plain_device``); None for every other load, and with
    JTREE_DEVICE_OVERLAP=reads, whose reads while planning only the general loader does (a
    setting this pass would ignore)."""
    device = o.adapter.plain_device(o)
    return device if device is not None and _device.overlap() != "reads" else None


def load(reader: Any, container: Any, o: Any, node: int = 0,
         path: Tuple[Any, ...] = ()) -> Optional[Tuple[Any, List[int]]]:
    """``(tree, [])``: the file of the native ``reader`` loaded (the subtree of ``node``,
    whose key path is ``path``; what ``o.keys`` selects of it), containers other than dicts,
    lists and tuples made by ``container`` (jtree._load.container_builder); ``(None,
    numbers)`` when keys= patterns match nothing (nothing read: the caller's NotFoundError
    names them); None when the general loader must load it."""
    keys = o.keys.native if o.keys is not None else None
    device = _device_target(o)
    if device is not None:
        return _load_to_device(reader, container, o, device, keys, node, path)
    return reader.load_plain(o.adapter.host_pass(o), container, o.verify, o.threads, keys,
                             o.prune, node, path)


def _not_planned(device: Any, nbytes: int) -> None:
    """The ``planned`` of a load with JTREE_DEVICE_OVERLAP=0: no staging pinned ahead."""


def _load_to_device(reader: Any, container: Any, o: Any, device: Any, keys: Any, node: int,
                    path: Tuple[Any, ...]) -> Optional[Tuple[Any, List[int]]]:
    """:func:`load` to ``device`` (:func:`_device_target`): the tree planned and its device
    destinations made in the native pass, filled by one jtree._device.read (pinned staging,
    the GIL released; the staging buffers pinned ahead once half their size is planned, as
    the general loader's Loader.device_planned does), then made the tree's values. Out of
    device memory while allocating (the PlainPass's ``declines_on``), and a load with
    device_options but no array (the general loader's error for device_options it cannot
    use), decline to the general loader, which raises its own clear error naming the leaf or
    the setting."""
    # (A partial, not a closure: the adapter's callback goes straight to _device.)
    planned = (functools.partial(_device.planned, {}, options=o.device_options)
               if _device.overlap() != "0" else _not_planned)

    def fill(requests: List[Any]) -> bool:
        if o.device_options is not None and not requests:
            return False
        _device.read(reader, requests, verify=o.verify, threads=o.threads,
                     options=o.device_options)
        return True

    plain = o.adapter.device_pass(o, device, reader.name, planned, fill)
    try:
        return reader.load_plain(plain, container, o.verify, o.threads, keys, o.prune, node,
                                 path)
    except plain.declines_on:
        return None
