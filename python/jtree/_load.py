"""What a load is, shared by its rooms: the framework registry (``ADAPTERS``), the checked
options of one load (:class:`LoadOptions`), and the containers a load rebuilds
(:func:`rebuild_container`, :func:`spec_tree`, :func:`container_builder`).

A load runs through these modules: jtree._load_call (the entry points' options) ->
jtree._load_plan.Loader (the walk of the file's tree beside the target; a whole load as stored
goes to the native plain pass, jtree._load_plain) -> jtree._load_arrays (where each array leaf
goes, handed to its framework's adapter, jtree._load_adapter) -> jtree._load_exec (the queued
reads, the memory budget, the read). Leaves that are not chosen are never read.
"""
from __future__ import annotations

import collections
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import _device_options, _placement, _registry
from . import _torch_values as _tv
from . import _keypath as kp
from ._errors import InvalidArgumentError, NotSupportedError, error
from . import _load_jax, _load_numpy, _load_torch
from ._load_adapter import Thunk
from ._progress import progress_callback
from ._shard import Slices
from ._structure import (CUSTOM, DICT, LEAF, LEAF_KIND_NAMES, LIST, NAMEDTUPLE, NONE,
                         ORDEREDDICT, TUPLE, FileNode, LeafSpec, allow_deep_trees,
                         namedtuple_type, paused_gc, spec_dtype_of)

# The framework adapters (jtree._load_adapter): what framework= may name, and who plans it.
# A new framework is its adapter module and its entry here.
ADAPTERS = {a.name: a for a in (_load_numpy.ADAPTER, _load_torch.ADAPTER, _load_jax.ADAPTER)}
FRAMEWORKS = ADAPTERS.keys()  # (a live view: a registered adapter is a framework)
MMAP_MODES = (True, False, "r")


class _All:
    """The target meaning 'everything below, as stored'."""

    def __repr__(self) -> str:
        return "ALL"


ALL = _All()


def PRUNED() -> Any:  # noqa: N802  (a marker named as a constant)
    """The plan of a subtree ``prune=True`` leaves out (never called: containers drop it)."""
    return None


def key_paths(root: FileNode, path: Tuple[Any, ...], limit: int = 200_000) -> List[str]:
    """The key paths of every node below ``root`` (at most ``limit``), for error messages."""
    out: List[str] = []
    stack = [(root, path)]
    while stack and len(out) < limit:
        node, p = stack.pop()
        if p:
            out.append(kp.join(p))
        if node.kind not in (LEAF, NONE):
            stack.extend(reversed([(c, p + (c.key if c.key is not None else i,))
                                   for i, c in enumerate(node.children)]))
    return out


def const(v: Any) -> Thunk:
    """The plan of a value known now (a scalar leaf, None)."""
    return lambda: v


def rebuild_container(kind: int, type_name: Optional[str], aux: Optional[bytes],
                      keys: Sequence[Any], children: List[Any], *, strict: bool,
                      nt_class: Optional[type] = None, file: Optional[str] = None,
                      key_path: str = "", framework: str = "numpy") -> Any:
    """The Python container for a file node, given its (already built) children (a
    torch.Size node unregistered here: a torch.Size for ``framework="torch"``, else a tuple)."""
    if kind == DICT:
        return dict(zip(keys, children))
    if kind == ORDEREDDICT:
        return collections.OrderedDict(zip(keys, children))
    if kind == LIST:
        return list(children)
    if kind == TUPLE:
        return tuple(children)
    if kind == NAMEDTUPLE:
        if nt_class is None:
            try:
                nt_class = namedtuple_type(type_name or "NamedTuple", tuple(keys))
            except ValueError as e:
                raise error(NotSupportedError, file, key_path,
                            f"namedtuple {type_name} with fields {tuple(keys)}: {e}, so Python "
                            f"cannot rebuild it as a namedtuple (jtree.open reads its "
                            f"children by key path; a mask can skip it)") from None
        return nt_class(*children)
    if kind == CUSTOM:
        entry = _registry.node_for_name(type_name or "")
        keyed = bool(keys) and keys[0] is not None
        if entry is None and type_name in _tv.NODES:
            return _tv.build_node(type_name, children, framework, file, key_path)
        if entry is None:
            if strict:
                raise unregistered_node(type_name, file, key_path)
            return dict(zip(keys, children)) if keyed else list(children)
        aux_value = entry.deserialize_auxdata(aux or b"")
        try:
            return _registry.unflatten_node(entry, aux_value, children,
                                            list(keys) if keyed else None)
        except _registry.UnflattenError as e:
            raise error(InvalidArgumentError, file, key_path, str(e)) from None
    raise AssertionError(f"not a container kind: {kind}")


def unregistered_node(type_name: Optional[str], file: Optional[str], key_path: str):
    if (type_name or "").startswith(_registry.DATACLASS_PREFIX):
        module, _, qualname = type_name[len(_registry.DATACLASS_PREFIX):].partition(":")
        return error(NotSupportedError, file, key_path,
                     f"the file holds a dataclass {qualname!r} of module {module!r} (registered "
                     f"with JAX when saved): import that module before loading (jtree never "
                     f"imports a module a file names), register the class with "
                     f"jtree.register_pytree_node_serialization(cls, serialized_name="
                     f"{type_name!r}, ...), or pass strict=False to load it as a dict")
    return error(NotSupportedError, file, key_path,
                 f"the file holds a custom node {type_name!r} that is not registered in this "
                 f"process: register it with jtree.register_pytree_node_serialization("
                 f"cls, serialized_name={type_name!r}, ...), or pass strict=False to load it "
                 f"as a plain dict or list")


