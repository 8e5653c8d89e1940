"""The Python side of a load into device tensors: how long jtree's Python takes to plan
``jtree.load(f, out=tensors)`` and ``jtree.load(f, like)`` (the GPU benchmark's rows,
gpu_load.py) before and after the native copy, with the template fast path
(jtree._load_torch.from_template) and with the general per-leaf path it replaces, in one run.

No GPU is needed: the loads go through jtree's host stand-in engine (the CPU stands for the
device, as in the tests), and the native staged copy is replaced by a stub, so what is timed
is Python alone (the native part is bench_device's). The tree is an LLM checkpoint's shape
(gpu_load.py's llm workload: per layer 9 bf16 weights and two float32 moments of each, plus
embeddings and heads; 873 arrays at 32 layers), with tiny arrays: the planning does not
depend on their size.

    PYTHONPATH=python .venv/bin/python bench/python/device_plan_cost.py --layers 32 --runs 21

Prints, per call, the median [min, max] over --runs loads (one process, the two paths
alternated), and the fast path's time over the general path's.
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
    a = ap.parse_args()

    import torch
    import jtree
    from jtree import _device, _load_torch

    # The stub of the native staged copy: Python alone is timed.
    _device._native_load = lambda *_a, **_k: dict(
        direct_bytes=0, buffered_bytes=0, zero_copy_bytes=0, direct_io_note="",
        zero_copy_note="")
    fast = _load_torch.from_template
    general: Callable[..., Any] = lambda *_a: None  # noqa: E731
    # Leaves each path sent to the general planner (_load_torch.tensor): checked below, so a
    # fast path that stopped applying cannot pass for one.
    planned: Dict[str, int] = {}
    real_tensor = _load_torch.tensor
    current = [""]

    def counted(*args: Any, **kw: Any) -> Any:
        planned[current[0]] = planned.get(current[0], 0) + 1
        return real_tensor(*args, **kw)

    _load_torch.tensor = counted

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
            for _ in range(a.runs):
                for name, planner in (("fast", fast), ("general", general)):
                    _load_torch.from_template = planner
                    for call in ("out=", "like="):
                        current[0] = f"{call} {name}"
                        t = templates()
                        t0 = time.perf_counter()
                        if call == "out=":
                            jtree.load(f, out=t)
                        else:
                            jtree.load(f, t)
                        times.setdefault(f"{call} {name}", []).append(time.perf_counter() - t0)
        _load_torch.from_template = fast
        _load_torch.tensor = real_tensor

    for call in ("out=", "like="):
        if planned.get(f"{call} fast", 0) or planned.get(f"{call} general", 0) != arrays * a.runs:
            raise SystemExit(f"{call}: the fast path planned {planned.get(f'{call} fast', 0)} "
                             f"leaves generally, the general one "
                             f"{planned.get(f'{call} general', 0)} (expected 0 and "
                             f"{arrays * a.runs}): the comparison would be wrong")
    print(f"jtree {jtree.__version__}, torch {torch.__version__}, {arrays} arrays, "
          f"{a.runs} loads each, Python only (native copy stubbed), host stand-in engine")
    for call in ("out=", "like="):
        med = {}
        for name in ("fast", "general"):
            ts = times[f"{call} {name}"]
            med[name] = statistics.median(ts)
            print(f"  jtree.load(f, {call:5s}) {name:7s}: {med[name] * 1e3:6.2f} ms "
                  f"[{min(ts) * 1e3:.2f}, {max(ts) * 1e3:.2f}]  "
                  f"({med[name] / arrays * 1e6:.1f} us an array)")
        print(f"  {call} fast / general: {med['fast'] / med['general']:.2f}x")


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
