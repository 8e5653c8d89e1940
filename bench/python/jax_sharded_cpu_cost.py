"""What a sharded restore of JAX arrays on CPU devices costs: ``jtree.load(f, target)`` with
``jax.ShapeDtypeStruct``s carrying a ``NamedSharding`` over 8 CPU devices (replicated, and split
over the first axis), as ``jax.eval_shape`` plus the user's shardings give them. Two ways,
alternated in one process (the file just opened, ``jtree.open`` outside the clock):

- fast: every device's slice imported into its device through DLPack (jtree._device_jax.
  to_cpu_device, any CPU device since 2026-11-27), each replica its own copy of the bytes; a
  small leaf split over devices read once, whole, and cut (jtree._load_jax.SMALL_LEAF_BYTES);
- before: the DLPack import only for JAX's first CPU device, ``jax.device_put`` for the other
  seven, and a read per slice (what these loads did before; the replicas' copies stay, a few
  microseconds).

    .venv/bin/python bench/python/jax_sharded_cpu_cost.py --groups 100 --leaves 20 --runs 5

Prints the median [min, max] of each, per leaf, and fast / before. Every load is checked
against the saved arrays.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--groups", type=int, default=100)
    ap.add_argument("--leaves", type=int, default=20, help="arrays per group")
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()

    os.environ["JAX_PLATFORMS"] = "cpu"
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if "device_count" not in f]
    os.environ["XLA_FLAGS"] = " ".join(flags + ["--xla_force_host_platform_device_count=8"])
    import numpy as np
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    import jtree
    from jtree import _device_jax, _load_jax

    cpus = jax.devices("cpu")
    real_importer, small = _device_jax._cpu_importer, _load_jax.SMALL_LEAF_BYTES

    def use(fast: bool) -> None:
        _load_jax.SMALL_LEAF_BYTES = small if fast else -1
        _device_jax._cpu_importers.clear()
        _device_jax._cpu_importer = (real_importer if fast else
                                     lambda d: real_importer(d) if d == cpus[0] else None)

    r = np.random.default_rng(0)
    tree = {f"g{g}": {f"l{i}": r.standard_normal((64, 16), dtype=np.float32)
                      for i in range(a.leaves)} for g in range(a.groups)}
    n = a.groups * a.leaves
    mesh = Mesh(np.array(cpus), ("x",))
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "sharded.jtree")
        jtree.save(tree, path, compression=None)
        print(f"{n} arrays of 64x16 float32 over {len(cpus)} CPU devices; "
              f"{a.runs} runs each, alternated")
        for name, spec in (("replicated", PartitionSpec()), ("split over axis 0",
                                                              PartitionSpec("x"))):
            sharding = NamedSharding(mesh, spec)
            target = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype,
                                                                 sharding=sharding), tree)
            times = {"fast": [], "before": []}
            for run in range(a.runs + 1):
                for mode in ("fast", "before"):
                    use(mode == "fast")
                    with jtree.open(path) as f:
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