def spec_tree(node: FileNode, *, strict: bool, file: Optional[str]) -> Any:
    """The file's structure with a LeafSpec in place of each leaf (load_pytreedef, File.structure)
    of the root ``node``: built by the native Reader in one pass (Reader.spec_tree,
    bindings/python/src/spec_tree.cc, the one structure-to-spec builder of a file), whatever
    of the file's FileNodes are made; only the containers that need Python (named tuples,
    OrderedDict, custom nodes) come back here."""
    assert node.index == 0 and node._tree is not None, "spec_tree is of a file's root"
    allow_deep_trees()
    with paused_gc():
        return node._tree.reader.spec_tree(LeafSpec, LEAF_KIND_NAMES, spec_dtype_of,
                                           container_builder(strict, file))


def container_builder(strict: bool, file: Optional[str],
                      framework: str = "numpy") -> Callable[..., Any]:
    """The ``container(kind, type_name, aux, keys, values, key_path_parts)`` callback of the
    native tree walks (Reader.spec_tree, Reader.load_plain): the containers that need Python
    (named tuples, OrderedDict, custom nodes), by rebuild_container's rules."""
    def container(kind: int, type_name: Optional[str], aux: Optional[bytes],
                  keys: List[Any], values: List[Any], parts: Tuple[Any, ...]) -> Any:
        return rebuild_container(kind, type_name, aux, keys, values, strict=strict,
                                 file=file, key_path=kp.join(parts), framework=framework)
    return container


def checked_mmap(mmap: Any) -> None:
    """InvalidArgumentError unless ``mmap=`` is one of MMAP_MODES (None: the File's, checked
    there)."""
    if mmap is not None and (mmap not in MMAP_MODES
                             or isinstance(mmap, int) and not isinstance(mmap, bool)):
        raise InvalidArgumentError(f"mmap must be True (copy-on-write views of the file), "
                                   f"'r' (read-only views) or False (copies), not {mmap!r}")


class LoadOptions:
    """The options of one load, checked: built once per call from the public arguments
    (jtree._load_call.call_options, for every entry point that loads) and passed down to the
    Loader and the plain pass. Its keyword arguments are the one list of load options. The
    five file settings (``allow_pickle``, ``strict``, ``verify``, ``threads``, ``mmap``) left
    None are the open File's, taken by :meth:`take_file_settings` once the file is open."""

    def __init__(self, *, keys: Any = None, framework: str = "numpy", cast: Any = None,
                 pad_truncate: bool = False, allow_pickle: Optional[bool] = None,
                 strict: Optional[bool] = None, verify: Optional[bool] = None,
                 threads: Optional[int] = None, device: Any = None, map_location: Any = None,
                 shardings: Any = None, mmap: Any = None, prune: bool = False,
                 progress: Any = False, device_options: Any = None, slices: Any = None,
                 fill_out: bool = False):
        # Where its arrays go (framework, device, direct path or not), decided once.
        self.placement = _placement.resolve(framework, device, map_location, shardings,
                                            ADAPTERS)
        self.framework, self.device = self.placement.framework, self.placement.device
        self.adapter = ADAPTERS[self.framework]  # (its arrays' planner, jtree._load_adapter)
        checked_mmap(mmap)
        self.mmap = mmap
        self.cast = cast
        self.pad_truncate = pad_truncate
        self.allow_pickle = allow_pickle
        self.strict = strict
        self.verify = verify
        self.threads = threads
        self.shardings = shardings
        self.keys = kp.PatternSet(keys) if keys is not None else None
        # fill_out: the target is out= (its arrays filled in place), not pytree=.
        self.fill_out = fill_out
        # prune: dicts drop the entries not loaded (no skeleton of Nones); see Loader.plan.
        self.prune = bool(prune)
        self.progress = progress_callback(progress, "load")
        # Settings of the loads into device memory (jtree.DeviceOptions), or None.
        self.device_options = _device_options.checked(device_options)
        # What part of each array leaf is read (jtree._shard: a rank's shard), or None.
        if slices is not None and shardings is not None:
            raise InvalidArgumentError("slices= reads parts of leaves as they are; shardings= "
                                       "places whole JAX arrays: give one of them")
        self.slices = Slices(slices) if slices is not None else None

    def file_settings(self) -> Dict[str, Any]:
        """The file settings this load gives (not None): what opening its path takes."""
        return {k: v for k, v in (("verify", self.verify), ("threads", self.threads),
                                  ("allow_pickle", self.allow_pickle),
                                  ("strict", self.strict), ("mmap", self.mmap))
                if v is not None}

    def take_file_settings(self, f: Any) -> "LoadOptions":
        """Fills the file settings left None with the open File ``f``'s; returns self."""
        if self.verify is None:
            self.verify = f.verify_checksums
        if self.threads is None:
            self.threads = f.threads
        if self.allow_pickle is None:
            self.allow_pickle = f.allow_pickle
        if self.strict is None:
            self.strict = f.strict
        if self.mmap is None:
            self.mmap = f.mmap
        return self
