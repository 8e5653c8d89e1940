"""The call of a load: its public arguments made one checked LoadOptions (before any file is
opened), and the load of an open File's subtree with it. Every entry point that loads goes
through here: ``jtree.load`` and ``nonblocking_load`` (jtree._api, which open paths first),
``File.load``, ``Node.load`` and ``LazyArray.read`` (jtree._file). It sits below both, so that
_file.py need not import _api.py (which imports _file.py to open paths)."""
from __future__ import annotations

import inspect
from typing import Any, Dict, Tuple

from ._errors import InvalidArgumentError
from ._load import ALL, LoadOptions
from ._load_plan import Loader
from ._structure import FileNode, paused_gc

# The options a load() call may give by name: LoadOptions' (fill_out is out='s, not one).
OPTION_NAMES = frozenset(inspect.signature(LoadOptions).parameters) - {"fill_out"}


def call_options(pytree: Any, out: Any, options: Dict[str, Any],
                 caller: str = "load") -> Tuple[Any, LoadOptions]:
    """(the target, the LoadOptions) of a load call's ``pytree=``, ``out=`` and other
    options, checked: TypeError for a name no load takes (naming ``caller``), a jtree error
    for a bad value."""
    unknown = options.keys() - OPTION_NAMES
    if unknown:
        raise TypeError(f"{caller}() got unexpected options {sorted(unknown)}")
    if out is not None and pytree is not None:
        raise InvalidArgumentError("load(): give pytree= or out=, not both")
    return (out if out is not None else pytree), LoadOptions(fill_out=out is not None,
                                                             **options)


def load(f: Any, node: FileNode, path: Tuple[Any, ...], pytree: Any = None, *,
         out: Any = None, allow_full_download: bool = False, **options: Any) -> Any:
    """:func:`jtree.load` of the subtree of ``node`` (key path ``path``) of the open File
    ``f``: ``File.load``, ``Node.load``, ``LazyArray.read``. The same options
    (``allow_full_download`` has no effect: the file is open)."""
    target, o = call_options(pytree, out, options)
    with paused_gc():
        # (Paused: see _api._open_and_load.)
        return run(f, node, path, target, o)


def run(f: Any, node: FileNode, path: Tuple[Any, ...], target: Any, o: LoadOptions) -> Any:
    """The load of the subtree of ``node`` (key path ``path``) of the open File ``f`` into
    ``target`` (None: everything) with the LoadOptions ``o``, the file settings it leaves
    None taken from ``f``."""
    return Loader(f, o.take_file_settings(f)).run(node, ALL if target is None else target,
                                                  path)
