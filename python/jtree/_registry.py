"""Custom node and leaf types: how a type is saved under a name and restored from it.

A *node* type has children (saved as a subtree) and auxiliary data (saved as bytes by the
registered serializer). With JAX installed, a type registered with ``jax.tree_util`` flattens
and unflattens through JAX (with its key paths); without JAX, pass ``flatten_func`` and
``unflatten_func``. A *leaf* type is saved whole as bytes.

Files name types only by their registered name: loading never imports a module named by a
file.

Dataclasses registered with JAX (``jax.tree_util.register_dataclass``, ``flax.struct.dataclass``)
need no registration here: the first save of one registers it under the name
``dataclass:<module>:<qualname>``, its ``init`` fields (data and static alike) saved as keyed
children, and a load finds the class by that name among the modules this process has already
imported (never importing one), accepting it only when it is such a dataclass.
"""
from __future__ import annotations

import dataclasses
import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from ._errors import InvalidArgumentError, error

Children = Union[List[Any], Dict[Union[str, int], Any]]


@dataclass(frozen=True)
class NodeEntry:
    cls: type
    name: str
    serialize_auxdata: Callable[[Any], Union[bytes, str]]
    deserialize_auxdata: Callable[[bytes], Any]
    flatten_func: Optional[Callable[[Any], Tuple[Children, Any]]]
    unflatten_func: Optional[Callable[[Any, Children], Any]]


@dataclass(frozen=True)
class LeafEntry:
    cls: type
    name: str
    serialize_leaf: Callable[[Any], Union[bytes, str]]
    deserialize_leaf: Callable[[bytes], Any]


_lock = threading.Lock()
_nodes_by_type: Dict[type, NodeEntry] = {}
_nodes_by_name: Dict[str, NodeEntry] = {}
_leaves_by_type: Dict[type, LeafEntry] = {}
_leaves_by_name: Dict[str, LeafEntry] = {}


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"serialized_name must be a non-empty str, not {name!r}")
    return name


def register_pytree_node_serialization(
    nodetype: Optional[type] = None, *,
    serialized_name: str,
    serialize_auxdata: Callable[[Any], Union[bytes, str]],
    deserialize_auxdata: Callable[[bytes], Any],
    flatten_func: Optional[Callable[[Any], Tuple[Children, Any]]] = None,
    unflatten_func: Optional[Callable[[Any, Children], Any]] = None,
) -> Any:
    """Registers how a pytree node type is saved: under ``serialized_name``, its auxiliary
    data through ``serialize_auxdata`` (returning bytes, or str stored as UTF-8) and
    ``deserialize_auxdata`` (given those bytes), its children as a subtree.

    The children come from ``jax.tree_util`` when the type is registered there (its key
    paths become the children's keys), or from ``flatten_func(obj) -> (children, aux_data)``
    and ``unflatten_func(aux_data, children) -> obj``, where ``children`` is a list, or a dict
    whose keys (str or int) name the children. Registering a name again replaces it.

    Usable as a decorator, also through ``functools.partial``; returns ``nodetype``.
    """
    if nodetype is None:
        return lambda cls: register_pytree_node_serialization(
            cls, serialized_name=serialized_name, serialize_auxdata=serialize_auxdata,
            deserialize_auxdata=deserialize_auxdata, flatten_func=flatten_func,
            unflatten_func=unflatten_func)
    if not isinstance(nodetype, type):
        raise InvalidArgumentError(
            f"register_pytree_node_serialization: {nodetype!r} is not a type")
    if (flatten_func is None) != (unflatten_func is None):
        raise InvalidArgumentError(
            "register_pytree_node_serialization: give both flatten_func and unflatten_func, or "
            "neither (then JAX's registration is used)")
    if flatten_func is None and "jax" not in sys.modules:
        try:
            import jax  # noqa: F401, PLC0415
        except ImportError:
            raise InvalidArgumentError(
                f"register_pytree_node_serialization({nodetype.__qualname__}): JAX is not "
                f"installed, so flatten_func and unflatten_func are needed") from None
    entry = NodeEntry(nodetype, _check_name(serialized_name), serialize_auxdata,
                      deserialize_auxdata, flatten_func, unflatten_func)
    with _lock:
        old = _nodes_by_name.pop(entry.name, None)
        if old is not None:
            _nodes_by_type.pop(old.cls, None)
        _nodes_by_type[nodetype] = entry
        _nodes_by_name[entry.name] = entry
    return nodetype


