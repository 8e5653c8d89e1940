"""PyTorch ``.pt``/``.pth``/``.bin``/``.ckpt`` files (torch.save) -> tree.

Loaded with ``torch.load(weights_only=True)``: tensors, containers and plain values only, no
code run. A file whose pickle needs more (custom classes, ``argparse.Namespace`` ...) is refused
with a message saying so, unless ``allow_pickle=True`` (trusted files only: unpickling runs
code), when the objects jtree cannot store natively are pickled into the .jtree file.
Zip-format files (every torch.save since 1.6) are loaded with ``mmap=True``: tensors stay in
the file until written, and the pages of each are dropped from the process once written.

The object's own structure is kept: a state dict becomes a dict of arrays under the same
names; an optimizer state dict keeps its nesting (``state`` keyed by int parameter ids,
``param_groups`` as a list of dicts); torch.Size and torch.dtype values are saved as jtree saves
them (without pickle).
"""
from __future__ import annotations

import os
import pickle
import re
import weakref
import zipfile
from typing import Any, Dict, List, Tuple

import numpy as np

from .. import _dtypes
from .. import _keypath as kp
from .._errors import (CorruptionError, InvalidArgumentError, NotSupportedError, error)
from ._common import SMALL_TENSOR, deferred_class, file_mappings, numpy_dtype, release_pages
from ._source import Source

FORMAT = "torch"
EXTENSIONS = (".pt", ".pth", ".bin", ".ckpt")
# The legacy (pre-1.6) format starts with a pickled magic number: protocol 2 then a long.
_LEGACY_PREFIX = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19"


def sniff(path: str) -> bool:
    """A zip archive holding ``<name>/data.pkl`` (torch.save), or a legacy torch file."""
    try:
        if not os.path.isfile(path):
            return False
        with open(path, "rb") as f:
            head = f.read(len(_LEGACY_PREFIX))
        if head == _LEGACY_PREFIX:
            return True
        if head[:4] != b"PK\x03\x04":
            return False
        with zipfile.ZipFile(path) as z:
            return any(n.endswith("/data.pkl") or n == "data.pkl" for n in z.namelist()[:64])
    except Exception:  # noqa: BLE001  (sniff never raises)
        return False


def _torch() -> Any:
    try:
        import torch  # noqa: PLC0415
    except ImportError:
        raise error(NotSupportedError, None, None, "reading PyTorch files needs PyTorch "
                                                   "(pip install torch)") from None
    return torch


def open_source(path: str, *, allow_pickle: bool = False) -> Source:
    """Loads a torch.save file without running code (see the module doc)."""
    torch = _torch()
    try:
        is_zip = zipfile.is_zipfile(path)
    except OSError as e:
        raise error(CorruptionError, path, None, f"cannot read: {e}") from None
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True, mmap=is_zip)
    except pickle.UnpicklingError as e:
        if "weights only" not in str(e).lower():  # a damaged pickle, not a refused one
            raise error(CorruptionError, path, None,
                        f"not a readable PyTorch file: {_first_line(e)}") from None
        if not allow_pickle:
            raise error(InvalidArgumentError, path, None,
                        f"this file needs full unpickling, which can run arbitrary code; "
                        f"pass allow_pickle=True (--allow-pickle) only if you trust it. "
                        f"PyTorch said: {_first_line(e)}") from None
        obj = _load_unsafe(torch, path, is_zip)
    except Exception as e:  # noqa: BLE001  (torch.load on hostile bytes: anything)
        raise error(CorruptionError, path, None,
                    f"not a readable PyTorch file: {_first_line(e)}") from None
    mappings = file_mappings(path) if is_zip else []
    conv = _Converter(path, torch, mappings)
    tree = conv.visit(obj, ())
    return Source(tree=tree, metadata={}, description=f"PyTorch: {conv.count} tensors",
                  close=lambda: None)


def _load_unsafe(torch: Any, path: str, is_zip: bool) -> Any:
    try:
        return torch.load(path, map_location="cpu", weights_only=False, mmap=is_zip)
    except Exception as e:  # noqa: BLE001  (unpickling can raise anything)
        raise error(CorruptionError, path, None,
                    f"not a readable PyTorch file: {_first_line(e)}") from None


def _first_line(e: BaseException) -> str:
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(e)).strip()  # (PyTorch colours its message)
    return text.splitlines()[0] if text else type(e).__name__


class _Converter:
    """Turns the loaded object into a jtree tree: containers kept, tensors as array leaves."""

    def __init__(self, path: str, torch: Any, mappings: List[Tuple[int, int]]):
        self.path = path
        self.torch = torch
        self.mappings = mappings
        self.count = 0
        # Tensors sharing memory (tied weights) become one leaf object: jtree stores it once.
        self.seen: Dict[Tuple[Any, ...], Any] = {}

    def visit(self, x: Any, path: Tuple[Any, ...]) -> Any:
        torch = self.torch
        if isinstance(x, torch.Tensor):
            return self.tensor(x, path)
        if isinstance(x, dict):  # OrderedDict and other dict subclasses included
            out = {}
            for k, v in x.items():
                if isinstance(k, bool) or not isinstance(k, (str, int)):
                    raise error(InvalidArgumentError, self.path, kp.join(path),
                                f"dict key {k!r} of type {type(k).__name__}: jtree keys are "
                                f"str or int")
                out[k] = self.visit(v, path + (k,))
            return out
        if type(x) in (list, tuple):
            return type(x)(self.visit(v, path + (i,)) for i, v in enumerate(x))
        # Plain values, torch.Size/dtype; other objects (allow_pickle only) jtree.save pickles.
        return x

    def tensor(self, t: Any, path: Tuple[Any, ...]) -> Any:
        torch = self.torch
        where = kp.join(path)
        if t.layout != torch.strided or t.is_quantized:
            raise error(NotSupportedError, self.path, where,
                        f"a {t.layout} {'quantized ' if t.is_quantized else ''}tensor: only "
                        f"dense tensors convert (save t.to_dense() / t.dequantize())")
        name = _dtypes.name_of_torch(t.dtype)
        if name is None:
            raise error(NotSupportedError, self.path, where, f"torch dtype {t.dtype} has no "
                                                             f"jtree dtype")
        t = t.detach()
        key = (t.data_ptr(), tuple(t.shape), tuple(t.stride()), name)
        if t.numel() and key in self.seen:
            return self.seen[key]
        self.count += 1
        dt = numpy_dtype(name, self.path, where)
        raw = _dtypes.torch_raw_view(t)
        if t.dtype == torch.bool or t.dtype == torch.complex128:
            view = t.numpy()
        else:
            view = raw.numpy().view(dt)
        leaf = self.leaf(view)
        if t.numel():
            self.seen[key] = leaf
        return leaf

    def leaf(self, view: np.ndarray) -> Any:
        deferred = deferred_class()
        if deferred is None or not self.mappings or view.nbytes <= SMALL_TENSOR:
            return view
        mappings = self.mappings

        def fetch() -> np.ndarray:
            # A fresh view per fetch: when the writer drops it, its pages leave the process.
            v = view.view()
            lo, hi = _byte_bounds(v)
            weakref.finalize(v, release_pages, lo, hi - lo, mappings)
            return v

        return deferred(view.shape, view.dtype, fetch)


def _byte_bounds(a: np.ndarray) -> Tuple[int, int]:
    """[low, high) addresses of an array's memory (np.byte_bounds moved in NumPy 2)."""
    try:
        from numpy.lib.array_utils import byte_bounds  # noqa: PLC0415
    except ImportError:
        byte_bounds = np.byte_bounds
    return byte_bounds(a)
