"""Fuzzing jtree's safetensors reader (python/jtree/convert/_from_safetensors.py: the header is
parsed and checked by jtree itself) with atheris.

Each input is a whole .safetensors file. It is written to a scratch path and opened the way
`jtree convert` opens it (_from_safetensors.open_source: header length bounded, JSON parsed,
every entry's dtype, shape and offsets checked, no two ranges overlapping, each tensor a map of
its byte range); every tensor is then read, and when the header was accepted the tree is saved
as .jtree and written back as safetensors (_to_safetensors), which is read again and compared.
The only exceptions allowed out are jtree.Error subclasses: a TypeError, KeyError, OverflowError,
MemoryError, RecursionError or a crash (a map past the end of the file: SIGBUS) is a finding.

Usage:
  fuzz_convert_safetensors.py [libFuzzer flags] CORPUS_DIR...   fuzz (atheris)
  fuzz_convert_safetensors.py --replay PATH...                  run files or directories once
  fuzz_convert_safetensors.py --make-corpus DIR                 write seeds (safetensors' own
                                                                save_file, and jtree's writer)

tests/python/test_convert_hostile.py runs a mutation loop over the same entry point without
atheris, from these seeds.
"""
from __future__ import annotations

import os
import sys
import tempfile
from typing import List

# The command line shared by the harnesses of this folder (also when a test imports this file
# by its path, with fuzz/python not on sys.path).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness_main  # noqa: E402

if harness_main.fuzzing():
    import atheris

    with atheris.instrument_imports(include=["jtree"]):
        import jtree
        from jtree.convert import _from_safetensors, _to_safetensors
        from jtree.convert._driver import leaves, same_leaf
else:
    import jtree
    from jtree.convert import _from_safetensors, _to_safetensors
    from jtree.convert._driver import leaves, same_leaf

import numpy as np

_SCRATCH = tempfile.mkdtemp(prefix="jtree-fuzz-safetensors-")


def _array(leaf):
    return np.asarray(leaf.fetch() if hasattr(leaf, "fetch") else leaf)


def test_one_input(data: bytes) -> None:
    """Opens ``data`` as a safetensors file; reads every tensor; round-trips accepted files
    (jtree -> safetensors -> read again: the same tensors, bit for bit)."""
    src = os.path.join(_SCRATCH, "in.safetensors")
    with open(src, "wb") as f:
        f.write(data)
    try:
        source = _from_safetensors.open_source(src)
    except jtree.Error:
        return
    try:
        arrays = {}
        for path, leaf in leaves(source.tree):
            a = _array(leaf)
            np.ascontiguousarray(a).reshape(-1).view(np.uint8).sum()
            arrays[path[0]] = a
        if sum(a.nbytes for a in arrays.values()) > 64 << 20:
            return  # a valid header over a large file: reading it was the test
        mid = os.path.join(_SCRATCH, "mid.jtree")
        out = os.path.join(_SCRATCH, "out.safetensors")
        try:
            jtree.save(source.tree, mid, metadata=source.metadata or None)
            with jtree.open(mid) as f:
                _to_safetensors.write(f, out)
        except jtree.Error:
            return  # (names a '.'-join makes ambiguous, dtypes safetensors lacks...)
        back = _from_safetensors.open_source(out)
        try:
            got = {p[0]: _array(x) for p, x in leaves(back.tree)}
            if list(got) != list(arrays) or back.metadata != source.metadata:
                raise AssertionError("round trip changed the names or the metadata")
            for k, a in arrays.items():
                if not same_leaf(a, got[k]):
                    raise AssertionError(f"round trip changed tensor {k!r}")
        finally:
            back.close()
    finally:
        source.close()


def make_corpus(directory: str) -> None:
    """Seeds: files written by safetensors' own save_file (NumPy and torch: bf16, float8, ints,
    bool, 0-d, empty, metadata) and one by jtree's writer (8-byte aligned header)."""
    os.makedirs(directory, exist_ok=True)
    from safetensors.numpy import save_file  # noqa: PLC0415

    save_file({"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones(3, np.int64),
               "m": np.array([True, False]), "s": np.array(2.0), "e": np.zeros((0, 4), np.int8)},
              os.path.join(directory, "seed0.safetensors"), metadata={"format": "np"})
    try:
        import torch  # noqa: PLC0415
        from safetensors.torch import save_file as save_torch  # noqa: PLC0415

        w = torch.arange(8, dtype=torch.float32).reshape(2, 4)
        save_torch({"w.bf16": w.to(torch.bfloat16), "w.f8": w.to(torch.float8_e4m3fn),
                    "w.f16": w.half(), "i": torch.arange(3, dtype=torch.int32)},
                   os.path.join(directory, "seed1.safetensors"), metadata={"format": "pt"})
    except ImportError:
        pass
    mid = os.path.join(_SCRATCH, "seed.jtree")
    jtree.save({"x": np.arange(5, dtype=np.uint16), "y": {"z": np.ones((2, 2), np.float64)}},
               mid, metadata={"k": "v"})
    with jtree.open(mid) as f:
        _to_safetensors.write(f, os.path.join(directory, "seed2.safetensors"))


def replay(paths: List[str]) -> int:
    """Runs every file under ``paths`` once; returns 1 if any raised."""
    return harness_main.replay(test_one_input, paths)


if __name__ == "__main__":
    harness_main.main(test_one_input, make_corpus, scratch=_SCRATCH)
