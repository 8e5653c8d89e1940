"""Per-leaf cost of a save and a load: a tree of many tiny arrays, where the data is nothing and
the work per leaf is everything.

    PYTHONPATH=<package> .venv/bin/python bench/python/many_leaves.py --leaves 100000 --runs 5

The tree is {"layer<i>": {"w<j>": float32[4]}} in dicts of 100. Each run saves and loads it
with every system in turn (so a busy moment hits all of them) after one untimed round, into a
temporary directory (tmpfs when /dev/shm has room); the table gives medians and the ratio to safetensors (its
NumPy API: one flat dict, keys joined with "."). flax's msgpack is included when flax is
installed; with torch installed, the same tree as torch tensors: jtree.load(framework="torch")
and safetensors.torch (their ratio is to safetensors.torch). The "general" rows load the same
file through jtree's general loader (what every whole load did before the plain load,
jtree._load_plain). Unlike run.py, everything runs in this one process.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from typing import Any, Callable, Dict, List, Tuple

import numpy as np

import jtree


def make_tree(leaves: int) -> Dict[str, Dict[str, np.ndarray]]:
    per = 100
    return {f"layer{i}": {f"w{j}": np.full((4,), i * per + j, np.float32)
                          for j in range(min(per, leaves - i * per))}
            for i in range((leaves + per - 1) // per)}


def systems(tree: Any, d: str) -> List[Tuple[str, Callable[[], None], Callable[[], Any]]]:
    out = []
    p = os.path.join(d, "t.jtree")
    out.append(("jtree", lambda: jtree.save(tree, p), lambda: jtree.load(p)))
    out.append(("jtree raw", lambda: jtree.save(tree, p, compression=None),
                lambda: jtree.load(p)))
    out.append(("jtree raw, general", lambda: jtree.save(tree, p, compression=None),
                lambda: general(lambda: jtree.load(p))))
    from safetensors.numpy import load_file, save_file  # noqa: PLC0415

    flat = {f"{a}.{b}": v for a, sub in tree.items() for b, v in sub.items()}
    st = os.path.join(d, "t.safetensors")
    out.append(("safetensors", lambda: save_file(flat, st), lambda: load_file(st)))
    try:
        from flax import serialization  # noqa: PLC0415
    except ImportError:
        print("(flax is not installed: no flax row)")
    else:
        fx = os.path.join(d, "t.msgpack")

        def flax_save() -> None:
            with open(fx, "wb") as f:
                f.write(serialization.msgpack_serialize(tree))

        def flax_load() -> Any:
            with open(fx, "rb") as f:
                return serialization.msgpack_restore(f.read())

        out.append(("flax msgpack", flax_save, flax_load))
    try:
        import torch  # noqa: PLC0415
        from safetensors.torch import load_file as load_t  # noqa: PLC0415
        from safetensors.torch import save_file as save_t  # noqa: PLC0415
    except ImportError:
        print("(torch is not installed: no torch rows)")
    else:
        tflat = {k: torch.from_numpy(v) for k, v in flat.items()}
        st_t = os.path.join(d, "t_torch.safetensors")
        out.append(("jtree (torch)", lambda: jtree.save(tree, p, compression=None),
                    lambda: jtree.load(p, framework="torch")))
        out.append(("jtree general (torch)", lambda: jtree.save(tree, p, compression=None),
                    lambda: general(lambda: jtree.load(p, framework="torch"))))
        out.append(("safetensors (torch)", lambda: save_t(tflat, st_t), lambda: load_t(st_t)))
    return out


def general(load: Callable[[], Any]) -> Any:
    """``load()`` through jtree's general loader only, not the plain load's one native pass
    (jtree._load_plain: what every whole load did before it): the "general" rows."""
    from jtree import _load_plain  # noqa: PLC0415

    applies = _load_plain.applies
    _load_plain.applies = lambda o: False
    try:
        return load()
    finally:
        _load_plain.applies = applies


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--leaves", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    tree = make_tree(args.leaves)
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(dir=base) as d:
        rows = systems(tree, d)
        times: Dict[str, Dict[str, List[float]]] = {n: {"save": [], "load": []} for n, _, _ in rows}
        for name, save, load in rows:  # untimed: imports, first-use caches, page faults
            save()
            load()
        for _ in range(args.runs):
            for name, save, load in rows:
                times[name]["save"].append(timed(save))
                times[name]["load"].append(timed(load))
    med = {n: {op: statistics.median(v) for op, v in ops.items()} for n, ops in times.items()}
    print(f"{args.leaves:,} leaves of float32[4], median of {args.runs} runs "
          f"(jtree {jtree.__version__}); x st: over safetensors of the same framework")
    print(f"{'system':<22} {'save':>9} {'x st':>6} {'load':>9} {'x st':>6}")
    for name, m in med.items():
        ref = med["safetensors (torch)" if name.endswith("(torch)") else "safetensors"]
        print(f"{name:<22} {m['save']:8.3f}s {m['save'] / ref['save']:6.2f} "
              f"{m['load']:8.3f}s {m['load'] / ref['load']:6.2f}")


if __name__ == "__main__":
    main()