def register_pytree_leaf_serialization(
    leaftype: Optional[type] = None, *,
    serialized_name: str,
    serialize_leaf: Callable[[Any], Union[bytes, str]],
    deserialize_leaf: Callable[[bytes], Any],
) -> Any:
    """Registers a leaf type saved whole: ``serialize_leaf(obj)`` gives bytes (or str, stored
    as UTF-8), ``deserialize_leaf(data)`` rebuilds the object from those bytes. The file names
    the type by ``serialized_name``. Registering a name again replaces it.

    Usable as a decorator, also through ``functools.partial``; returns ``leaftype``.
    """
    if leaftype is None:
        return lambda cls: register_pytree_leaf_serialization(
            cls, serialized_name=serialized_name, serialize_leaf=serialize_leaf,
            deserialize_leaf=deserialize_leaf)
    if not isinstance(leaftype, type):
        raise InvalidArgumentError(
            f"register_pytree_leaf_serialization: {leaftype!r} is not a type")
    entry = LeafEntry(leaftype, _check_name(serialized_name), serialize_leaf, deserialize_leaf)
    with _lock:
        old = _leaves_by_name.pop(entry.name, None)
        if old is not None:
            _leaves_by_type.pop(old.cls, None)
        _leaves_by_type[leaftype] = entry
        _leaves_by_name[entry.name] = entry
    return leaftype


def node_for_type(t: type) -> Optional[NodeEntry]:
    return _nodes_by_type.get(t)


def node_for_name(name: str) -> Optional[NodeEntry]:
    entry = _nodes_by_name.get(name)
    if entry is None and name.startswith(DATACLASS_PREFIX):
        entry = _resolve_dataclass(name)
    return entry


# ---- dataclasses registered with JAX ---------------------------------------------------------

DATACLASS_PREFIX = "dataclass:"


class UnflattenError(Exception):
    """A node of the file does not fit the class found for it (the loader adds the file and
    key path)."""


def _init_fields(cls: type) -> Tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls) if f.init)


def _jax_registered(cls: type) -> bool:
    """True when JAX (already imported) has ``cls`` as a pytree node type."""
    if _jax() is None:
        return False
    try:
        from jax._src import tree_util as jtu  # noqa: PLC0415  (no public lookup by type)

        return cls in jtu._registry
    except (ImportError, AttributeError, TypeError):
        return True  # (another JAX layout: the class is a dataclass, checked by the caller)


def dataclass_entry(obj: Any) -> Optional[NodeEntry]:
    """The entry for ``obj`` when its class is a dataclass JAX flattens into its fields
    (``register_dataclass``, ``flax.struct.dataclass``) and jtree has no registration for it:
    made and registered on first sight. None for anything else."""
    t = type(obj)
    jax = _jax()
    if jax is None or not dataclasses.is_dataclass(t) or not _jax_registered(t):
        return None
    names = set(_init_fields(t))
    try:
        pairs, _ = jax.tree_util.tree_flatten_with_path(obj, is_leaf=lambda y: y is not obj)
    except Exception:  # noqa: BLE001  (a broken flatten: not a dataclass registration)
        return None
    for p, _ in pairs:  # the children JAX sees must be fields (a custom flatten is not ours)
        if len(p) != 1 or not isinstance(p[0], jax.tree_util.GetAttrKey) or \
                p[0].name not in names:
            return None
    return _register_dataclass(t)


def _register_dataclass(cls: type) -> NodeEntry:
    fields = _init_fields(cls)

    def flatten(obj: Any) -> Tuple[Children, Any]:
        return {f: getattr(obj, f) for f in fields}, None

    def unflatten(_aux: Any, children: Children) -> Any:
        # The class may have changed since the file was written (or the file lies): a clear
        # error naming the fields, not a TypeError from __init__.
        if not isinstance(children, dict):
            raise UnflattenError(f"dataclass {cls.__qualname__}: the file's node has unnamed "
                                 f"children; the class has fields {list(fields)}")
        extra = [k for k in children if k not in fields]
        if extra:
            raise UnflattenError(f"dataclass {cls.__qualname__} has no field {extra[0]!r}, which "
                                 f"the file holds (its fields: {list(fields)})")
        try:
            return cls(**children)
        except TypeError as e:
            raise UnflattenError(f"dataclass {cls.__qualname__} cannot be made from the file's "
                                 f"fields {list(children)}: {e}") from None

    name = f"{DATACLASS_PREFIX}{cls.__module__}:{cls.__qualname__}"
    entry = NodeEntry(cls, name, lambda _aux: b"", lambda _data: None, flatten, unflatten)
    with _lock:
        existing = _nodes_by_type.get(cls)
        if existing is not None:
            return existing
        _nodes_by_type[cls] = entry
        _nodes_by_name.setdefault(name, entry)
    return entry


