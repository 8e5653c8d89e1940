"""Fuzzing jtree's GGUF reader (python/jtree/convert/_gguf_parse.py, _from_gguf.py) with atheris.

Each input is a whole GGUF file. It is written to a scratch path and opened the way
`jtree convert` opens it (_from_gguf.open_source: header parsed and validated, every tensor a map
of its byte range); every tensor is then read, and when the header was accepted the tree is
saved as .jtree and written back as GGUF (_to_gguf). The only exceptions allowed out are
jtree.Error subclasses: a TypeError, IndexError, MemoryError, RecursionError, an overlong call
(the parser must never loop over a count the file cannot hold) is a finding.

Usage:
  fuzz_convert_gguf.py [libFuzzer flags] CORPUS_DIR...   fuzz (atheris)
  fuzz_convert_gguf.py --replay PATH...                  run files or directories once
  fuzz_convert_gguf.py --make-corpus DIR                 write seeds (files GGUFWriter wrote)

tests/python/test_convert_gguf.py runs a mutation loop over the same entry point without
atheris, and replays the seeds.
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
        from jtree.convert import _from_gguf, _to_gguf
else:
    import jtree
    from jtree.convert import _from_gguf, _to_gguf

import numpy as np

_SCRATCH = tempfile.mkdtemp(prefix="jtree-fuzz-gguf-")


def test_one_input(data: bytes) -> None:
    """Opens ``data`` as a GGUF file; reads every tensor; round-trips accepted files."""
    src = os.path.join(_SCRATCH, "in.gguf")
    with open(src, "wb") as f:
        f.write(data)
    try:
        source = _from_gguf.open_source(src)
    except jtree.Error:
        return
    try:
        tree = source.tree
        for leaf in tree["tensors"].values():
            a = leaf.fetch() if hasattr(leaf, "fetch") else leaf
            np.ascontiguousarray(a).reshape(-1).view(np.uint8).sum()
        if sum(getattr(a, "nbytes", 0) for a in tree["tensors"].values()) > 64 << 20:
            return  # a valid header over a large file: reading it was the test
        mid = os.path.join(_SCRATCH, "mid.jtree")
        try:
            jtree.save(tree, mid)
            with jtree.open(mid) as f:
                _to_gguf.write(f, os.path.join(_SCRATCH, "out.gguf"))
        except jtree.Error:
            pass
    finally:
        source.close()


def make_corpus(directory: str) -> None:
    """Seeds: small GGUF files written by GGUFWriter (every key-value type, float and
    quantized tensors)."""
    import gguf
    from gguf import GGMLQuantizationType as Q

    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 64)).astype(np.float32)
    for i, (qt, arch) in enumerate([(None, "llama"), (Q.Q8_0, "gemma"), (Q.Q4_0, ""),
                                    (Q.BF16, "x")]):
        path = os.path.join(directory, f"seed{i}.gguf")
        w = gguf.GGUFWriter(path, arch=arch)
        w.add_uint32("a.u32", 7)
        w.add_float32("a.f32", 0.5)
        w.add_bool("a.b", True)
        w.add_string("a.s", "text")
        w.add_token_list(["<s>", "b", "c"])
        w.add_key_value("a.arr", [1, 2], gguf.GGUFValueType.ARRAY,
                        sub_type=gguf.GGUFValueType.INT64)
        if qt is None:
            w.add_tensor("w", x)
            w.add_tensor("s", np.array(1.0, np.float32).reshape(()))
        else:
            w.add_tensor("w", gguf.quants.quantize(x, qt), raw_dtype=qt)
            w.add_tensor("h", x.astype(np.float16))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()


def replay(paths: List[str]) -> int:
    """Runs every file under ``paths`` once; returns 1 if any raised."""
    return harness_main.replay(test_one_input, paths)


if __name__ == "__main__":
    harness_main.main(test_one_input, make_corpus, scratch=_SCRATCH)
