"""What a sharded restore of JAX arrays on CPU devices costs: ``jtree.load(f, target)`` with
``jax.ShapeDtypeStruct``s carrying a ``NamedSharding`` over 8 CPU devices (replicated, and split
over the first axis), as ``jax.eval_shape`` plus the user's shardings give them. Two ways,
alternated:

- fast: a small leaf (jtree._load_jax.SMALL_LEAF_BYTES), split or replicated over the
  devices, read once, whole, and placed by one ``jax.device_put`` with its sharding (since
  2026-11-27, second change); larger ones: every device's slice imported into its device
  through DLPack (jtree._device_jax.to_cpu_device, any CPU device since 2026-11-27), each
  replica its own copy of the bytes;
- before: the DLPack import only for JAX's first CPU device, ``jax.device_put`` for the other
  seven, and a read per slice (what these loads did before; the replicas' copies stay, a few
  microseconds).

    .venv/bin/python bench/python/jax_sharded_cpu_cost.py --groups 100 --leaves 20 --runs 5
    .venv/bin/python bench/python/jax_sharded_cpu_cost.py --fresh --runs 5

By default in one process, the file just opened (``jtree.open`` outside the clock), after one
checked warm-up load of each. With ``--fresh`` each load runs in a fresh Python process, as a
restoring job meets it: ``import jax, jtree`` and JAX's CPU backend started before the clock,
then ``jtree.open`` + ``load_pytreedef`` + the target built + ``jtree.load`` +
``block_until_ready`` timed (first calls and all). Prints the median [min, max] of each, per
leaf, and fast / before. Every load is checked against the saved arrays (in --fresh, the first
of each way).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

SPECS = {"replicated": (), "split over axis 0": ("x",)}


def setup_jax() -> None:
    """Eight CPU devices, whatever XLA_FLAGS said about their number (before JAX starts)."""
    os.environ["JAX_PLATFORMS"] = "cpu"
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if "device_count" not in f]
    os.environ["XLA_FLAGS"] = " ".join(flags + ["--xla_force_host_platform_device_count=8"])


def use(fast: bool) -> None:
    """Sets the package up as now (fast) or as before 2026-11-27 (the DLPack import for JAX's
    first CPU device only, a read per slice)."""
    import jax
    from jtree import _device_jax, _load_jax

    cpus = jax.devices("cpu")
    real = getattr(use, "real", None)
    if real is None:
        real = use.real = (_device_jax._cpu_importer, _load_jax.SMALL_LEAF_BYTES)
    importer, small = real
    _load_jax.SMALL_LEAF_BYTES = small if fast else -1
    _device_jax._cpu_importers.clear()
    _device_jax._cpu_importer = (importer if fast else
                                 lambda d: importer(d) if d == cpus[0] else None)


def sharded_target(f, spec):
    """The file's structure with a ShapeDtypeStruct per array, sharded by ``spec`` over the
    process's CPU devices (what jax.eval_shape plus the user's shardings give)."""
    import numpy as np
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    import jtree

    sharding = NamedSharding(Mesh(np.array(jax.devices("cpu")), ("x",)), PartitionSpec(*spec))
    return sharding, jax.tree.map(
        lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding),
        jtree.load_pytreedef(f), is_leaf=lambda x: isinstance(x, jtree.LeafSpec))


def child(path: str, name: str, mode: str, check: bool) -> None:
    """One fresh-process load (--child): prints its time in seconds."""
    setup_jax()
    import numpy as np
    import jax
    import jtree

    jax.devices("cpu")  # (JAX's backend started before the clock)
    use(mode == "fast")
    t0 = time.perf_counter()
    with jtree.open(path) as f:
        sharding, target = sharded_target(f, SPECS[name])
        got = jtree.load(f, target)
        jax.block_until_ready(got)
    t = time.perf_counter() - t0
    if check:
        want = jtree.load(path)
        for g, leaves in want.items():
            for k, v in leaves.items():
                assert got[g][k].sharding == sharding
                np.testing.assert_array_equal(np.asarray(got[g][k]), v)
    print(f"TIME {t!r}")


def fresh(path: str, name: str, mode: str, check: bool) -> float:
    p = subprocess.run([sys.executable, __file__, "--child", path, name, mode,
                        "--check" if check else "--no-check"],
                       capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise SystemExit(f"the {mode} child ({name}) failed:\n{p.stdout}{p.stderr}")
    return float(p.stdout.split("TIME ")[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--groups", type=int, default=100)
    ap.add_argument("--leaves", type=int, default=20, help="arrays per group")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--fresh", action="store_true",
                    help="each load in a fresh process, open and structure included")
    ap.add_argument("--child", nargs=3, metavar=("PATH", "SHARDING", "MODE"),
                    help=argparse.SUPPRESS)
    ap.add_argument("--check", action=argparse.BooleanOptionalAction, default=False,
                    help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(*a.child, a.check)
        return

    setup_jax()
    import numpy as np
    import jax

    import jtree

    cpus = jax.devices("cpu")
    r = np.random.default_rng(0)
    tree = {f"g{g}": {f"l{i}": r.standard_normal((64, 16), dtype=np.float32)
                      for i in range(a.leaves)} for g in range(a.groups)}
    n = a.groups * a.leaves
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "sharded.jtree")
        jtree.save(tree, path, compression=None)
        how = ("each load a fresh process (open and structure included)" if a.fresh else
               "one process, the file just opened")
        print(f"{n} arrays of 64x16 float32 over {len(cpus)} CPU devices; "
              f"{a.runs} runs each, alternated; {how}")
        for name, spec in SPECS.items():
            times = {"fast": [], "before": []}
            if a.fresh:
                for run in range(a.runs):
                    for mode in ("fast", "before"):
                        times[mode].append(fresh(path, name, mode, check=run == 0))
            for run in range(0 if a.fresh else a.runs + 1):
                for mode in ("fast", "before"):
                    use(mode == "fast")
                    with jtree.open(path) as f:
                        sharding, target = sharded_target(f, spec)
                        t0 = time.perf_counter()
                        got = jtree.load(f, target)
                        jax.block_until_ready(got)
                        t = time.perf_counter() - t0
                    if run == 0:  # (a warm-up, checked)
                        for g, leaves in tree.items():
                            for k, v in leaves.items():
                                assert got[g][k].sharding == sharding
                                np.testing.assert_array_equal(np.asarray(got[g][k]), v)
                    else:
                        times[mode].append(t)
            use(True)
            med = {m: statistics.median(v) for m, v in times.items()}
            for m, v in times.items():
                print(f"  {name:18s} {m:6s} {1e3 * med[m]:8.1f} ms [{1e3 * min(v):.1f}, "
                      f"{1e3 * max(v):.1f}]  {1e6 * med[m] / n:6.1f} us an array")
            print(f"  {name:18s} fast / before: {med['fast'] / med['before']:.2f}x")


if __name__ == "__main__":
    main()
