"""What a basic index (ints, slices, ``...``, None) selects of an array leaf: the box of it to
read and the index that selects the result from that box. The selection rule itself is
jtree::resolve_index's (lib/include/jtree/slice.h, which ``jtree get`` uses too); this module
turns Python indexes into its items (LazyArray slices, load's ``slices=``), and views a box
the native Reader maps in place."""
from __future__ import annotations

from typing import Any, List, Optional, Tuple

import numpy as np

from . import _jtree
from ._errors import IndexKindError, IndexOutOfRangeError, error


def box_of(index: Any, shape: Tuple[int, ...], file: Optional[str] = None,
           key_path: str = "") -> Tuple[List[int], List[int], Tuple[Any, ...]]:
    """(begin, end, post): the box of the array a basic index touches, and the index that
    selects the result from that box (steps, dropped dimensions, new axes).

    What an index selects is jtree::resolve_index's decision (lib/include/jtree/slice.h, which
    `jtree get` uses too): this only turns the Python index into its items and the resolved
    axes into ``post``."""
    items = []
    for i in index if isinstance(index, tuple) else (index,):
        if i is None:
            items.append((_jtree.INDEX_NEWAXIS, None, None, None))
        elif i is Ellipsis:
            items.append((_jtree.INDEX_ELLIPSIS, None, None, None))
        elif isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)):
            items.append((_jtree.INDEX_INT, int(i), None, None))
        elif isinstance(i, slice):
            items.append((_jtree.INDEX_SLICE, i.start, i.stop, i.step))
        else:
            raise error(IndexKindError, file, key_path,
                        f"jtree arrays are indexed by ints, slices, '...' and None, "
                        f"not {type(i).__name__} (read the array first for other indexing)")
    got = _jtree.resolve_index(items, shape)
    if isinstance(got, str):
        raise error(IndexOutOfRangeError, file, key_path, got)
    begin, end, axes = got
    post: List[Any] = []
    for kind, offset, step, count in axes:
        if kind == _jtree.INDEX_NEWAXIS:
            post.append(None)
        elif kind == _jtree.INDEX_INT:
            post.append(0)
        else:
            post.append(slice(offset, None, step) if count else slice(0, 0))
    return list(begin), list(end), tuple(post)


def mapped_box(reader: Any, leaf: int, leaf_shape: Tuple[int, ...], begin: List[int],
               end: List[int], npdt: np.dtype, verify: bool, threads: int,
               writable: bool) -> Optional[np.ndarray]:
    """Box [begin, end) of a leaf as a view of the file's private copy-on-write memory map
    (``Reader.map_box``: writes never reach the file; the view keeps the map alive after the
    file is closed), the chunks it overlaps verified (in parallel) unless ``verify`` is off;
    None where the native Reader does not map the leaf (compressed, remote, a file object,
    not stored back to back, mmap off) or the box is empty: read it instead. A box that is
    exactly one raw chunk maps whatever the leaf's grid (a layout's column tiles)."""
    shape = tuple(e - b for b, e in zip(begin, end))
    if 0 in shape:
        return None
    mapped = reader.map_box(leaf, begin, end, verify, threads, writable)
    if mapped is None:
        return None
    flat, box_order = mapped
    if box_order:  # exactly one chunk of a tiled grid: the box's own C-order array
        return np.ndarray(shape, npdt, buffer=flat)
    # The box's elements lie at the leaf's C-order strides from the first byte of `flat`.
    strides: List[int] = []
    step = npdt.itemsize
    for n in reversed(leaf_shape):
        strides.append(step)
        step *= n
    return np.ndarray(shape, npdt, buffer=flat, strides=tuple(reversed(strides)))

