"""The three benchmark workloads of issue 6, generated from a seed and scaled by a factor.

    llm    an LLM-like training checkpoint (about 1 GiB at scale 1): 226 bf16 weight
           matrices with trained-like values (normal, small std; some layers with outliers),
           bf16 norm vectors, fp32 Adam moments (mu, nu) of every parameter, Python
           scalars and strings.
    small  many small leaves: 10,000 fp32/bf16/int32 arrays of 1 KiB to 100 KiB (log-uniform)
           and 10,000 Python scalars (the shape of per-parameter optimizer states).
    emb    one bf16 embedding table of 262,144 x 4,096 (2 GiB), read by row slices.

Generating a GiB of normal numbers takes a minute on a small machine, so a workload is made
once and cached on disk: ``data.bin`` holds every array's bytes (64-byte aligned) and
``manifest.json`` the tree (nested dicts; an array leaf is ``{"__array__": [offset, dtype,
shape]}``, other leaves are the JSON values themselves). ``load_tree`` rebuilds the tree in
fresh, private process memory (NumPy arrays; bf16 as ml_dtypes.bfloat16), the way a training
job holds its state before a save.
"""
from __future__ import annotations

import json
import math
import os
from typing import Any, Dict, Iterator, List, Tuple

import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = {"bfloat16": BF16, "float32": np.dtype(np.float32), "int32": np.dtype(np.int32)}
WORKLOADS = ("llm", "small", "emb")
FORMAT_VERSION = 3  # bump when generation changes: old caches are rebuilt

KeyPath = Tuple[str, ...]


# ---- what each workload is (sizes and the leaf a partial load reads) ------------------------

def llm_shape(scale: float) -> Dict[str, int]:
    """Model dimensions at a scale. Scale 1: d=512, ffn=1408, 32 layers, vocab 8192: 111 M
    parameters -> 222 MB of bf16 weights + 888 MB of fp32 moments = 1.03 GiB."""
    layers = max(2, round(32 * scale))
    d = 512 if scale >= 0.25 else 256
    return {"layers": layers, "d": d, "ffn": int(d * 2.75), "vocab": 8192 if scale >= 0.25 else 2048}


def small_count(scale: float) -> int:
    """Number of parameters (each with two arrays and two scalars): 5,000 at scale 1."""
    return max(50, round(5000 * scale))


def emb_rows(scale: float) -> int:
    return max(2048, round(262144 * scale))


EMB_DIM = 4096


