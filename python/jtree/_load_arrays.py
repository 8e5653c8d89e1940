"""The planning of array leaves: where each goes (the target's framework, dtype, shape and
placement, else the load's options), handed to that framework's adapter
(jtree._load_adapter) through ``ADAPTERS``; the parts ``slices=`` names and the blocks of a
GlobalArray target; the ``cast=`` rule.
"""
from __future__ import annotations

import collections.abc
from typing import Any, List, Optional, Tuple

from . import _dtypes
from . import _keypath as kp
from ._errors import InvalidArgumentError
from ._global_array import GlobalArray
from ._load import ADAPTERS, ALL, PRUNED, const
from ._load_adapter import Placement, Thunk, array_key, memo
from ._load_exec import Execution
from ._shard import SKIP
from ._structure import FLAG_SCALAR, FileLeaf, LeafSpec


class ArrayPlanner(Execution):
    """The array leaves of one load, planned into its queues (:class:`Execution`)."""

    def spec_as_stored(self, fl: FileLeaf, t: Any, path: Tuple[Any, ...]) -> Optional[Thunk]:
        """A LeafSpec target of the stored shape and dtype (``load_pytreedef``'s tree given
        back as the target, the JAX proposal's way to restore) is the leaf as stored, in the
        load's framework: that adapter's ``as_stored`` (what the general path makes of it: a
        LeafSpec's dtype is taken as it is, cast= does not apply). None otherwise."""
        if (not isinstance(t, LeafSpec) or t.kind != "array" or tuple(t.shape) != fl.shape
                or t.dtype is None):
            return None
        try:
            name = _dtypes.dtype_name(t.dtype)
        except (InvalidArgumentError, TypeError):
            return None  # (the general path's clear error)
        if name != fl.dtype:
            return None
        return self.o.adapter.as_stored(self, fl, path)

    def from_template(self, fl: FileLeaf, t: Any, path: Tuple[Any, ...]) -> Optional[Thunk]:
        """The fast path of a target of the stored dtype and shape: the first adapter's
        ``from_template`` that takes ``t``, else :meth:`spec_as_stored`."""
        for adapter in ADAPTERS.values():
            fast = adapter.from_template(self, fl, t, path)
            if fast is not None:
                return fast
        return self.spec_as_stored(fl, t, path)

    def array(self, fl: FileLeaf, target: Any, path: Tuple[Any, ...]) -> Thunk:
        """An array leaf: where it goes (the target's framework, dtype, shape and placement,
        else the load's options), planned by that framework's adapter."""
        if self.o.slices is not None:
            part = self.o.slices.select(self.file._reader, self.name, fl, path)
            if part is SKIP:
                return PRUNED if self.o.prune else const(None)
            if part is not None:
                return self.sliced(fl, part, target, path)
        if (target is ALL or target is True) and self.o.cast is None:
            fast = self.o.adapter.as_stored(self, fl, path)
            if fast is not None:
                return fast
        else:  # a template of the stored dtype and shape (cast= and pad_truncate= do not
            # apply to a template), of any framework, or the file's LeafSpec
            fast = self.from_template(fl, target, path)
            if fast is not None:
                return fast
        where = kp.join(path)
        t = target
        if isinstance(t, GlobalArray):
            return self.global_array(fl, t, path)
        p: Optional[Placement] = None
        if isinstance(t, LeafSpec):
            if t.kind != "array":
                raise self.err(InvalidArgumentError, path,
                               f"the target is a {t.kind} LeafSpec; the file has an array here")
            p = Placement(self.o.framework, _dtypes.dtype_name(t.dtype, self.name, where),
                          tuple(t.shape))
        else:
            for adapter in ADAPTERS.values():
                p = adapter.target(self, t, where)
                if p is not None:
                    break
        if p is None:  # (True, ALL or another leaf: as stored, in the load's framework)
            p = Placement(self.o.framework, None, fl.shape)
        adapter = ADAPTERS[p.framework]
        if p.want is None:
            p.want = self.cast_for(fl.dtype, path)
        shape = p.shape
        if shape != fl.shape:
            if len(shape) != len(fl.shape):
                raise self.err(InvalidArgumentError, path,
                               f"the file holds shape {fl.shape}; the target asks for {shape} "
                               f"(another rank)")
            if not self.o.pad_truncate:
                raise self.err(InvalidArgumentError, path,
                               f"the file holds shape {fl.shape}; the target asks for {shape}: "
                               f"pass pad_truncate=True to pad with zeros or truncate")
        adapter.settle(self, fl, p, path)
        scalar = bool(fl.flags & FLAG_SCALAR) and shape == ()

        key = array_key(fl, p.framework, p.want, shape, p.sharding, p.device, p.out)
        if p.out is None and key in self.cache:
            return self.cache[key]
        thunk = memo(adapter.array(self, fl, p, scalar, path))
        self.cache[key] = thunk
        return thunk

    def sliced(self, fl: FileLeaf, part: Tuple[List[int], List[int], Tuple[Any, ...]],
               target: Any, path: Tuple[Any, ...]) -> Thunk:
        """The part of a leaf ``slices=`` names (jtree._shard): box [begin, end) read in the
        load's one pass (only the chunks it overlaps), then ``post`` applied (ints drop their
        dimension, steps), in the load's framework and cast; into the ``out=`` array when
        the load has one (of the part's shape)."""
        begin, end, post = part
        box = tuple(zip(begin, end))
        want = self.cast_for(fl.dtype, path)
        out = None
        if (isinstance(target, LeafSpec) and target.kind == "array" and target.dtype is not None
                and tuple(target.shape) == fl.shape):
            # (load_pytreedef's structure given back as the target: its dtype is the cast)
            want = _dtypes.dtype_name(target.dtype, self.name, kp.join(path))
        elif target is not ALL and target is not True:
            if not self.o.fill_out:
                raise self.err(InvalidArgumentError, path,
                               "slices= reads a part of this leaf: its target must be True (or "
                               "absent), the file's LeafSpec, or with out= an array of the "
                               "part's shape (cast= gives the dtype)")
            if post:
                raise self.err(InvalidArgumentError, path,
                               "slices= with out=: the index must be slices of step 1 (the "
                               "out array is filled with the box as it is)")
            out = target
            shape = tuple(e - b for b, e in box)
            if tuple(getattr(out, "shape", ())) != shape:
                raise self.err(InvalidArgumentError, path,
                               f"slices= reads a part of shape {shape}; the out array has "
                               f"shape {tuple(getattr(out, 'shape', ()))}")
        # (Tied leaves, the same part of one leaf: one array, as whole tied leaves are.)
        key = ("part", fl.index, box, repr(post), self.o.framework, want)
        if out is None and key in self.cache:
            return self.cache[key]
        get = memo(self.o.adapter.part(self, fl, box, want, out, path))
        if post:
            part_of, adapter = get, self.o.adapter
            get = memo(lambda: adapter.index(part_of(), post))
        if out is None:
            self.cache[key] = get
        return get

    def global_array(self, fl: FileLeaf, t: GlobalArray, path: Tuple[Any, ...]) -> Thunk:
        """The blocks of a leaf a GlobalArray target names, each read on its own (only the
        chunks it overlaps), as NumPy arrays or (framework="torch") tensors."""
        if t.shape is not None and tuple(t.shape) != fl.shape:
            raise self.err(InvalidArgumentError, path, f"the file holds shape {fl.shape}; the "
                           f"GlobalArray target says {tuple(t.shape)}")
        try:
            boxes = t.boxes(fl.shape)
        except InvalidArgumentError as e:
            raise self.err(InvalidArgumentError, path, str(e)) from None
        want = self.cast_for(fl.dtype, path)
        block = self.o.adapter.block
        gets = [block(self, fl, box, want, path) for box in boxes]

        def build() -> GlobalArray:
            blocks = [g() for g in gets]
            return GlobalArray(blocks if isinstance(t.index, list) else blocks[0], t.index,
                               fl.shape, replica_id=t.replica_id)

        return build

    def cast_for(self, stored: str, path: Tuple[Any, ...]) -> str:
        c = self.o.cast
        where = kp.join(path)
        if c is None:
            return stored
        if callable(c) and not isinstance(c, type):
            got = c(where, stored)
            return stored if got is None else _dtypes.dtype_name(got, self.name, where)
        if isinstance(c, collections.abc.Mapping):
            for k, v in c.items():
                if _dtypes.dtype_name(k, self.name, where) == stored:
                    return _dtypes.dtype_name(v, self.name, where)
            return stored
        # One dtype: every floating-point array becomes it.
        return _dtypes.dtype_name(c, self.name, where) if _dtypes.is_floating(stored) else stored
