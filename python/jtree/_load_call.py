"""The call of a load on an open File: ``load()``'s options, checked and passed on, shared by
``jtree.load`` (jtree._api, which opens paths first) and ``File.load`` / ``Node.load`` /
``LazyArray.read`` (jtree._file). It sits below both, so that _file.py need not import _api.py
(which imports _file.py to open paths)."""
from __future__ import annotations

from typing import Any, Dict, Tuple, Union

from ._errors import InvalidArgumentError
from ._load import ALL, Loader, LoadOptions
from ._structure import FileNode, paused_gc

# The options of jtree.load (and nonblocking_load) that are passed on to the Loader.
LOAD_OPTIONS = ("keys", "framework", "cast", "pad_truncate", "allow_pickle", "strict", "verify",
                "device", "map_location", "device_options",
                "threads", "shardings", "mmap", "prune", "progress", "slices")


def load_options(*, out: Any, pytree: Any, keys: Any, framework: str, cast: Any,
                 pad_truncate: bool, allow_pickle: Any, strict: Any, verify: Any, threads: Any,
                 device: Any, map_location: Any, shardings: Any, mmap: Union[bool, str, None],
                 prune: bool, progress: Any, device_options: Any = None,
                 slices: Any = None) -> Dict[str, Any]:
    """The options of a load() call as the Loader takes them, checked (bad options are
    reported before the file is opened); None for the five the File sets means its setting."""
    if out is not None and pytree is not None:
        raise InvalidArgumentError("load(): give pytree= or out=, not both")
    options = dict(keys=keys, framework=framework, cast=cast, pad_truncate=pad_truncate,
                   shardings=shardings, prune=prune, progress=progress)
    if device is not None or map_location is not None:
        options.update(device=device, map_location=map_location)
    if device_options is not None:
        options.update(device_options=device_options)
    if slices is not None:
        options.update(slices=slices)
    # None: the File's setting (or the default).
    options.update({k: v for k, v in dict(allow_pickle=allow_pickle, strict=strict,
                                          verify=verify, threads=threads,
                                          mmap=mmap).items() if v is not None})
    LoadOptions(**options)
    return options


def load_subtree(f: Any, node: FileNode, path: Tuple[Any, ...], pytree: Any,
                 fill_out: bool = False, **options: Any) -> Any:
    """load() of one subtree of an open file (a jtree.File)."""
    opts = f._options(fill_out=fill_out, **options)
    return Loader(f, opts).run(node, ALL if pytree is None else pytree, path)


def load(f: Any, pytree: Any = None, *, keys: Any = None,
         framework: str = "numpy", cast: Any = None, pad_truncate: bool = False,
         out: Any = None, allow_pickle: Any = None, strict: Any = None,
         verify: Any = None, threads: Any = None,
         device: Any = None, map_location: Any = None,
         shardings: Any = None, mmap: Union[bool, str, None] = None, prune: bool = False,
         progress: Any = False, allow_full_download: bool = False,
         device_options: Any = None, slices: Any = None) -> Any:
    """:func:`jtree.load` of an open File ``f`` (``File.load``): the same options
    (``allow_full_download`` has no effect: the file is open)."""
    options = load_options(out=out, pytree=pytree, keys=keys, framework=framework, cast=cast,
                           pad_truncate=pad_truncate, allow_pickle=allow_pickle, strict=strict,
                           verify=verify, threads=threads, device=device,
                           map_location=map_location, shardings=shardings, mmap=mmap,
                           prune=prune, progress=progress, device_options=device_options,
                           slices=slices)
    with paused_gc():
        # (Paused: see _api._open_and_load.)
        return load_subtree(f, f._root, (), out if out is not None else pytree, out is not None,
                            **options)
