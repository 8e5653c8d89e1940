"""Python-side cost of jtree's Python API on a tree of many tiny arrays (issue 21 baseline):
how much of a save and of a load runs in Python rather than in the native module, and how
many calls into the native module (jtree._jtree) each operation makes.

    PYTHONPATH=<package> .venv/bin/python bench/python/native_calls.py --leaves 20000 --runs 5

The tree is many_leaves.py's: {"layer<i>": {"w<j>": float32[4]}} in dicts of 100, so the data
is nothing and the work per leaf is everything. Every measurement is a fresh process (as a
user meets it: first-call costs included, nothing cached from an earlier operation); the
files the loads read are written once beforehand, into /dev/shm when it has room.

Each operation runs in two kinds of process:
- clean: jtree as shipped; times the first call and the median of --runs more.
- counted: every function of jtree._jtree and every method of its Reader and Builder wrapped
  by a counter that also sums the wall time spent inside it (the native time; a native call
  that calls back into Python, such as spec_tree's container callback, counts that in).
  Times the first call only, to count exactly what one operation calls.
In the counted processes, total = the first call's time less what the wrappers added
(calls x the cost of one wrapper, calibrated in the same process against a C function that
does nothing), and Python time = total - native time. Each column is a median over --runs
processes; "first" and "warm" come from the clean processes, the rest from the counted ones.

``--profile OP`` instead prints cProfile's top functions (by own time) for one operation.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from typing import Any, Callable, Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))

# name: (what it does, the file it needs: "zstd", "raw" or None for a save)
OPS: Dict[str, Tuple[str, Any]] = {
    "save": ("jtree.save(tree, p)  (zstd, the default)", None),
    # (On this tree the raw rows do what the zstd ones do: 16-byte leaves are stored inline in
    # the header whatever the compression. They are for trees of larger leaves.)
    "save raw": ("jtree.save(tree, p, compression=None)", None),
    "load": ("jtree.load(p), a zstd file", "zstd"),
    "load raw": ("jtree.load(p), a raw file (leaves mapped: mmap=True)", "raw"),
    "load_pytreedef": ("jtree.load_pytreedef(p)", "zstd"),
    "open + one leaf": ('jtree.open(p)["layer7"]["w3"][...] (the last leaf if fewer)', "zstd"),
}


def make_tree(leaves: int) -> Dict[str, Any]:
    """many_leaves.py's tree: {"layer<i>": {"w<j>": float32[4]}} in dicts of 100."""
    sys.path.insert(0, HERE)
    from many_leaves import make_tree as mt  # noqa: PLC0415
    return mt(leaves)


def operation(op: str, leaves: int, path: str) -> Callable[[], Any]:
    """The operation `op` as a function of no arguments (its input made here, untimed)."""
    import jtree  # noqa: PLC0415
    if op.startswith("save"):
        tree = make_tree(leaves)
        kw = {"compression": None} if op == "save raw" else {}
        return lambda: jtree.save(tree, path, **kw)
    if op in ("load", "load raw"):
        return lambda: jtree.load(path)
    if op == "load_pytreedef":
        return lambda: jtree.load_pytreedef(path)
    if op == "open + one leaf":
        i = min(703, leaves - 1)  # layer7/w3, or the last leaf of a smaller tree

        def one() -> Any:
            with jtree.open(path) as f:
                return f[f"layer{i // 100}"][f"w{i % 100}"][...]
        return one
    raise SystemExit(f"unknown operation {op!r}")


# ---- counting the native calls --------------------------------------------------------------

class Tally:
    """Calls and wall time per native function (re-entrant calls count once in the time)."""

    def __init__(self) -> None:
        self.calls: Counter = Counter()
        self.seconds = 0.0
        self.per_name: Counter = Counter()  # seconds per function
        self.depth = 0

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """`fn`, counting its calls and timing them under `name`."""
        clock = time.perf_counter

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            if self.depth:
                return fn(*args, **kwargs)
            self.depth += 1
            t0 = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                dt = clock() - t0
                self.seconds += dt
                self.per_name[name] += dt
                self.depth -= 1

        return counted


def install_counters() -> Tally:
    """Wraps every public function of jtree._jtree and every method of its classes. The
    package looks them up on the module (``_jtree.write``) or the class at each call, so the
    wrappers see every call the package makes."""
    from jtree import _jtree  # noqa: PLC0415
    tally = Tally()
    for name in dir(_jtree):
        if name.startswith("__"):
            continue
        obj = getattr(_jtree, name)
        if isinstance(obj, type):
            # nb_method: a method; nb_func: a static method (Reader.open). Properties
            # (Reader.name) are not counted.
            for attr, member in list(vars(obj).items()):
                kind = type(member).__name__
                if attr.startswith("__"):
                    continue
                if kind == "nb_method":
                    setattr(obj, attr, tally.wrap(f"{name}.{attr}", member))
                elif kind == "nb_func":
                    setattr(obj, attr, staticmethod(tally.wrap(f"{name}.{attr}", member)))
        elif callable(obj):
            setattr(_jtree, name, tally.wrap(name, obj))
    # nanobind constructs without looking __init__ up in the class: the constructor is counted
    # by replacing the module's Builder with a counting factory (the package makes Builders
    # only as _jtree.Builder() and never tests isinstance against it).
    setattr(_jtree, "Builder", tally.wrap("Builder()", _jtree.Builder))
    return tally


# ---- one measurement, in a fresh process ----------------------------------------------------

