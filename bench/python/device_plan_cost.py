"""The Python side of a load into device memory: how long jtree's Python takes before and
after the native copy for ``jtree.load(f, out=tensors)`` and ``jtree.load(f, like)`` (the GPU
benchmark's torch rows, gpu_load.py), with the template fast path
(jtree._load_torch.from_template) and with the general per-leaf path it replaces; for
``jtree.load(f, device=...)``, the native pass (jtree._load_plain._load_to_device: the tree
planned and each array's device tensor allocated by Reader.load_plain, one Python call per
array for its torch.empty) against the Python planner's per-leaf fast path
(_load_torch.as_stored, what such loads took before the native pass); and for
``jtree.load(f, shardings=SingleDeviceSharding(d))`` (JAX, when installed) the fast paths
(the native pass, each array imported by jaxlib's DLPack function directly,
jtree._device_jax._import) against the general planning with ``jax.dlpack.from_dlpack`` per
array (``shardings=``), and the native pass against the planner's fast path
(_load_jax.as_stored), both with that import (``shardings= pass``); each pair in one run.

No GPU is needed: the loads go through jtree's host stand-in engine (the CPU stands for the
device, as in the tests), and the native staged copy is replaced by a stub, so what is timed
is Python alone (the native part is bench_device's). The tree is an LLM checkpoint's shape
(gpu_load.py's llm workload: per layer 9 bf16 weights and two float32 moments of each, plus
embeddings and heads; 873 arrays at 32 layers), with tiny arrays: the planning does not
depend on their size.

    PYTHONPATH=python .venv/bin/python bench/python/device_plan_cost.py --layers 32 --runs 21
    PYTHONPATH=python .venv/bin/python bench/python/device_plan_cost.py --fresh --runs 11

With ``--fresh`` each ``device=`` and ``shardings=`` load (native pass, and the planner's fast
path) runs in a fresh Python process instead, as a server's first load meets it: ``import
torch, jtree`` (and jax) before the clock, then ``jtree.open`` + the load timed, first calls
included, with the stand-in engine's real host copy (not stubbed); the first load of each way
is checked against a host load.

Prints, per call, the median [min, max] over --runs loads (one process, the two paths
alternated, after one load of each to warm up), and the fast path's time over the general
path's. (The JAX rows include the allocation of the load's device memory,
jtree._device_jax.allocate, compiled in the warm-up.)
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List


def llm_like(torch: Any, layers: int) -> Dict[str, Any]:
    """gpu_load.py's llm tree (bench/python/workloads.py), every array 4x4."""
    def w() -> Any:
        return torch.ones(4, 4, dtype=torch.bfloat16)

    def layer() -> Dict[str, Any]:
        return {"attn": {n: w() for n in "qkvo"}, "mlp": {n: w() for n in ("gate", "up", "down")},
                "norm1": w(), "norm2": w()}

    params = {"embed": w(), "layers": {str(i): layer() for i in range(layers)},
              "final_norm": w(), "lm_head": w()}

    def moments(t: Any) -> Any:
        return {k: moments(v) for k, v in t.items()} if isinstance(t, dict) else \
            torch.zeros(4, 4, dtype=torch.float32)

    return {"params": params, "opt": {"mu": moments(params), "nu": moments(params)},
            "step": 1000, "name": "llm"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=32, help="layers of the tree (32: 873 arrays)")
    ap.add_argument("--runs", type=int, default=21, help="loads per path and call")
    ap.add_argument("--fresh", action="store_true",
                    help="device= and shardings= loads, each in a fresh process")
    ap.add_argument("--child", nargs=3, metavar=("PATH", "CALL", "WAY"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return fresh_child(*a.child)
    if a.fresh:
        return fresh_main(a)

    import torch
    import jtree
    from jtree import _device, _device_jax, _load_jax, _load_plain, _load_torch

    try:
        import jax
        from jax.sharding import SingleDeviceSharding
    except ImportError:
        jax = None

    # The stub of the native staged copy: Python alone is timed.
    _device._native_load = lambda *_a, **_k: dict(
        direct_bytes=0, buffered_bytes=0, zero_copy_bytes=0, direct_io_note="",
        zero_copy_note="")
    # What each call's general path counts, checked below, so that a fast path that stopped
    # applying cannot pass for one: the leaves planned by the general torch planner
    # (_load_torch.tensor), and for JAX the leaves planned by the general JAX planner
    # (_load_jax.jax_array) and the arrays imported with jax.dlpack.from_dlpack.
    counts: Dict[str, int] = {}
    current = [""]

    def counting(fn: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kw: Any) -> Any:
            counts[current[0]] = counts.get(current[0], 0) + 1
            return fn(*args, **kw)
        return counted

    _load_torch.tensor = counting(_load_torch.tensor)
    # device=: the Python planner's leaves (_load_torch.as_stored), counted apart.
    as_stored_counts: Dict[str, int] = {}
    def counted_as_stored(real: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any) -> Any:
            as_stored_counts[current[0]] = as_stored_counts.get(current[0], 0) + 1
            return real(*args)
        return counted
    _load_torch.ADAPTER.as_stored = counted_as_stored(_load_torch.ADAPTER.as_stored)
    plain_applies = _load_plain.applies

    def use_native_pass(fast: bool) -> None:
        _load_plain.applies = plain_applies if fast else (lambda _o: False)
    fast_template = _load_torch.ADAPTER.from_template

    def use_templates(fast: bool) -> None:
        _load_torch.ADAPTER.from_template = fast_template if fast else (lambda *_a: None)

    fast_jax = _load_jax.ADAPTER.as_stored = counted_as_stored(_load_jax.ADAPTER.as_stored)

    def use_jax_fast_path(fast: bool) -> None:
        _load_jax.ADAPTER.as_stored = fast_jax if fast else (lambda *_a: None)
        _device_jax._import_unavailable = not fast
        use_native_pass(fast)

    calls: Dict[str, Any] = {
        "out=": (use_templates, lambda f, t: jtree.load(f, out=t)),
        "like=": (use_templates, lambda f, t: jtree.load(f, t)),
        "device=": (use_native_pass, lambda f, t: jtree.load(f, device="cpu")),
    }
    if jax is not None:
        jax.dlpack.from_dlpack = counting(jax.dlpack.from_dlpack)
        _load_jax.jax_array = counting(_load_jax.jax_array)
        sharding = SingleDeviceSharding(jax.devices("cpu")[0])
        calls["shardings="] = (use_jax_fast_path, lambda f, t: jax.block_until_ready(
            jtree.load(f, shardings=sharding)))
        # (The native pass against the planner's fast path, both importing as jaxlib does.)
        calls["shardings= pass"] = (use_native_pass, calls["shardings="][1])

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "llm.jtree")
        tree = llm_like(torch, a.layers)
        jtree.save(tree, path, compression=None)
        arrays = _count(torch, tree)

        def templates() -> Any:
            return {**tree, "params": _like(torch, tree["params"]),
                    "opt": _like(torch, tree["opt"])}

        times: Dict[str, List[float]] = {}
        with _device.host_stand_in_for_tests(), jtree.open(path) as f:
            for run in range(a.runs + 1):  # (run 0 warms up: first calls, JAX's compilation)
                if run == 1:
                    times.clear()
                    counts.clear()
                    as_stored_counts.clear()
                for name in ("fast", "general"):
                    for call, (use, load) in calls.items():
                        use(name == "fast")
                        current[0] = f"{call} {name}"
                        t = templates()
                        t0 = time.perf_counter()
                        load(f, t)
                        times.setdefault(f"{call} {name}", []).append(time.perf_counter() - t0)
                        use(True)

    for call in calls:
        # (device= and the JAX pass: what the planner's fast path planned.)
        seen = as_stored_counts if call in ("device=", "shardings= pass") else counts
        fast, general = seen.get(f"{call} fast", 0), seen.get(f"{call} general", 0)
        # (JAX's general path counts each array twice: planned, then imported.)
        expected = arrays * a.runs * (2 if call == "shardings=" else 1)
        if fast or general != expected:
            raise SystemExit(f"{call}: the fast path took the general one {fast} times, the "
                             f"general path {general} (expected 0 and {expected}): the "
                             f"comparison would be wrong")
    print(f"jtree {jtree.__version__}, torch {torch.__version__}, "
          f"{'jax ' + jax.__version__ if jax is not None else 'no jax (no JAX rows)'}, "
          f"{arrays} arrays, {a.runs} loads each, Python only (native copy stubbed), host "
          f"stand-in engine")
    for call in calls:
        med = {}
        for name in ("fast", "general"):
            ts = times[f"{call} {name}"]
            med[name] = statistics.median(ts)
            print(f"  jtree.load(f, {call:15s}) {name:7s}: {med[name] * 1e3:6.2f} ms "
                  f"[{min(ts) * 1e3:.2f}, {max(ts) * 1e3:.2f}]  "
                  f"({med[name] / arrays * 1e6:.1f} us an array)")
        print(f"  {call} fast / general: {med['fast'] / med['general']:.2f}x")


FRESH_CALLS = ("device=", "shardings=")


def fresh_child(path: str, call: str, way: str) -> None:
    """One fresh-process load (--fresh): prints its time in seconds, after checking the first
    of each way (``way``: "native" or "planner"; "-check" appended: check it)."""
    import numpy as np
    import torch
    import jtree
    from jtree import _device, _load_plain

    if call == "shardings=":
        import jax
        from jax.sharding import SingleDeviceSharding
        sharding = SingleDeviceSharding(jax.devices("cpu")[0])
    if way.startswith("planner"):
        _load_plain.applies = lambda _o, real=_load_plain.applies: (
            real(_o) and _load_plain._device_target(_o) is None)
    taken = []
    real_pass = _load_plain._load_to_device
    _load_plain._load_to_device = lambda *x: taken.append(1) or real_pass(*x)
    with _device.host_stand_in_for_tests():
        t0 = time.perf_counter()
        with jtree.open(path) as f:
            if call == "device=":
                got = jtree.load(f, device="cpu")
            else:
                got = jax.block_until_ready(jtree.load(f, shardings=sharding))
        t = time.perf_counter() - t0
    if bool(taken) != way.startswith("native"):
        raise SystemExit(f"{call} {way}: the native pass was {'' if taken else 'not '}taken")
    if way.endswith("-check"):
        want = jtree.load(path, framework="numpy")

        def check(g: Any, w: Any) -> None:
            if isinstance(w, dict):
                for k in w:
                    check(g[k], w[k])
            elif isinstance(w, np.ndarray):
                arr = g.float().numpy() if isinstance(g, torch.Tensor) else np.asarray(g)
                assert np.array_equal(arr.astype(np.float32), w.astype(np.float32))
            else:
                assert g == w
        check(got, want)
    print(f"TIME {t!r}")


def fresh_main(a: Any) -> None:
    """--fresh: each call's two ways alternated, each load a child process."""
    import subprocess

    import torch
    import jtree

    try:
        import jax  # noqa: F401
        calls = FRESH_CALLS
    except ImportError:
        calls = ("device=",)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "llm.jtree")
        tree = llm_like(torch, a.layers)
        jtree.save(tree, path, compression=None)
        arrays = _count(torch, tree)
        print(f"jtree {jtree.__version__}, torch {torch.__version__}, {arrays} arrays, "
              f"{a.runs} fresh processes each, alternated; open + load timed, the host "
              f"stand-in engine copying")
        for call in calls:
            times: Dict[str, List[float]] = {"native": [], "planner": []}
            for run in range(a.runs):
                for way in times:
                    p = subprocess.run(
                        [sys.executable, __file__, "--child", path, call,
                         way + ("-check" if run == 0 else "")],
                        capture_output=True, text=True, timeout=600)
                    if p.returncode != 0:
                        raise SystemExit(f"{call} {way} failed:\n{p.stdout}{p.stderr}")
                    times[way].append(float(p.stdout.split("TIME ")[-1]))
            med = {w: statistics.median(ts) for w, ts in times.items()}
            for w, ts in times.items():
                print(f"  jtree.load(f, {call:10s}) {w:7s}: {med[w] * 1e3:6.2f} ms "
                      f"[{min(ts) * 1e3:.2f}, {max(ts) * 1e3:.2f}]")
            print(f"  {call} native / planner: {med['native'] / med['planner']:.2f}x")


def _count(torch: Any, t: Any) -> int:
    if isinstance(t, dict):
        return sum(_count(torch, v) for v in t.values())
    return int(isinstance(t, torch.Tensor))


def _like(torch: Any, t: Any) -> Any:
    """A tree of empty tensors like t's (the caller's allocation, outside the clock)."""
    if isinstance(t, dict):
        return {k: _like(torch, v) for k, v in t.items()}
    return torch.empty_like(t)


if __name__ == "__main__":
    sys.exit(main())
