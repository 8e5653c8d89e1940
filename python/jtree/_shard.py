"""A load's ``slices=``: which part of each array leaf a load reads (a rank's shard of a model).

``slices=`` names, per leaf, the box to read instead of the whole array; the loader then reads
every box of every leaf in its one native pass (host: one ``read_many``; device: one
``read_to_device``), fetching only the chunks the boxes overlap. Three ways to say it:

- :class:`TensorParallel` (a serving stack's split: rank ``r`` of ``world``, by the names of
  the weights; the C++ library decides the boxes: jtree::plan_shard, lib/include/jtree/shard.h);
- a mapping ``{key-path pattern: index}`` (patterns as ``keys=``; the first that matches a
  leaf gives its index, a basic index as ``LazyArray`` takes: ints, slices, ``...``);
- a function ``(key_path, LeafSpec) -> index | None`` (None: the whole leaf).
"""
from __future__ import annotations

import collections.abc
import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from . import _jtree, _remote
from . import _keypath as kp
from ._errors import InvalidArgumentError, NotFoundError, error
from ._index import box_of

SPLIT_KINDS: Tuple[str, ...] = tuple(_jtree.SPLIT_KINDS)


class Skip:
    """A leaf this rank does not load (another rank's expert)."""

    def __repr__(self) -> str:
        return "SKIP"


SKIP = Skip()

# (begin, end, post): the box to read and the index that selects the result from it.
Box = Tuple[List[int], List[int], Tuple[Any, ...]]
Rules = Union[None, Sequence[Any], Dict[str, Any]]


