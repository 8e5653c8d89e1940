"""Fuzzing the Python load path with atheris (https://github.com/google/atheris).

Each input is a .jtree file followed by 8 option bytes (the layout of fuzz/corpus/open: a seed
is a valid file plus its options, and mutating the options never shifts the file). The file is
written to a scratch path and read through the public Python API — jtree.open and its views
(Node, LazyArray slices, verify), jtree.load_pytreedef, jtree.load (whole, with a key-path
mask, with a pytree mask, into torch or JAX when installed), jtree.nonblocking_load — and the
only exceptions allowed out are jtree.Error subclasses. Anything else (a TypeError, a
MemoryError, a RecursionError, a crash of the native module) is a finding.

Options (the input's last 8 bytes):
  [0] bit 0: recompute the header, index, footer and preamble hashes (a hostile writer who
      computes hashes: mutations then reach the checks behind them, and the Python layer);
      bit 1: open with tight limits (jtree.open(limits=...)); bit 2: verify=False;
      bit 3: strict=False; bit 4: mmap=False
  [1] what to do (see `run`), [2] the framework (numpy, torch, jax),
  [3..7] seeds for masks, key patterns and slices

Usage:
  fuzz_load.py [libFuzzer flags] CORPUS_DIR...      fuzz (atheris; the first dir gets new inputs)
  fuzz_load.py --replay PATH...                     run files or directories once, no atheris
  fuzz_load.py --make-corpus DIR                    write seeds: files saved by jtree.save of
                                                    varied trees, each with option tails

The Python layer is instrumented (atheris.instrument_imports on the jtree package); the native
module is not (it is the C++ library, fuzzed by the libFuzzer targets of fuzz/).
"""
from __future__ import annotations

import atexit
import collections
import ctypes
import ctypes.util
import io
import os
import random
import shutil
import struct
import sys
import tempfile
from typing import Any, List, Optional

# atheris is needed only to fuzz: the replay runs without it.
# The command line shared by the harnesses of this folder (also when a test imports this file
# by its path, with fuzz/python not on sys.path).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness_main  # noqa: E402

if harness_main.fuzzing():
    import atheris

    with atheris.instrument_imports(include=["jtree"]):
        import jtree
else:
    import jtree

import numpy as np

OPTION_BYTES = 8
PREAMBLE, FOOTER = 128, 128
SLOTS = (64, 96)

# Frameworks: numpy always; torch and jax when installed (imported once, here).
FRAMEWORKS: List[str] = ["numpy"]
try:
    import torch  # noqa: F401

    FRAMEWORKS.append("torch")
except Exception:  # noqa: BLE001 - not installed, or broken: fuzz without it
    pass
if os.environ.get("JTREE_FUZZ_JAX", "1") != "0":
    try:
        import jax  # noqa: F401

        FRAMEWORKS.append("jax")
    except Exception:  # noqa: BLE001
        pass

# ---- XXH3-64 through the system's libxxhash (the library jtree links), for hash repair ----

_xxh = None
for _name in (ctypes.util.find_library("xxhash"), "libxxhash.so.0", "libxxhash.so"):
    if not _name:
        continue
    try:
        _xxh = ctypes.CDLL(_name)
        _xxh.XXH3_64bits.restype = ctypes.c_uint64
        _xxh.XXH3_64bits.argtypes = (ctypes.c_char_p, ctypes.c_size_t)
        break
    except OSError:
        _xxh = None


def xxh3(data: bytes) -> int:
    return _xxh.XXH3_64bits(data, len(data)) if _xxh is not None else 0


def rehash(f: bytearray) -> None:
    """Recomputes the metadata hashes in place (fuzz_util.h's rehash, without the chunk
    checksums): the index and header hashes in the footer, the footer's, the commit slots',
    the generation-0 header hash and the preamble's. Ranges outside the file are left alone."""
    n = len(f)
    if _xxh is None or n < PREAMBLE + FOOTER:
        return
    foot = n - FOOTER

    def u64(at: int) -> int:
        return struct.unpack_from("<Q", f, at)[0]

    def put(at: int, v: int) -> None:
        struct.pack_into("<Q", f, at, v)

    def inside(off: int, size: int) -> bool:
        return off <= n and size <= n - off

    index_off, index_size = u64(foot), u64(foot + 8)
    header_off, header_size = u64(foot + 24), u64(foot + 32)
    if inside(index_off, index_size):
        put(foot + 16, xxh3(bytes(f[index_off:index_off + index_size])))
    if inside(header_off, header_size):
        put(foot + 40, xxh3(bytes(f[header_off:header_off + header_size])))
    pre_size = u64(40)
    if inside(PREAMBLE, pre_size):
        put(48, xxh3(bytes(f[PREAMBLE:PREAMBLE + pre_size])))
    put(foot + 112, xxh3(bytes(f[foot:foot + 112])))
    for s in SLOTS:
        if any(f[s:s + 32]):
            put(s + 24, xxh3(bytes(f[s:s + 24])))
    put(56, xxh3(bytes(f[0:56])))


