"""The plan of a load: the walk of the file's tree beside the target (checked to match,
``keys=`` applied, containers planned, non-array leaves read as payloads), then the read and
the build (:meth:`Loader.run`). A whole load as stored goes to the native plain pass
(jtree._load_plain) first; array leaves are planned by jtree._load_arrays, the queues
executed by jtree._load_exec.
"""
from __future__ import annotations

import collections.abc
import pickle
from typing import Any, List, Optional, Tuple

import numpy as np

from . import _load_plain, _registry
from . import _torch_values as _tv
from . import _keypath as kp
from ._errors import (CorruptionError, Error, InvalidArgumentError, NotFoundError,
                      NotSupportedError, ResourceExhaustedError, error)
from ._load import (ALL, PRUNED, LoadOptions, const, container_builder, key_paths,
                    rebuild_container, spec_tree, unregistered_node)
from ._load_adapter import Thunk, memo
from ._load_arrays import ArrayPlanner
from ._progress import TerminalBar
from ._structure import (ARRAY, BOOL, BYTEARRAY, BYTES, COMPLEX, CUSTOM, CUSTOM_LEAF, DICT,
                         FLOAT, INT, LEAF, LIST, NAMEDTUPLE, NODE_KIND_NAMES, NONE,
                         ORDEREDDICT, PICKLE, STR, TUPLE, FileLeaf, FileNode, LeafSpec,
                         allow_deep_trees, paused_gc)


