"""The plain load: ``jtree.load(f)`` / ``File.load()`` of a whole file as NumPy arrays and
Python values, with no selection, cast, target, device or progress (the call made most), done
in one native pass (``Reader.load_plain``, bindings/python/src/plain_load.cc) instead of the
general loader's plan of a Python frame, thunk and reservation per leaf (jtree._load). Same
rules, same result; where the file needs more (pickled or custom leaves, a dtype NumPy lacks,
the memory limits, a damaged str) the native pass declines and the general loader loads it."""
from __future__ import annotations

from typing import Any, Optional, Tuple

import numpy as np

from . import _dtypes

# mmap= as Reader.load_plain's mmap_mode: 0 copies, 1 copy-on-write views, 2 read-only views.
_MMAP_MODE = {False: 0, True: 1, "r": 2}


def applies(o: Any) -> bool:
    """Whether a whole load with LoadOptions ``o`` is a plain one (the caller checks that the
    target is everything, from the file's root)."""
    return (o.framework == "numpy" and o.cast is None and o.keys is None and not o.prune
            and not o.fill_out and o.progress is None and o.device_options is None
            and o.device is None and o.shardings is None)


def numpy_dtype_of(code: int) -> Optional[np.dtype]:
    """The NumPy dtype of a native dtype code as a load makes it, or None where the general
    loader decides (no NumPy type: bfloat16 without ml_dtypes becomes float32 there, or the
    clear error)."""
    name = _dtypes.NAME_OF.get(code, "")
    if not name:
        return None
    if name not in _dtypes.NUMPY_NATIVE:
        m = _dtypes.ml_dtypes()
        if m is None or not hasattr(m, name):
            return None
    return _dtypes.numpy_dtype(name)


def load(reader: Any, container: Any, o: Any) -> Optional[Tuple[Any]]:
    """``(tree,)``: the whole file of the native ``reader`` loaded, containers other than
    dicts, lists and tuples made by ``container`` (jtree._load.container_builder); None when
    the general loader must load it."""
    return reader.load_plain(numpy_dtype_of, container, _MMAP_MODE[o.mmap], o.verify, o.threads)
