"""What a load of JAX arrays on a CPU costs in a file of many small arrays: the calls a JAX user
makes (``jtree.load(f, framework="jax")``; ``jtree.load(f, abstract)`` with
``jax.ShapeDtypeStruct``s, as ``jax.eval_shape`` gives them; ``jtree.load(f, spec)`` with
``load_pytreedef``'s tree, the JAX proposal's restore, as JAX and as NumPy arrays), each timed
two ways alternated in one process (the file just opened, ``jtree.open`` outside the clock):

- fast: what loads do since 2026-11-27: the native plain pass with a DLPack import per array
  (jtree._load_plain, jtree._device_jax.to_cpu_device); for targets of the stored shape and
  dtype the leaves as stored (jtree._load_jax.from_template, Loader.spec_as_stored); for the
  file's own structure as the target, the plain pass too (Loader.own_structure);
- before: those turned off, and no DLPack import (the general per-leaf planning and
  ``jax.device_put`` per array: what every such load did before).

JAX runs with one CPU device (JAX_PLATFORMS=cpu, no --xla_force_host_platform_device_count),
the case these paths serve; every load is checked against the saved arrays. It times jtree's
Python and JAX's per-array cost (the arrays are 16 bytes); bench/python/run.py's jtree-jax row
is the whole-file comparison with the peers.

    .venv/bin/python bench/python/jax_cpu_cost.py --groups 200 --leaves 100 --runs 5

Prints the median [min, max] of each, and fast / before.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--groups", type=int, default=200)
    ap.add_argument("--leaves", type=int, default=100, help="arrays per group")
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()

    os.environ["JAX_PLATFORMS"] = "cpu"
    flags = os.environ.get("XLA_FLAGS", "")
    os.environ["XLA_FLAGS"] = " ".join(f for f in flags.split()
                                       if "device_count" not in f)  # (one device)
    import numpy as np
    import jax
    import jtree
    from jtree import _device_jax, _load_jax, _load_plain, _load_plan

    if len(jax.devices()) != 1:
        raise SystemExit(f"needs one JAX device, found {jax.devices()}")
    real = (_load_plain.applies, _load_jax.ADAPTER.from_template, _load_jax.ADAPTER.as_stored,
            _load_plan.Loader.spec_as_stored, _load_plan.Loader.own_structure)

    def use(fast: bool) -> None:
        (_load_plain.applies, _load_jax.ADAPTER.from_template, _load_jax.ADAPTER.as_stored,
         _load_plan.Loader.spec_as_stored, _load_plan.Loader.own_structure) = real
        importing[0] = fast
        if not fast:
            _load_plain.applies = lambda o: False
            _load_jax.ADAPTER.from_template = lambda *_a: None
            _load_jax.ADAPTER.as_stored = lambda *_a: None
            _load_plan.Loader.spec_as_stored = lambda *_a: None
            _load_plan.Loader.own_structure = lambda *_a: False

    # DLPack imports made (fast), or refused so that jax.device_put moves every array
    # (before: the general path's host arrays took jax.device_put too).
    imports: List[int] = []
    to_cpu = _device_jax.to_cpu_device
    importing = [True]

    def counted(*args: Any) -> Any:
        if not importing[0]:
            return None
        imports.append(1)
        return to_cpu(*args)

    _device_jax.to_cpu_device = counted

    rng = np.random.default_rng(0)
    tree = {f"g{g:03d}": {f"l{i:03d}": rng.standard_normal(4).astype(np.float32)
                          for i in range(a.leaves)} for g in range(a.groups)}
    n = a.groups * a.leaves
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "many.jtree")
        jtree.save(tree, path)
        spec = jtree.load_pytreedef(path)
        abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), tree)
        calls: Dict[str, Callable[[Any], Any]] = {
            'load(f, framework="jax")': lambda f: jtree.load(f, framework="jax"),
            "load(f, abstract) (ShapeDtypeStructs)": lambda f: jtree.load(f, abstract),
            'load(f, spec, framework="jax")': lambda f: jtree.load(f, spec, framework="jax"),
            "load(f, spec) (NumPy)": lambda f: jtree.load(f, spec),
        }
        times: Dict[str, List[float]] = {}
        for run in range(a.runs + 1):  # (run 0 warms up)
            for name, call in calls.items():
                for mode in ("fast", "before"):
                    use(mode == "fast")
                    imports.clear()
                    with jtree.open(path) as f:
                        t0 = time.perf_counter()
                        got = call(f)
                        dt = time.perf_counter() - t0
                    if run:
                        times.setdefault(f"{name} {mode}", []).append(dt)
                    check(got, tree, jax, np, name)
                    jax_result = "NumPy" not in name
                    want_imports = n if jax_result and mode == "fast" else 0
                    if len(imports) != want_imports:
                        raise SystemExit(f"{name} {mode}: {len(imports)} DLPack imports, "
                                         f"expected {want_imports}: the comparison is wrong")
        use(True)
    print(f"jtree {jtree.__version__}, jax {jax.__version__}: {n} arrays ({a.groups} groups "
          f"of {a.leaves}), {a.runs} loads each, JAX on one CPU device")
    for name in calls:
        med = {}
        for mode in ("fast", "before"):
            ts = times[f"{name} {mode}"]
            med[mode] = statistics.median(ts)
            print(f"  {name:40s} {mode:6s}: {med[mode] * 1e3:8.2f} ms "
                  f"[{min(ts) * 1e3:.2f}, {max(ts) * 1e3:.2f}]  "
                  f"({med[mode] / n * 1e6:.1f} us an array)")
        print(f"  {name:40s} fast / before: {med['fast'] / med['before']:.2f}x")


def check(got: Any, tree: Any, jax: Any, np: Any, name: str) -> None:
    """Every array of ``got`` equals the saved one, and is a JAX array for the JAX calls."""
    for g, leaves in tree.items():
        for k, v in leaves.items():
            x = got[g][k]
            if "NumPy" in name:
                ok = isinstance(x, np.ndarray)
            else:
                ok = isinstance(x, jax.Array)
            if not ok or not np.array_equal(np.asarray(x), v):
                raise SystemExit(f"{name}: {g}/{k} is wrong: {x!r}")


if __name__ == "__main__":
    sys.exit(main())