# ---- one input ----

TIGHT_LIMITS = dict(max_header_bytes=1 << 20, max_index_bytes=1 << 20, max_nodes=10000,
                    max_leaves=10000, max_depth=32, max_rank=8, max_chunk_bytes=1 << 20,
                    max_string_bytes=1024, max_leaf_bytes=64 << 20, max_total_bytes=64 << 20)

# The scratch file every input is written to (one per process, removed at exit).
_SCRATCH_DIR = tempfile.mkdtemp(prefix="jtree-atheris-")
_SCRATCH = os.path.join(_SCRATCH_DIR, "input.jtree")
atexit.register(shutil.rmtree, _SCRATCH_DIR, True)


def walk(node: Any, rng: random.Random, budget: List[int]) -> None:
    """Visits an open file's views: containers by key and position, arrays by random slices,
    other leaves by value. Bounded by `budget` (visits left)."""
    if budget[0] <= 0:
        return
    budget[0] -= 1
    if isinstance(node, jtree.Node):
        _ = (node.kind, node.type_name, node.path, len(node), repr(node))
        keys = node.keys()
        for k in keys[:8]:
            _ = k in node
            walk(node[k], rng, budget)
        if not node.keyed() and len(node):
            walk(node[-1], rng, budget)
    elif isinstance(node, jtree.LazyArray):
        _ = (node.shape, node.dtype, node.ndim, node.size, node.nbytes, node.chunk_shape,
             node.spec, repr(node))
        if node.nbytes > (16 << 20):
            return
        index = []
        for n in node.shape:
            pick = rng.randrange(4)
            if pick == 0 or n == 0:
                index.append(slice(None))
            elif pick == 1:
                index.append(rng.randrange(-n, n))
            else:
                a, b = sorted((rng.randrange(n + 1), rng.randrange(n + 1)))
                index.append(slice(a, b, rng.choice((1, 1, 2, -1))))
        if rng.randrange(4) == 0:
            index.insert(rng.randrange(len(index) + 1), None)
        np.asarray(node[tuple(index)])
        if rng.randrange(4) == 0:
            node.read()


def keys_mask(structure: Any, rng: random.Random) -> Any:
    """A pytree mask from the structure: each leaf kept (True), skipped (None, False, ...)."""
    if isinstance(structure, dict):
        return type(structure)((k, keys_mask(v, rng)) for k, v in structure.items())
    if isinstance(structure, tuple) and hasattr(structure, "_fields"):
        return type(structure)(*(keys_mask(v, rng) for v in structure))
    if isinstance(structure, (list, tuple)):
        return type(structure)(keys_mask(v, rng) for v in structure)
    if isinstance(structure, jtree.LeafSpec):
        return rng.choice((True, True, None, False, ..., structure))
    return structure


def run(path: str, opt: bytes) -> None:
    flags, what, fw = opt[0], opt[1] % 8, opt[2]
    rng = random.Random(int.from_bytes(opt[3:8], "little"))
    limits = TIGHT_LIMITS if flags & 2 else None
    verify = not flags & 4
    strict = not flags & 8
    mapped = not flags & 16
    framework = FRAMEWORKS[fw % len(FRAMEWORKS)]
    if what == 0:  # open lazily, walk the views
        with jtree.open(path, verify=verify, strict=strict, mmap=mapped,
                        limits=limits) as f:
            _ = (f.metadata, f.info(), f.keys(), len(f), repr(f), f.io_stats())
            walk(f.root, rng, [64])
    elif what == 1:  # the structure only
        jtree.load_pytreedef(path, strict=strict)
    elif what == 2:  # everything: from the path, from bytes (loads), from a file object
        how = rng.randrange(3)
        if how == 0:
            jtree.load(path, framework=framework, verify=verify, strict=strict, threads=1)
        else:
            with open(path, "rb") as fh:
                data = fh.read()
            src = data if how == 1 else io.BytesIO(data)
            jtree.load(src, framework=framework, verify=verify, strict=strict, threads=1)
    elif what == 3:  # a mask built from the structure
        with jtree.open(path, limits=limits, strict=strict) as f:
            mask = keys_mask(f.structure(), rng)
            jtree.load(f, mask, framework=framework, verify=verify)
    elif what == 4:  # key-path patterns
        pats = [rng.choice(("*", "**", "**/*", "0", "a/*", "params/**", "*/0", "step"))
                for _ in range(1 + rng.randrange(3))]
        jtree.load(path, keys=pats, framework=framework, strict=strict, prune=rng.random() < 0.5)
    elif what == 5:  # a cast and pad/truncate to the structure's own specs
        jtree.load(path, cast=rng.choice((np.float32, {"bfloat16": "float32"}, None)),
                   framework=framework, strict=strict)
    elif what == 6:  # checksums and byte accounting
        with jtree.open(path, limits=limits) as f:
            f.verify()
            f.load(framework="numpy")
    else:  # in the background
        fut = jtree.nonblocking_load(path, strict=strict, framework=framework)
        _ = fut.pytree
        fut.result()