def wrapper_cost(n: int = 200_000) -> float:
    """Seconds a counting wrapper adds to one call: the wrapper around a C function that does
    nothing (``int.__index__`` of 0) against the bare function, best of 5."""
    f = (0).__index__
    g = Tally().wrap("calibration", f)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        t1 = time.perf_counter()
        for _ in range(n):
            g()
        t2 = time.perf_counter()
        best = min(best, ((t2 - t1) - (t1 - t0)) / n)
    return max(best, 0.0)


def child(op: str, leaves: int, path: str, runs: int, counted: bool) -> None:
    """One measurement (in the fresh process the parent started): prints one JSON line."""
    import gc  # noqa: PLC0415
    tally = install_counters() if counted else None
    fn = operation(op, leaves, path)
    gc.collect()
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    out: Dict[str, Any] = {"first": first}
    if tally is not None:
        out.update(calls=dict(tally.calls), native=tally.seconds, per_name=dict(tally.per_name),
                   wrapper=wrapper_cost() * sum(tally.calls.values()))
    else:
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        out["warm"] = statistics.median(times) if times else None
    print(json.dumps(out))


def run_child(op: str, leaves: int, path: str, runs: int, counted: bool) -> Dict[str, Any]:
    """child() in a fresh interpreter; its JSON result."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", op, "--leaves", str(leaves),
           "--path", path, "--runs", str(runs)] + (["--counted"] if counted else [])
    for attempt in range(2):
        r = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if r.returncode == 0:
            return json.loads(r.stdout.strip().splitlines()[-1])
        # Killed by a signal (a shared host's OOM killer): tried once more, and said so.
        if r.returncode < 0 and attempt == 0:
            print(f"  ({op}: a child died of signal {-r.returncode}; run again)", flush=True)
            continue
        break
    raise SystemExit(f"{op}: child failed (exit status {r.returncode}):\n{r.stdout}{r.stderr}")


def profile(op: str, leaves: int, path: str) -> None:
    """cProfile's top 20 functions by own time for one call of `op` (in this process)."""
    import cProfile  # noqa: PLC0415
    import pstats  # noqa: PLC0415
    fn = operation(op, leaves, path)
    pr = cProfile.Profile()
    pr.enable()
    fn()
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(20)


def main() -> None:
    """The table (or, with --profile, one profile); see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--leaves", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=5,
                    help="fresh processes per operation (and warm repeats in each)")
    ap.add_argument("--ops", default="save,load,load_pytreedef,open + one leaf",
                    help="comma-separated operations, of: " + ", ".join(OPS))
    ap.add_argument("--profile", metavar="OP", help="cProfile one operation instead")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    ap.add_argument("--counted", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child, a.leaves, a.path, a.runs, a.counted)
        return

    import jtree  # noqa: PLC0415
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(dir=base) as d:
        files = {"zstd": os.path.join(d, "zstd.jtree"), "raw": os.path.join(d, "raw.jtree")}
        tree = make_tree(a.leaves)
        jtree.save(tree, files["zstd"])
        jtree.save(tree, files["raw"], compression=None)
        del tree
        if a.profile:
            need = OPS[a.profile][1]
            profile(a.profile, a.leaves, files[need] if need else os.path.join(d, "out.jtree"))
            return
        print(f"jtree {jtree.__version__ if hasattr(jtree, '__version__') else ''} "
              f"{a.leaves} leaves, {a.runs} fresh processes per row (medians), files in {d}")
        print(f"{'':<16} {'clean':>18} {'counted (first call)':>31}")
        print(f"{'operation':<16} {'first ms':>9} {'warm ms':>8} {'total ms':>9} "
              f"{'native ms':>10} {'python ms':>10} {'python %':>9} {'native calls':>13}  "
              f"most called")
        every: List[Tuple[str, Dict[str, int]]] = []
        for op in a.ops.split(","):
            need = OPS[op][1]
            path = files[need] if need else os.path.join(d, "out.jtree")
            # Alternated, so that a busy moment of the host hits both kinds alike.
            clean: List[Dict[str, Any]] = []
            counted: List[Dict[str, Any]] = []
            for _ in range(a.runs):
                clean.append(run_child(op, a.leaves, path, a.runs, False))
                counted.append(run_child(op, a.leaves, path, 0, True))
            first = statistics.median(c["first"] for c in clean) * 1e3
            warm = statistics.median(c["warm"] for c in clean) * 1e3
            # Python time from the counted processes alone (the same calls timed both ways):
            # their first call less the native time and less what the wrappers added.
            native = statistics.median(c["native"] for c in counted) * 1e3
            own = statistics.median(c["first"] - c["wrapper"] for c in counted) * 1e3
            py = statistics.median(c["first"] - c["wrapper"] - c["native"] for c in counted) * 1e3
            calls: Dict[str, int] = counted[0]["calls"]
            if any(c["calls"] != calls for c in counted):
                print(f"  ({op}: the call counts differ between runs)")
            total = sum(calls.values())
            top = ", ".join(f"{k} {v}" for k, v in
                            sorted(calls.items(), key=lambda kv: -kv[1])[:4])
            print(f"{op:<16} {first:9.1f} {warm:8.1f} {own:9.1f} {native:10.1f} {py:10.1f} "
                  f"{100 * py / own:8.0f}% {total:13d}  {top}", flush=True)
            per = {k: statistics.median(c["per_name"].get(k, 0.0) for c in counted) * 1e3
                   for k in calls}
            every.append((op, calls, per))
        print("\nnative calls of one operation, all of them: count (median ms inside them)")
        for op, calls, per in every:
            print(f"  {op}: " + ", ".join(f"{k} {v} ({per[k]:.1f})" for k, v in
                                          sorted(calls.items(), key=lambda kv: -kv[1])))


if __name__ == "__main__":
    main()