def partial_targets(workload: str, scale: float) -> Dict[str, Any]:
    """The leaf a one-leaf load reads, and the rows a slice reads (emb)."""
    if workload == "llm":
        n = llm_shape(scale)["layers"]
        return {"leaf": ("params", "layers", str(n // 2), "mlp", "up")}
    if workload == "small":
        n = small_count(scale)
        g, p = divmod(n // 2, 50)
        return {"leaf": ("opt", f"g{g:03d}", f"p{p:02d}", "mu")}
    rows = emb_rows(scale)
    start = 1000 if rows >= 8000 else rows // 4
    return {"leaf": ("emb",), "slice": (start, start + min(1000, rows // 4))}


# ---- generation ---------------------------------------------------------------------------------

def _to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16, rounding to nearest even, in integer ops (fast, no float64 temp)."""
    u = x.view(np.uint32)
    r = (u >> 16) & 1
    r += 0x7FFF
    r += u
    return (r >> 16).astype(np.uint16).view(BF16)


class _Writer:
    """Appends arrays to data.bin and returns their manifest entries."""

    def __init__(self, f):
        self.f = f
        self.off = 0

    def add(self, a: np.ndarray) -> Dict[str, Any]:
        pad = (-self.off) % 64
        if pad:
            self.f.write(b"\0" * pad)
            self.off += pad
        a = np.ascontiguousarray(a)
        self.f.write(a.view(np.uint8).reshape(-1).data)
        entry = {"__array__": [self.off, a.dtype.name, list(a.shape)]}
        self.off += a.nbytes
        return entry


def _normal(rng: np.random.Generator, shape, std: float) -> np.ndarray:
    x = rng.standard_normal(shape, dtype=np.float32)
    x *= np.float32(std)
    return x


def _gen_llm(w: _Writer, rng: np.random.Generator, scale: float) -> Dict[str, Any]:
    s = llm_shape(scale)
    d, ffn, vocab = s["d"], s["ffn"], s["vocab"]
    shapes: List[Tuple[KeyPath, Tuple[int, ...], float, str]] = []  # path, shape, std, kind
    shapes.append((("embed",), (vocab, d), 0.02, "w"))
    for i in range(s["layers"]):
        li = ("layers", str(i))
        for name in ("q", "k", "v", "o"):
            shapes.append((li + ("attn", name), (d, d), 0.02, "w"))
        shapes.append((li + ("mlp", "gate"), (d, ffn), 0.02, "w"))
        shapes.append((li + ("mlp", "up"), (d, ffn), 0.02, "w"))
        shapes.append((li + ("mlp", "down"), (ffn, d), 0.02 / math.sqrt(2.75), "w"))
        shapes.append((li + ("norm1",), (d,), 0.05, "norm"))
        shapes.append((li + ("norm2",), (d,), 0.05, "norm"))
    shapes.append((("final_norm",), (d,), 0.05, "norm"))
    shapes.append((("lm_head",), (d, vocab), 0.01, "w"))

    def put(tree: Dict[str, Any], path: KeyPath, value: Any) -> None:
        for k in path[:-1]:
            tree = tree.setdefault(k, {})
        tree[path[-1]] = value

    params: Dict[str, Any] = {}
    mus: List[Tuple[KeyPath, Tuple[int, ...], float]] = []
    for idx, (path, shape, std, kind) in enumerate(shapes):
        if kind == "norm":
            x = _normal(rng, shape, std)
            x += np.float32(1.0)
        else:
            x = _normal(rng, shape, std)
            # Some layers carry outliers, as trained LLMs do: a few large single weights and a
            # few "outlier feature" columns with a larger scale.
            if path[0] == "layers" and int(path[1]) % 4 == 3 and path[-1] in ("o", "down"):
                n_out = max(1, x.size // 2000)
                pos = rng.integers(0, x.size, n_out)
                x.reshape(-1)[pos] = _normal(rng, (n_out,), std * 40)
                cols = rng.integers(0, shape[1], max(1, shape[1] // 256))
                x[:, cols] *= np.float32(8.0)
        put(params, path, w.add(_to_bf16(x)))
        del x
        mus.append((path, shape, std))
    opt: Dict[str, Any] = {"mu": {}, "nu": {}}
    for path, shape, std in mus:
        # Adam moments in fp32: mu ~ a small multiple of recent gradients; nu ~ their
        # squares (positive, spread over a few decades).
        g = _normal(rng, shape, 1e-3 * std / 0.02)
        put(opt["mu"], path, w.add(g))
        g2 = _normal(rng, shape, 3e-3 * std / 0.02)
        np.square(g2, out=g2)
        g2 += np.float32(1e-12)
        put(opt["nu"], path, w.add(g2))
        del g, g2
    return {
        "params": params,
        "opt_state": {**opt, "count": 120000, "lr": 3e-4, "b1": 0.9, "b2": 0.95},
        "step": 120000,
        "loss_scale": 65536.0,
        "converged": False,
        "config": {"name": "bench-llm", "activation": "silu", "norm": "rmsnorm",
                   "tokenizer": "bench-tokenizer-v1", "dtype": "bfloat16",
                   "notes": "synthetic, trained-like value distributions " * 4},
    }


def _gen_small(w: _Writer, rng: np.random.Generator, scale: float) -> Dict[str, Any]:
    n = small_count(scale)
    groups: Dict[str, Any] = {}
    for i in range(n):
        g, p = divmod(i, 50)
        nbytes = int(math.exp(rng.uniform(math.log(1024), math.log(100 * 1024))))
        r = rng.random()
        dt = np.float32 if r < 0.7 else (BF16 if r < 0.9 else np.int32)
        n_el = max(1, nbytes // np.dtype(dt).itemsize)
        # A 2-d shape when it divides nicely, as parameters have.
        shape: Tuple[int, ...] = (n_el,)
        for cols in (256, 128, 64):
            if n_el % cols == 0 and n_el >= 2 * cols:
                shape = (n_el // cols, cols)
                break
        std = 10 ** rng.uniform(-4, -1)
        leaves = {}
        for name in ("mu", "nu"):
            if dt == np.int32:
                a = rng.integers(0, 1000, shape, dtype=np.int32)
            else:
                x = _normal(rng, shape, std)
                if name == "nu":
                    np.square(x, out=x)
                a = _to_bf16(x) if dt == BF16 else x
            leaves[name] = w.add(a)
        leaves["count"] = int(rng.integers(0, 1 << 20))
        leaves["lr"] = float(rng.uniform(1e-5, 1e-3))
        groups.setdefault(f"g{g:03d}", {})[f"p{p:02d}"] = leaves
    return {"opt": groups, "step": 777, "schedule": "cosine"}


def _gen_emb(w: _Writer, rng: np.random.Generator, scale: float) -> Dict[str, Any]:
    rows = emb_rows(scale)
    # Written in 64 MiB pieces: the whole table never needs to be in memory as float32.
    block = max(1, (64 << 20) // (EMB_DIM * 4))
    pad = (-w.off) % 64
    w.f.write(b"\0" * pad)
    w.off += pad
    off = w.off
    for r0 in range(0, rows, block):
        x = _normal(rng, (min(block, rows - r0), EMB_DIM), 0.02)
        b = _to_bf16(x)
        w.f.write(b.view(np.uint8).reshape(-1).data)
        w.off += b.nbytes
    return {"emb": {"__array__": [off, "bfloat16", [rows, EMB_DIM]]}}


def cache_dir(root: str, workload: str, scale: float, seed: int) -> str:
    return os.path.join(root, f"{workload}-s{scale:g}-seed{seed}-v{FORMAT_VERSION}")


def ensure(root: str, workload: str, scale: float, seed: int) -> str:
    """Generates the workload into the cache unless it is there; returns its directory."""
    d = cache_dir(root, workload, scale, seed)
    if os.path.exists(os.path.join(d, "manifest.json")):
        return d
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng([seed, WORKLOADS.index(workload)])
    gen = {"llm": _gen_llm, "small": _gen_small, "emb": _gen_emb}[workload]
    with open(os.path.join(d, "data.bin"), "wb") as f:
        tree = gen(_Writer(f), rng, scale)
    tmp = os.path.join(d, "manifest.json.tmp")
    with open(tmp, "w") as f:
        json.dump({"workload": workload, "scale": scale, "seed": seed, "tree": tree}, f)
    os.replace(tmp, os.path.join(d, "manifest.json"))
    return d


def ensure_in_child(root: str, workload: str, scale: float, seed: int) -> str:
    """ensure() in a child process (the generator's arrays never enter the driver's memory),
    with its one-line report on stdout; returns the workload's directory."""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    subprocess.run([sys.executable, os.path.abspath(__file__), "--cache", root,
                    "--scale", str(scale), "--seed", str(seed), workload], check=True)
    return cache_dir(root, workload, scale, seed)


# ---- reading a cached workload back ---------------------------------------------------------------

def manifest(d: str) -> Dict[str, Any]:
    with open(os.path.join(d, "manifest.json")) as f:
        return json.load(f)


def _is_array(x: Any) -> bool:
    return isinstance(x, dict) and "__array__" in x


def iter_leaves(tree: Any, path: KeyPath = ()) -> Iterator[Tuple[KeyPath, Any]]:
    """(key path, leaf) for every leaf of a nested-dict tree, in insertion order. Manifest
    array entries count as leaves."""
    if isinstance(tree, dict) and not _is_array(tree):
        for k, v in tree.items():
            yield from iter_leaves(v, path + (k,))
    else:
        yield path, tree


def map_tree(fn, tree: Any, path: KeyPath = ()) -> Any:
    if isinstance(tree, dict) and not _is_array(tree):
        return {k: map_tree(fn, v, path + (k,)) for k, v in tree.items()}
    return fn(path, tree)


def get(tree: Any, path: KeyPath) -> Any:
    for k in path:
        tree = tree[k]
    return tree


def load_tree(d: str) -> Any:
    """The workload as nested dicts of NumPy arrays (private memory) and Python values."""
    m = manifest(d)
    with open(os.path.join(d, "data.bin"), "rb", buffering=0) as f:
        def leaf(_path: KeyPath, x: Any) -> Any:
            if not _is_array(x):
                return x
            off, dt, shape = x["__array__"]
            a = np.empty(shape, DTYPES[dt])
            buf = a.view(np.uint8).reshape(-1)
            f.seek(off)
            pos = 0
            while pos < buf.size:  # readinto may return less than asked for
                n = f.readinto(buf[pos:pos + (1 << 30)])
                if not n:
                    raise EOFError(f"{d}/data.bin ends early")
                pos += n
            return a
        return map_tree(leaf, m["tree"])


def array_specs(d: str) -> List[Tuple[KeyPath, int, str, List[int]]]:
    """(key path, offset, dtype, shape) of every array of a cached workload."""
    out = []
    for path, x in iter_leaves(manifest(d)["tree"]):
        if _is_array(x):
            off, dt, shape = x["__array__"]
            out.append((path, off, dt, shape))
    return out


def raw_bytes(d: str) -> int:
    """Bytes of array data (what 'raw' means in every ratio)."""
    return sum(math.prod(shape) * DTYPES[dt].itemsize for _p, _o, dt, shape in array_specs(d))


if __name__ == "__main__":
    import argparse
    import time

    ap = argparse.ArgumentParser(description="generate (or find) cached workloads")
    ap.add_argument("--cache", required=True)
    ap.add_argument("--scale", type=float, default=0.02)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("workloads", nargs="*", default=list(WORKLOADS))
    a = ap.parse_args()
    for wl in a.workloads:
        t = time.perf_counter()
        d = ensure(a.cache, wl, a.scale, a.seed)
        print(f"{wl}: {d} ({raw_bytes(d) / 2**20:.1f} MiB of arrays, {time.perf_counter() - t:.1f} s)")