class TensorParallel:
    """Rank ``rank`` of ``world``'s part of a model, for ``jtree.load(..., slices=)``:
    column-parallel weights (``q_proj``, ``k_proj``, ``v_proj``, ``gate_proj``, ``up_proj``,
    Meta's ``wq``/``wk``/``wv``/``w1``/``w3``; weights and biases) split evenly along dimension
    0 (a torch ``Linear``'s output dimension), row-parallel weights (``o_proj``,
    ``down_proj``, ``wo``, ``w2``) along dimension 1, embeddings and output heads
    (``embed_tokens``, ``lm_head``, ``tok_embeddings``, ``output``, ``wte``) by vocabulary rows
    in blocks of ``ceil(n / world)`` (the last ranks' may be shorter: pad them as your
    embedding layer does), everything else whole on every rank.

    A leaf's *name* is its key path with ``/`` and ``.`` both separators, so the flat names of
    a torch ``state_dict`` (``"model.layers.0.self_attn.q_proj.weight"``) and nested dicts
    match the same rules. ``rules`` replaces the defaults: a list of ``(pattern, kind)`` or
    ``(pattern, kind, dim)``, or a dict ``{pattern: kind | (kind, dim)}``; a pattern is a
    dotted suffix of names with wildcards per component (``"q_proj.weight"``,
    ``"*_proj.weight"``), the first that matches decides, ``kind`` is one of
    ``"replicated"``, ``"column"``, ``"row"``, ``"vocab"``, ``"experts"``, and ``dim``
    overrides the kind's dimension (JAX/flax kernels are ``[in, out]``: column ``dim=1``,
    row ``dim=0``). :attr:`DEFAULT_RULES` lists the defaults, to extend them.

    ``expert_parallel=True``: the weights under an ``experts`` component (an MoE layer) are
    split by expert, each rank loading its block of ``ceil(E / world)`` experts whole (one
    tensor per expert: the others come back as None, or are dropped with ``prune=True``; a
    stacked ``[E, ...]`` tensor: its rows of dimension 0). Without it experts are split by the
    rules like any weight (tensor parallelism inside each expert).

    ``TensorParallel.SKIP`` marks, in :meth:`plan`, a leaf of another rank.

    A column or row dimension that does not divide by ``world`` is an
    :class:`InvalidArgumentError` naming the leaf (a model with fewer key/value heads than
    ranks needs a rule of its own)."""

    SKIP = SKIP  # (plan()'s mark of a leaf of another rank)

    def __init__(self, rank: int, world: int, *, expert_parallel: bool = False,
                 rules: Rules = None):
        for name, v in (("rank", rank), ("world", world)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise InvalidArgumentError(f"TensorParallel: {name} must be an int >= 0, "
                                           f"not {v!r}")
        if world < 1 or rank >= world:
            raise InvalidArgumentError(f"TensorParallel: rank {rank} of world {world}: the "
                                       f"rank must be below the world size (>= 1)")
        self.rank = rank
        self.world = world
        self.expert_parallel = bool(expert_parallel)
        self.rules = None if rules is None else _checked_rules(rules)
    @property
    def DEFAULT_RULES(self) -> List[Tuple[str, str, int]]:  # noqa: N802 (a constant's name)
        """The default rules as ``[(pattern, kind, dim)]`` (dim -1: the kind's own)."""
        return [tuple(r) for r in _jtree.default_split_rules()]

    def plan(self, file: Any, *, remote: Any = None) -> Dict[str, Tuple[str, Any]]:
        """What this rank reads of an open :class:`jtree.File` (or a path or URL, opened with
        ``remote``, a :class:`jtree.RemoteOptions`, as :func:`jtree.open` takes it):
        ``{key_path: (kind, index)}`` for every array leaf, ``index`` a tuple of one slice per
        dimension (``slice(0, n)`` for a whole one), None for the whole leaf, :attr:`SKIP` for a
        leaf of another rank. Reads only the structure."""
        if hasattr(file, "_reader"):
            if remote is not None:
                raise InvalidArgumentError("remote= applies to a path or URL; this File is "
                                           "open already (give remote= to jtree.open)")
            reader = file._reader
        else:
            reader = _jtree.Reader.open(os.fspath(file), remote=_remote.settings(remote))
        out: Dict[str, Tuple[str, Any]] = {}
        for _leaf, kind, load, begin, end, key in self._native(reader):
            if not load:
                out[key] = (kind, SKIP)
            elif begin is None:
                out[key] = (kind, None)
            else:
                out[key] = (kind, tuple(slice(b, e) for b, e in zip(begin, end)))
        return out

    def _native(self, reader: Any) -> List[Tuple[int, str, bool, Any, Any, str]]:
        return reader.shard_plan(self.rank, self.world, self.expert_parallel, self.rules)

    def __repr__(self) -> str:
        extra = ", expert_parallel=True" if self.expert_parallel else ""
        extra += f", rules={self.rules!r}" if self.rules is not None else ""
        return f"TensorParallel({self.rank}, {self.world}{extra})"


def layout_arg(value: Any) -> Optional[Tuple[int, bool, Optional[List[Tuple[str, str, int]]]]]:
    """``save(shard_layout=)`` as the native write's ``(world, expert_parallel, rules)``: None,
    a world size (the default rules), or a :class:`TensorParallel` (its world, rules and
    ``expert_parallel``; its rank does not matter)."""
    if value is None:
        return None
    if isinstance(value, TensorParallel):
        return (value.world, value.expert_parallel, value.rules)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return (value, False, None)
    raise InvalidArgumentError(f"shard_layout must be a world size (an int >= 1) or a "
                               f"jtree.TensorParallel, not {value!r}")


def _checked_rules(rules: Rules) -> List[Tuple[str, str, int]]:
    items = list(rules.items()) if isinstance(rules, collections.abc.Mapping) else list(rules)
    out = []
    for item in items:
        if isinstance(rules, collections.abc.Mapping):
            pattern, what = item
            item = (pattern, *what) if isinstance(what, tuple) else (pattern, what)
        if (not isinstance(item, tuple) or len(item) not in (2, 3)
                or not isinstance(item[0], str) or item[1] not in SPLIT_KINDS
                or (len(item) == 3 and (not isinstance(item[2], int) or item[2] < -1))):
            raise InvalidArgumentError(
                f"TensorParallel: a rule is (pattern, kind) or (pattern, kind, dim) with kind "
                f"one of {SPLIT_KINDS} and dim an int >= -1, not {item!r}")
        out.append((item[0], item[1], item[2] if len(item) == 3 else -1))
    return out


class Slices:
    """A load's ``slices=``, checked: what each array leaf is read as (:meth:`select`)."""

    def __init__(self, value: Any):
        self.tp: Optional[TensorParallel] = None
        self.patterns: Optional[kp.PatternSet] = None
        self.indexes: List[Any] = []
        self.func: Any = None
        if isinstance(value, TensorParallel):
            self.tp = value
        elif isinstance(value, collections.abc.Mapping):
            self.patterns = kp.PatternSet(list(value.keys()))
            self.indexes = list(value.values())
        elif callable(value):
            self.func = value
        else:
            raise InvalidArgumentError(
                f"slices must be a jtree.TensorParallel, a dict {{key-path pattern: index}} or "
                f"a function (key_path, LeafSpec) -> index | None, not "
                f"{type(value).__qualname__}")
        # The patterns that matched no array leaf yet (reported once the plan is made).
        self.pending = set(range(len(self.indexes)))
        self.by_leaf: Optional[Dict[int, Any]] = None  # TensorParallel's answer, per leaf
        self.tp_split = False  # whether a rule of the TensorParallel matched a leaf

    def select(self, reader: Any, name: str, fl: Any,
               path: Tuple[Any, ...]) -> Union[None, Skip, Box]:
        """None (the whole leaf), SKIP, or the (begin, end, post) box of leaf ``fl`` at
        ``path`` to read."""
        if self.tp is not None:
            if self.by_leaf is None:
                self.by_leaf = {}
                for leaf, kind, load, begin, end, _key in self.tp._native(reader):
                    self.tp_split |= kind != "replicated"
                    if not load:
                        self.by_leaf[leaf] = SKIP
                    elif begin is not None:
                        self.by_leaf[leaf] = (list(begin), list(end), ())
            return self.by_leaf.get(fl.index)
        if self.patterns is not None:
            matched = self.patterns.native.matching([str(p) for p in path])
            if not matched:
                return None
            self.pending.difference_update(matched)
            index = self.indexes[min(matched)]
        else:
            index = self.func(kp.join(path), fl.spec())
        if index is None:
            return None
        begin, end, post = box_of(index, fl.shape, name, kp.join(path))
        if any(isinstance(p, slice) and (p.step or 1) < 0 for p in post):
            raise error(InvalidArgumentError, name, kp.join(path),
                        f"slices= index {index!r} has a negative step (torch has none): read "
                        f"the part, then flip it")
        return begin, end, _trim(post)

    def unmatched(self, name: str, key_paths: Callable[[], List[str]]) -> Optional[Exception]:
        """The NotFoundError for the patterns that matched no array leaf, with the key paths
        nearest each (or for a TensorParallel whose rules matched no leaf); None when every
        pattern matched."""
        if self.tp is not None and self.by_leaf is not None and not self.tp_split:
            paths = key_paths()
            return error(NotFoundError, name, None,
                         f"slices={self.tp!r}: no array leaf's name matches a split rule, so "
                         f"every rank would load the whole model (its key paths: "
                         f"{', '.join(map(repr, paths[:5]))}{', ...' if len(paths) > 5 else ''}"
                         f"); give TensorParallel rules= for these names")
        if not self.pending or self.patterns is None:
            return None
        paths = key_paths()
        lines = []
        for i in sorted(self.pending):
            text = self.patterns.text(i)
            near = kp.nearest(text, paths)
            lines.append(f"{text!r} (nearest: {', '.join(map(repr, near))})" if near
                         else repr(text))
        return error(NotFoundError, name, None,
                     f"slices= {'pattern' if len(lines) == 1 else 'patterns'} "
                     f"{'; '.join(lines)} matched no array leaf of the file")


def _trim(post: Tuple[Any, ...]) -> Tuple[Any, ...]:
    """``post`` without its trailing whole-box slices: () when the box is the result."""
    items = list(post)
    while items and isinstance(items[-1], slice) and items[-1] == slice(0, None, 1):
        items.pop()
    return tuple(items)