def test_one_input(data: bytes) -> None:
    if len(data) > OPTION_BYTES:
        payload, opt = bytearray(data[:-OPTION_BYTES]), data[-OPTION_BYTES:]
    else:
        payload, opt = bytearray(), bytes(data).ljust(OPTION_BYTES, b"\0")
    if opt[0] & 1:
        rehash(payload)
    with open(_SCRATCH, "wb") as out:
        out.write(payload)
    try:
        run(_SCRATCH, opt)
    except jtree.Error:
        pass  # a refusal: what hostile bytes must give
    # Anything else propagates: atheris reports it (with the input) as a finding.


# ---- seeds ----

def seed_trees() -> List[Any]:
    """Trees of every kind the Python layer writes and reads back."""
    Point = collections.namedtuple("Point", ["x", "y"])
    rng = np.random.default_rng(7)
    trees: List[Any] = [
        {"params": {"w": rng.standard_normal((16, 8), dtype=np.float32),
                    "b": np.zeros(8, np.float32)}, "step": 1000},
        [1, 2.5, True, None, complex(1, -2), "text", b"bytes", bytearray(b"ba"), 2 ** 100],
        (np.arange(24, dtype=np.int64).reshape(2, 3, 4), np.array(3.5), np.float32(1.5)),
        collections.OrderedDict(a=np.array([1, 2, 3], np.uint8), b=Point(np.int16(3), "y")),
        {"empty": np.zeros((0, 4), np.float64), "bool": np.array([True, False]),
         "c64": np.ones(3, np.complex64), "nested": [[[]], {}, ()]},
        {"emb": rng.integers(0, 255, (40, 64), dtype=np.uint8), "scale": 0.5},
    ]
    try:
        import ml_dtypes  # noqa: PLC0415

        trees.append({"bf16": np.ones((4, 4), ml_dtypes.bfloat16),
                      "f8": np.ones(8, ml_dtypes.float8_e4m3fn),
                      "i4": np.array([1, -2, 3], ml_dtypes.int4)})
        # The format-version-2 floats.
        trees.append({name: np.ones(6, getattr(ml_dtypes, name))
                      for name in ("float8_e3m4", "float8_e4m3", "float8_e8m0fnu",
                                   "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn")
                      if hasattr(ml_dtypes, name)})
    except ImportError:
        pass
    # A rectilinear chunk grid (format version 2): uneven blocks cut the grid at their edges.
    whole = np.arange(50 * 3, dtype=np.int32).reshape(50, 3)
    trees.append({"uneven": jtree.GlobalArray([whole[:17], whole[17:]],
                                              [(slice(0, 17),), (slice(17, 50),)], (50, 3))})
    tied = np.arange(10, dtype=np.float32)
    trees.append({"a": tied, "b": tied})
    trees.append({"pickled": {1, 2}})  # saved with allow_pickle=True, refused on load
    return trees


def make_corpus(out_dir: str) -> None:
    os.makedirs(out_dir, exist_ok=True)
    tmp = os.path.join(_SCRATCH_DIR, "seed.jtree")
    n = 0
    for i, tree in enumerate(seed_trees()):
        for j, kw in enumerate(({"metadata": {"note": "seed"}}, {"compression": None},
                                {"chunk_bytes": 256, "inline_threshold": 0})):
            jtree.save(tree, tmp, allow_pickle=True, **kw)
            with open(tmp, "rb") as f:
                data = f.read()
            for what in sorted({(i + j + 3 * k) % 8 for k in range(3)}):  # 3 of the 8
                # flags: rehash on (mutations reach the Python layer), otherwise varied.
                opt = bytes([1 | (what & 1) << 3, what, (i + j) % 3, i, j, what, 0, 0])
                name = os.path.join(out_dir, f"tree{i}-opt{j}-op{what}")
                with open(name, "wb") as f:
                    f.write(data + opt)
                n += 1
    print(f"wrote {n} seeds to {out_dir}")


def replay(paths: List[str]) -> int:
    """Runs every file under ``paths`` once; returns 1 if any raised."""
    return harness_main.replay(test_one_input, paths, f" ({', '.join(FRAMEWORKS)})")


if __name__ == "__main__":
    harness_main.main(test_one_input, make_corpus, replay_note=f" ({', '.join(FRAMEWORKS)})")
