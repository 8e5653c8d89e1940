"""GlobalArray: "this process holds this part of an array spread over the job".

JAX arrays know their sharding; NumPy arrays and torch tensors do not. A :class:`GlobalArray`
leaf says it for them: the global shape, the block(s) of it this process holds, and which
replica those blocks are (replica 0 is written; the others hold copies). On save, every
process passes a tree with a GlobalArray at the same place and the blocks of replica 0 of all
processes together must cover the array exactly once. On load, a GlobalArray without data
names the blocks this process wants: only those are read.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

from ._errors import InvalidArgumentError

Box = Tuple[Tuple[int, int], ...]  # [begin, end) per dimension


class GlobalArray:
    """One process's part of an array of shape ``shape`` spread over several processes.

    ``GlobalArray(data, index, shape, replica_id=0)``: this process holds ``data`` =
    ``global[index]``, where ``index`` is a tuple of slices with step 1 (missing trailing
    dimensions are whole; ``...`` is not accepted). Several blocks: ``index`` a list of such
    tuples and ``data`` the list of their arrays (NumPy arrays or torch tensors). Processes
    holding copies of the same block say so with ``replica_id`` (only replica 0 is written).

    For :func:`jtree.load`, ``GlobalArray(None, index)`` (``shape`` optional) asks for those
    blocks only; the loaded tree holds a GlobalArray whose ``data`` are the blocks read.
    """

    __slots__ = ("data", "index", "shape", "replica_id")

    def __init__(self, data: Any, index: Any, shape: Optional[Sequence[int]] = None, *,
                 replica_id: int = 0):
        many = isinstance(index, list)
        indices = index if many else [index]
        if data is not None:
            blocks = data if many else [data]
            if not isinstance(blocks, (list, tuple)) or len(blocks) != len(indices):
                raise InvalidArgumentError("GlobalArray: with a list of indices, data must be "
                                           "a list of as many arrays")
        for ix in indices:
            _check_index(ix)
        if shape is not None:
            shape = tuple(int(n) for n in shape)
            if any(n < 0 for n in shape):
                raise InvalidArgumentError(f"GlobalArray: negative dimension in shape {shape}")
        if int(replica_id) < 0:
            raise InvalidArgumentError(f"GlobalArray: replica_id {replica_id} < 0")
        self.data = data
        self.index = index
        self.shape = shape
        self.replica_id = int(replica_id)

    @property
    def blocks(self) -> List[Tuple[Any, Any]]:
        """The (index, array) pairs this process holds (array None for a load request)."""
        if isinstance(self.index, list):
            data = self.data if self.data is not None else [None] * len(self.index)
            return list(zip(self.index, data))
        return [(self.index, self.data)]

    def boxes(self, shape: Tuple[int, ...]) -> List[Box]:
        """Each block's [begin, end) per dimension in an array of ``shape``."""
        return [box_of(ix, shape) for ix, _ in self.blocks]

    def __repr__(self) -> str:
        return (f"GlobalArray(index={self.index!r}, shape={self.shape}, "
                f"replica_id={self.replica_id}, data={'held' if self.data is not None else None})")


def _check_index(ix: Any) -> None:
    items = ix if isinstance(ix, tuple) else (ix,)
    for s in items:
        if not isinstance(s, slice):
            raise InvalidArgumentError(f"GlobalArray: an index is a tuple of slices, not "
                                       f"{ix!r} (write i:i+1 for one row)")
        if s.step not in (None, 1):
            raise InvalidArgumentError(f"GlobalArray: slice {s} has a step; only step 1")


def box_of(ix: Any, shape: Tuple[int, ...]) -> Box:
    """[begin, end) per dimension of ``global[ix]``; slices past the end are refused (not
    clipped: a block that does not fit the array is a mistake, not a wish)."""
    items = ix if isinstance(ix, tuple) else (ix,)
    if len(items) > len(shape):
        raise InvalidArgumentError(f"GlobalArray: index {ix!r} has more dimensions than shape "
                                   f"{shape}")
    box = []
    for d, n in enumerate(shape):
        s = items[d] if d < len(items) else slice(None)
        b = 0 if s.start is None else int(s.start)
        e = n if s.stop is None else int(s.stop)
        if b < 0 or e > n or b > e:
            raise InvalidArgumentError(f"GlobalArray: {s} is outside dimension {d} "
                                       f"(size {n}) of shape {shape}")
        box.append((b, e))
    return tuple(box)


def overlap(a: Box, b: Box) -> bool:
    return all(ab < be and bb < ae for (ab, ae), (bb, be) in zip(a, b))


def volume(box: Box) -> int:
    n = 1
    for b, e in box:
        n *= e - b
    return n


def find_overlap(boxes: List[Tuple[Box, int]]) -> Optional[Tuple[int, int, Box]]:
    """Two of ``boxes`` (box, owner) that overlap: (owner a, owner b, box a), or None. A sweep
    along the first dimension keeps this near-linear for the usual row or column splits."""
    if not boxes or not boxes[0][0]:
        return (boxes[0][1], boxes[1][1], boxes[0][0]) if len(boxes) > 1 else None
    order = sorted(boxes, key=lambda t: t[0][0])
    active: List[Tuple[Box, int]] = []
    for box, owner in order:
        active = [t for t in active if t[0][0][1] > box[0][0]]
        for other, who in active:
            if overlap(box, other):
                return who, owner, other
        active.append((box, owner))
    return None
