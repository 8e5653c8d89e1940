"""Deferred array leaves: arrays whose data is produced only when the writer reaches them.

A save holds every array of the tree until the file is written. A ``Deferred`` leaf holds only
its shape, dtype and a ``fetch`` function: the native writer calls it when it starts on the
leaf and drops the array as soon as the leaf's chunks are written, so a save of many deferred
leaves (a conversion from another format, data decoded or generated on demand) keeps only the
few leaves being written in memory. jtree's converters use it (python/jtree/convert/).
"""
from __future__ import annotations

from typing import Any, Callable, Tuple

import numpy as np

from . import _dtypes


class Deferred:
    """An array leaf of ``shape`` and ``dtype`` whose data ``fetch()`` returns when written.

    ``fetch()`` returns an array of that shape and dtype (anything ``np.asarray`` accepts; it
    is made C-contiguous and native-order if it is not). It is called from the writer's
    threads, with the GIL, once per leaf (again only if the writer reads the leaf twice); an
    exception in it fails the save, naming the leaf's key path, and leaves no file.
    """

    __slots__ = ("shape", "dtype", "fetch")

    def __init__(self, shape: Tuple[int, ...], dtype: Any, fetch: Callable[[], Any]):
        self.shape = tuple(int(n) for n in shape)
        if any(n < 0 for n in self.shape):
            raise ValueError(f"Deferred: negative dimension in shape {self.shape}")
        self.dtype = np.dtype(dtype)
        if not callable(fetch):
            raise TypeError(f"Deferred: fetch must be callable, not {type(fetch).__name__}")
        self.fetch = fetch

    def __repr__(self) -> str:
        return f"Deferred(shape={self.shape}, dtype={self.dtype})"

    def host_fetch(self) -> Callable[[], np.ndarray]:
        """The callable the native writer calls: fetch(), checked and made into the
        contiguous native-order host view the writer copies from."""
        def fetch() -> np.ndarray:
            arr = np.asarray(self.fetch())
            if arr.shape != self.shape or arr.dtype.newbyteorder("=") != \
                    self.dtype.newbyteorder("="):
                raise ValueError(f"fetch() returned an array of shape {arr.shape} and "
                                 f"dtype {arr.dtype}; the leaf was declared with shape "
                                 f"{self.shape} and dtype {self.dtype}")
            # (np.require keeps 0-d arrays 0-d; np.ascontiguousarray makes them 1-d)
            view, byteswap = _dtypes.host_view(np.require(arr, requirements="C"))
            if byteswap:
                view = view.byteswap()
            return view
        return fetch