class Loader(ArrayPlanner):
    """One load: plan (``plan``), read (``read``), build (the returned thunk)."""

    def __init__(self, file: Any, opts: LoadOptions):
        super().__init__(file, opts)
        if isinstance(opts.progress, TerminalBar):
            opts.progress.label = f"load {self.name}"
        # The keys= patterns that matched nothing yet (reported once the plan is made).
        self.pending = set(range(len(opts.keys))) if opts.keys is not None else None

    def run(self, root: FileNode, target: Any, path: Tuple[Any, ...] = ()) -> Any:
        allow_deep_trees()
        try:
            # (Paused until the result is built: the plan's objects die with this Loader.)
            with paused_gc():
                if self.own_structure(root, target, path):
                    target = ALL  # (the same load: every leaf as stored)
                if (target is ALL or target is True) and root._tree is not None:
                    if _load_plain.applies(self.o):
                        got = _load_plain.load(
                            root._tree.reader,
                            container_builder(self.o.strict, self.name, self.o.framework),
                            self.o, root.index, path)
                        if got is not None:
                            tree, unmatched = got
                            if unmatched:
                                self.pending = set(unmatched)
                                raise self.unmatched(root, path)
                            return tree
                    keys = self.o.keys
                    if keys is None or keys.may_walk_everything():
                        # The whole tree is walked: made in one pass. (A selection made
                        # container by container makes only the containers it looks into; the
                        # skeleton of the others, without prune, is made natively: none_tree.)
                        root._tree.fill_all(root)
                try:
                    build = self.plan(root, target, path)
                    if self.pending:
                        raise self.unmatched(root, path)
                    if self.o.slices is not None:
                        e = self.o.slices.unmatched(self.name, lambda: key_paths(root, path))
                        if e is not None:
                            raise e
                except Exception:
                    # An earlier leaf over the budget is reported first, as when each leaf
                    # was reserved as it was planned.
                    self.flush_reservations(allocate=False)
                    raise
                self.flush_reservations()
                if build is PRUNED:
                    build = const({} if self.o.prune and root.kind in (DICT, ORDEREDDICT)
                                   else None)
                self.read()
                return build()
        except MemoryError:
            # Within the limits, but more than this machine has: still the file's doing.
            raise self.err(ResourceExhaustedError, path, "out of memory while loading (lower "
                           "the limits of jtree.open for files you do not trust)") from None
        finally:
            if self.early is not None:
                self.early.settle()  # (a failed plan: no early read may outlive the load)

    def own_structure(self, root: FileNode, target: Any, path: Tuple[Any, ...]) -> bool:
        """Whether ``target`` is the file's own structure, ``load_pytreedef``'s tree of it as
        it came (the JAX proposal's ``load(path, pytree=load_pytreedef(path))``): a load with
        it is the load of everything as stored (each LeafSpec target of the stored dtype and
        shape, Spec values ignored), so it can take the plain pass. Asked of whole-file
        loads without cast= (which a LeafSpec's dtype overrides), keys= or prune, and only
        where the target's first leaf is a LeafSpec (the file's structure is then built,
        about 1 us a leaf, and compared)."""
        if (root.index != 0 or path or root._tree is None or self.o.cast is not None
                or self.o.keys is not None or self.o.prune or self.o.slices is not None):
            return False
        first = target
        while isinstance(first, (dict, list, tuple)) and first:
            first = next(iter(first.values())) if isinstance(first, dict) else first[0]
        if not isinstance(first, LeafSpec) or first is target:
            return False
        try:
            return bool(target == spec_tree(root, strict=self.o.strict, file=self.name))
        except (ValueError, TypeError, Error):
            # (An array in the target has no truth value; a custom node this process cannot
            # rebuild is the general path's error to raise, where the target reaches it.)
            return False

    # ---- planning ----

    def selected(self, path: Tuple[Any, ...]) -> bool:
        return self.o.keys is None or self.o.keys.selects([str(p) for p in path], self.pending)

    def unmatched(self, root: FileNode, path: Tuple[Any, ...]):
        """The NotFoundError for the keys= patterns that matched nothing, with the key paths
        nearest each (a typo in a key must not load an all-None tree without a word)."""
        assert self.o.keys is not None and self.pending
        paths = key_paths(root, path)
        lines = []
        for i in sorted(self.pending):
            text = self.o.keys.text(i)
            near = kp.nearest(text, paths)
            lines.append(f"{text!r} (nearest: {', '.join(map(repr, near))})" if near
                         else f"{text!r}")
        top = [kp.join(path + (c.key if c.key is not None else i,))
               for i, c in enumerate(root.children[:10])] if root.kind not in (LEAF, NONE) \
            else []
        return self.err(NotFoundError, path,
                        f"keys= {'pattern' if len(lines) == 1 else 'patterns'} "
                        f"{'; '.join(lines)} matched nothing in the file"
                        + (f" (its top-level keys: {', '.join(map(repr, top))}"
                           f"{', ...' if len(root.children) > 10 else ''})" if top else ""))

    def plan(self, node: FileNode, target: Any, path: Tuple[Any, ...]) -> Thunk:
        # With prune, what is not loaded is PRUNED: a dict drops it (Loader.container).
        if target is None or target is Ellipsis:
            return PRUNED if self.o.prune else const(target)
        if target is False:  # a boolean mask: False skips the data. As JAX's load does (a
            # mask is a tree prefix), a subtree keeps its structure with None leaves.
            if self.o.prune:
                return PRUNED
            if node.kind in (LEAF, NONE):
                return const(None)
            return self.none_tree(node, path)
        if node.kind == NONE:  # (a pattern naming it matched: the file holds None there)
            chosen = self.selected(path) if self.pending or self.o.prune else True
            return const(None) if chosen or not self.o.prune else PRUNED
        if node.kind == LEAF:
            if not self.selected(path):
                return PRUNED if self.o.prune else const(None)
            return self.leaf(node.leaf, target, path)  # type: ignore[arg-type]
        if ((target is ALL or target is True) and self.o.keys is not None
                and not self.o.keys.may_select_below([str(p) for p in path])):
            # Nothing at or below it can be selected: not a leaf of it is looked at (with
            # prune the parent drops it, its children not even made; else its structure, with
            # None leaves, as a False mask gives).
            return PRUNED if self.o.prune else self.none_tree(node, path)
        if self.pending and not node.children:
            self.selected(path)  # (a pattern naming an empty container matched it)
        return self.container(node, target, path)

    def none_tree(self, node: FileNode, path: Tuple[Any, ...]) -> Thunk:
        """The structure of container ``node`` with None leaves (a False mask, a part no keys=
        pattern can reach), made now in one native pass (Reader.none_tree), not a plan and a
        thunk per node: a container Python cannot rebuild (an unregistered custom node with
        strict=True) fails before anything is read, as the walk's check did."""
        assert node._tree is not None  # (every FileNode is made by a file's LazyTree)
        return const(node._tree.reader.none_tree(
            node.index, container_builder(self.o.strict, self.name, self.o.framework), path))

    def container(self, node: FileNode, target: Any, path: Tuple[Any, ...]) -> Thunk:
        pairs, nt_class = self.match(node, target, path)
        # Unkeyed children are never filtered out, so their position in `pairs` is theirs.
        thunks = [self.plan(c, t, path + (c.key if c.key is not None else i,))
                  for i, (c, t) in enumerate(pairs)]
        keys = [c.key for c, _ in pairs]
        if self.o.prune:
            if pairs and all(t is PRUNED for t in thunks):
                return PRUNED  # nothing below is loaded: the parent drops this container
            if not pairs and not (self.o.keys is None or self.selected(path)):
                return PRUNED
            if node.kind in (DICT, ORDEREDDICT):
                keys = [k for k, t in zip(keys, thunks) if t is not PRUNED]
                thunks = [t for t in thunks if t is not PRUNED]
            else:  # positions and fields keep their place: None where nothing is loaded
                thunks = [const(None) if t is PRUNED else t for t in thunks]
        kind, type_name, aux, strict = node.kind, node.type_name, node.aux, self.o.strict
        if kind == DICT:  # the common case, without the generic dispatch
            return lambda: dict(zip(keys, [t() for t in thunks]))
        if kind in (LIST, TUPLE):
            make = list if kind == LIST else tuple
            return lambda: make([t() for t in thunks])
        where = kp.join(path) if kind == CUSTOM else ""  # (only custom nodes' errors use it)
        if (kind == CUSTOM and strict and type_name not in _tv.NODES
                and _registry.node_for_name(type_name or "") is None):
            raise unregistered_node(type_name, self.name, where)  # (before anything is read)
        name, framework = self.name, self.o.framework

        def build() -> Any:
            return rebuild_container(kind, type_name, aux, keys, [t() for t in thunks],
                                     strict=strict, nt_class=nt_class, file=name, key_path=where,
                                     framework=framework)

        return build

    def match(self, node: FileNode, target: Any,
              path: Tuple[Any, ...]) -> Tuple[List[Tuple[FileNode, Any]], Optional[type]]:
        """The children to load with their targets, and the namedtuple class to build."""
        children = node.children
        if target is ALL or target is True:
            return [(c, ALL) for c in children], None
        if target is False:
            return [(c, False) for c in children], None
        t = type(target)
        nt_class = t if isinstance(target, tuple) and hasattr(t, "_fields") else None
        if nt_class is not None and node.kind == NAMEDTUPLE:
            if tuple(t._fields) != tuple(c.key for c in children):
                raise self.err(InvalidArgumentError, path,
                               f"the target namedtuple {t.__qualname__} has fields {t._fields}; "
                               f"the file's has {tuple(c.key for c in children)}")
            return list(zip(children, target)), nt_class
        if isinstance(target, collections.abc.Mapping):
            if not node.keyed() and children:
                raise self.mismatch(node, target, path)
            by_key = {c.key: c for c in children}
            missing = [k for k in target if k not in by_key]
            if missing:
                names = {kp.escape(k): k for k in by_key if isinstance(k, str)}
                near = [names[n] for n in kp.nearest(kp.escape(missing[0]), list(names))] \
                    if isinstance(missing[0], str) else []
                raise self.err(NotFoundError, path + (missing[0],),
                               f"the target names key {missing[0]!r}, which the file does not "
                               f"have here ({f'nearest: {near}; ' if near else ''}it has "
                               f"{list(by_key)[:20]}{'...' if len(by_key) > 20 else ''})")
            if node.kind in (DICT, ORDEREDDICT):  # a partial dict: only the target's keys
                return [(c, target[c.key]) for c in children if c.key in target], None
            return [(c, target.get(c.key)) for c in children], None
        if isinstance(target, (list, tuple)):
            if node.kind in (DICT, ORDEREDDICT):  # by key only
                raise self.mismatch(node, target, path)
            if len(target) != len(children):
                raise self.err(InvalidArgumentError, path,
                               f"the target has {len(target)} children here; the file's "
                               f"{NODE_KIND_NAMES[node.kind]} has {len(children)}")
            return list(zip(children, target)), None
        entry = _registry.node_for_type(t) or _registry.dataclass_entry(target)
        if entry is not None:
            values, keys, _aux = _registry.flatten_node(entry, target, self.name, kp.join(path))
            if keys is not None and node.keyed():
                return self.match(node, dict(zip(keys, values)), path)
            return self.match(node, list(values), path)
        raise self.mismatch(node, target, path)

    def mismatch(self, node: FileNode, target: Any, path: Tuple[Any, ...]):
        return self.err(InvalidArgumentError, path,
                        f"the file has a {NODE_KIND_NAMES[node.kind]} here; the target a "
                        f"{type(target).__qualname__}")

    def leaf(self, fl: FileLeaf, target: Any, path: Tuple[Any, ...]) -> Thunk:
        k = fl.kind
        if k in (INT, FLOAT, BOOL, COMPLEX):
            return const(fl.value)
        if k == ARRAY:
            return self.array(fl, target, path)
        key = ("payload", fl.index)
        if key not in self.cache:
            self.cache[key] = self.payload(fl, path)
        return self.cache[key]

    def payload(self, fl: FileLeaf, path: Tuple[Any, ...]) -> Thunk:
        k = fl.kind
        entry = None
        if k == PICKLE and not self.o.allow_pickle:
            raise self.err(InvalidArgumentError, path,
                           "the leaf is a pickled object; pass allow_pickle=True to unpickle it "
                           "(only for files you trust: unpickling runs code)")
        builtin = False  # a torch value jtree knows (torch.dtype), made per framework
        if k == CUSTOM_LEAF:
            entry = _registry.leaf_for_name(fl.type_name or "")
            builtin = entry is None and fl.type_name in _tv.LEAVES
            if entry is None and self.o.strict and not builtin:
                raise self.err(NotSupportedError, path,
                               f"the file holds a custom leaf {fl.type_name!r} that is not "
                               f"registered in this process: register it with "
                               f"jtree.register_pytree_leaf_serialization(cls, serialized_name="
                               f"{fl.type_name!r}, ...), or pass strict=False to get its bytes")
        bufs: List[bytearray] = []

        def allocate() -> None:  # (once reserved: see reserve)
            bufs.append(bytearray(fl.nbytes))
            self.request(fl, (0,), (fl.nbytes,), np.frombuffer(bufs[0], np.uint8))

        self.reserve(fl.nbytes, path, allocate)
        name = self.name  # (the key path only when used: it is a native call)
        framework, type_name = self.o.framework, fl.type_name

        def build() -> Any:
            buf = bufs[0]
            if builtin:
                return _tv.build_leaf(type_name, bytes(buf), framework, name, kp.join(path))
            if k == STR:
                try:
                    return buf.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise error(CorruptionError, name, kp.join(path),
                                f"str leaf is not UTF-8: {e}") from None
            if k == BYTES:
                return bytes(buf)
            if k == BYTEARRAY:
                return buf
            if k == CUSTOM_LEAF:
                return entry.deserialize_leaf(bytes(buf)) if entry is not None else bytes(buf)
            return pickle.loads(buf)

        return memo(build)
