"""What a ``keys=`` selection costs in a file of many leaves: ``jtree.load(f, keys=...)`` of
one leaf, of one group, of one leaf in every group and of about half the leaves, and
``jtree.load(f["g..."])`` of one group (a part of the file), from a file of --groups x --leaves
small arrays, just opened (``jtree.open`` outside the clock), with and without ``prune=True``,
three ways alternated in one process:

- native: what loads do (the native pass, Reader.load_plain with the patterns:
  bindings/python/src/node_selection.h);
- walk: the Python loader's walk (which loads selections to a device, with casts or targets),
  skipping the subtrees no pattern can reach (PatternSet.may_select_below, may_walk_everything);
- walk-all: that walk with every container made and every leaf looked at (what keys= loads
  did before 2026-11-26).

It times jtree's planning (the data is a few bytes a leaf); not a comparison with the peers
(bench/peers.py's "one leaf" rows are).

    .venv/bin/python bench/python/selection_cost.py --groups 200 --leaves 100 --runs 11

Prints the median [min, max] of each, and native / walk-all.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Dict, List


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--groups", type=int, default=200)
    ap.add_argument("--leaves", type=int, default=100, help="leaves per group")
    ap.add_argument("--runs", type=int, default=11)
    a = ap.parse_args()

    import numpy as np
    import jtree
    from jtree import _keypath, _load_plain

    real = (_keypath.PatternSet.may_select_below, _keypath.PatternSet.may_walk_everything,
            _load_plain.applies)

    def use(mode: str) -> None:
        (_keypath.PatternSet.may_select_below, _keypath.PatternSet.may_walk_everything,
         _load_plain.applies) = real
        if mode != "native":
            _load_plain.applies = lambda o: False
        if mode == "walk-all":
            _keypath.PatternSet.may_select_below = lambda self, parts: True
            _keypath.PatternSet.may_walk_everything = lambda self: True

    tree = {f"g{i}": {f"l{j}": np.full(4, j, np.float32) for j in range(a.leaves)}
            for i in range(a.groups)}
    g, l = a.groups // 2, a.leaves // 2
    # Each case: the load, and the selected leaf l of group g in what it returns.
    whole = (lambda f, **kw: jtree.load(f, **kw)), (lambda got: got[f"g{g}"][f"l{l}"])
    cases = {f"keys='g{g}/l{l}'": (whole, dict(keys=f"g{g}/l{l}")),
             f"keys='g{g}/l{l}', prune": (whole, dict(keys=f"g{g}/l{l}", prune=True)),
             f"keys='g{g}/*', prune": (whole, dict(keys=f"g{g}/*", prune=True)),
             f"keys='**/l{l}', prune": (whole, dict(keys=f"**/l{l}", prune=True)),
             "keys='**/l[0-5]*' (half)": (whole, dict(keys="**/l[0-5]*")),
             f"load(f['g{g}']) (a part)": (((lambda f: jtree.load(f[f"g{g}"])),
                                           (lambda got: got[f"l{l}"])), {})}
    modes = ("native", "walk", "walk-all")
    times: Dict[str, List[float]] = {}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "many.jtree")
        jtree.save(tree, path)
        for run in range(a.runs + 1):  # (run 0 warms up: first calls, imports)
            for name, ((load, leaf), kw) in cases.items():
                for mode in modes:
                    use(mode)
                    got = None  # (the previous result freed outside the clock)
                    with jtree.open(path) as f:
                        t0 = time.perf_counter()
                        got = load(f, **kw)
                        dt = time.perf_counter() - t0
                    use("native")
                    if run:
                        times.setdefault(f"{name} {mode}", []).append(dt)
                    assert float(leaf(got)[0]) == l
    print(f"jtree {jtree.__version__}, {a.groups * a.leaves} leaves ({a.groups} groups of "
          f"{a.leaves}), {a.runs} loads each, each the first of a file just opened")
    for name in cases:
        med = {}
        for mode in modes:
            ts = times[f"{name} {mode}"]
            med[mode] = statistics.median(ts)
            print(f"  {name:28s} {mode:9s}: {med[mode] * 1e3:7.2f} ms "
                  f"[{min(ts) * 1e3:.2f}, {max(ts) * 1e3:.2f}]")
        print(f"  {name} native / walk-all: {med['native'] / med['walk-all']:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