def _resolve_dataclass(name: str) -> Optional[NodeEntry]:
    """The entry for a ``dataclass:<module>:<qualname>`` a file names, when that module is
    already imported and the class there is a dataclass registered with JAX (a file never
    makes this process import a module, nor build a class of any other kind)."""
    module, _, qualname = name[len(DATACLASS_PREFIX):].partition(":")
    obj: Any = sys.modules.get(module)
    if obj is None or not qualname:
        return None
    for part in qualname.split("."):
        obj = getattr(obj, part, None) if part.isidentifier() else None
        if obj is None:
            return None
    if not isinstance(obj, type) or not dataclasses.is_dataclass(obj) or \
            not _jax_registered(obj):
        return None
    entry = _register_dataclass(obj)
    return entry if entry.name == name else None


def leaf_for_type(t: type) -> Optional[LeafEntry]:
    return _leaves_by_type.get(t)


def leaf_for_name(name: str) -> Optional[LeafEntry]:
    return _leaves_by_name.get(name)


def as_bytes(value: Any, what: str, file: Optional[str], key_path: Optional[str]) -> bytes:
    """A serializer's result as bytes (str is stored as UTF-8)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    raise error(InvalidArgumentError, file, key_path,
                f"{what} returned {type(value).__name__}; it must return bytes or str")


# ---- flattening one level -------------------------------------------------------------------

def _jax():
    return sys.modules.get("jax")


def flatten_node(entry: NodeEntry, obj: Any, file: Optional[str],
                 key_path: str) -> Tuple[List[Any], Optional[List[Union[str, int]]], Any]:
    """(children, keys or None, aux_data) of a registered node."""
    if entry.flatten_func is not None:
        children, aux = entry.flatten_func(obj)
        if isinstance(children, dict):
            keys = list(children.keys())
            for k in keys:
                if type(k) not in (str, int):
                    raise error(InvalidArgumentError, file, key_path,
                                f"flatten_func of {entry.cls.__qualname__} gave a key of type "
                                f"{type(k).__name__}; keys must be str or int")
            return list(children.values()), keys, aux
        return list(children), None, aux
    jax = _jax()
    if jax is None:
        raise error(InvalidArgumentError, file, key_path,
                    f"{entry.cls.__qualname__} was registered without flatten_func, and JAX is "
                    f"not imported to flatten it")
    pairs, treedef = jax.tree_util.tree_flatten_with_path(obj, is_leaf=lambda y: y is not obj)
    if treedef.num_nodes == 1 and treedef.num_leaves == 1:
        raise error(InvalidArgumentError, file, key_path,
                    f"{entry.cls.__qualname__} is registered for serialization as "
                    f"{entry.name!r} but not as a pytree node with jax.tree_util (or pass "
                    f"flatten_func/unflatten_func)")
    _, aux = treedef.node_data()
    children = [v for _, v in pairs]
    keys = _jax_keys([p for p, _ in pairs])
    return children, keys, aux


def _jax_keys(paths: List[Tuple[Any, ...]]) -> Optional[List[Union[str, int]]]:
    jax = _jax()
    keys: List[Union[str, int]] = []
    for p in paths:
        if len(p) != 1:
            return None
        e = p[0]
        if isinstance(e, jax.tree_util.GetAttrKey):
            keys.append(e.name)
        elif isinstance(e, jax.tree_util.DictKey) and type(e.key) in (str, int):
            keys.append(e.key)
        else:
            return None
    return keys if len(set(keys)) == len(keys) else None


def unflatten_node(entry: NodeEntry, aux: Any, children: List[Any],
                   keys: Optional[List[Union[str, int]]]) -> Any:
    if entry.unflatten_func is not None:
        arg: Children = dict(zip(keys, children)) if keys is not None else list(children)
        return entry.unflatten_func(aux, arg)
    jax = _jax()
    if jax is None:
        import jax  # noqa: PLC0415  (registered without flatten_func: JAX was there then)
    tu = jax.tree_util
    leaf = tu.tree_structure(0)
    treedef = tu.PyTreeDef.from_node_data_and_children(
        tu.default_registry, (entry.cls, aux), [leaf] * len(children))
    return tu.tree_unflatten(treedef, children)


def is_jax_node(obj: Any) -> bool:
    """True when JAX is imported and treats ``obj`` as a pytree node (not a leaf)."""
    jax = _jax()
    if jax is None:
        return False
    try:
        treedef = jax.tree_util.tree_structure(obj, is_leaf=lambda y: y is not obj)
    except Exception:  # noqa: BLE001  (a broken flatten: not ours to report here)
        return False
    return not (treedef.num_nodes == 1 and treedef.num_leaves == 1)
