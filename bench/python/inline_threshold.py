"""What the writer's inline threshold costs and saves (WriteOptions::inline_threshold: payloads
up to that many stored bytes go into the header, the rest into chunks), in fresh processes.

    .venv/bin/python bench/python/inline_threshold.py [--runs 5] [--thresholds 4096,1024,512,256]

Two parts, every threshold of a part in the same run, alternated run by run:

1. Arrays of one size (--sizes bytes, float32; 20,000 in dicts of 100): a whole load
   (``jtree.load``) of a raw file written with each threshold. An inline payload arrives with
   the header (no chunk read, no index entry, no alignment padding); a chunked one is read on
   its own: which is faster depends on the payload's size.
2. The benchmark's ``small`` workload (bench/python/workloads.py, scale 1: 10,000 arrays of 1
   to 100 KiB and 10,002 scalars): open, one leaf, the structure and a whole load, local; one
   leaf and the structure over HTTP from nginx (bench/python/nginx.py), with the bytes nginx
   sent. Every open reads the whole header, inline payloads included: a lower threshold makes
   remote opens fetch less. h5py's one-leaf read of the same arrays is the reference
   (bench/RESULTS.md: the peers table's loss).
3. The ``llm`` workload (1.04 GiB, 873 arrays; its norms are the small payloads): open, one
   leaf and a whole load of the raw file.

Files go to --workdir (tmpfs by default): warm page cache, memory and CPU figures. Prints a
Markdown table per part: medians [min, max] in ms, and the file and header sizes.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from typing import Any, Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import jtree  # noqa: E402

# One child per measurement: the imports are outside the clock, the first call's costs inside,
# and so is making every loaded array resident (peers.py's materialize, as run.py does: a raw
# chunk may come back as a view of the file's memory map, whose pages a user's first reads of
# it would fault in; an inline payload is always a copy).
CHILD = r'''
import sys, time
sys.path.insert(0, sys.argv[4])
import jtree
import peers
path, op, key = sys.argv[1], sys.argv[2], sys.argv[3].split("/")
mask = True
for k in reversed(key):
    mask = {k: mask}
if op == "h5leaf":
    import h5py  # (outside the clock, as jtree's import)
t = time.perf_counter()
if op == "load":
    out = jtree.load(path)
elif op == "leaf":
    out = jtree.load(path, mask)
elif op == "open":
    f = jtree.open(path)
    f.close()
elif op == "struct":
    out = jtree.load_pytreedef(path)
elif op == "h5leaf":
    with h5py.File(path, "r") as f:
        out = f["/".join(key)][()]
if op in ("load", "leaf", "h5leaf"):
    peers.Jtree().materialize(out)
print((time.perf_counter() - t) * 1e3)
'''


def child(path: str, op: str, key: str = "") -> float:
    out = subprocess.run([sys.executable, "-c", CHILD, path, op, key, HERE],
                         capture_output=True, text=True, check=True)
    return float(out.stdout)


def span(v: List[float]) -> str:
    return f"{statistics.median(v):.1f} [{min(v):.1f}, {max(v):.1f}]"


def inline_bytes(path: str) -> int:
    with jtree.open(path) as f:
        return f.info()["inline_bytes"]


def save_each(a: argparse.Namespace, tree: Any, name: str, thresholds: List[int],
              compression: Any = None) -> Dict[int, str]:
    """``tree`` saved once per threshold into --workdir; the paths by threshold."""
    paths = {}
    for t in thresholds:
        paths[t] = os.path.join(a.workdir, f"inline-{name}-{t}.jtree")
        jtree.save(tree, paths[t], compression=compression, inline_threshold=t, sync=False)
    return paths


def row(label: Any, cells: List[str]) -> None:
    print(f"| {label} | " + " | ".join(cells) + " |")


def head(first: str, thresholds: List[int]) -> None:
    row(first, [f"threshold {t}" for t in thresholds])
    print("|---|" + "---|" * len(thresholds))


def sized_tree(nbytes: int) -> Dict[str, Any]:
    n = max(1, nbytes // 4)
    return {f"l{i}": {f"w{j}": np.full((n,), i * 100 + j, np.float32) for j in range(100)}
            for i in range(200)}


def part_sizes(a: argparse.Namespace, thresholds: List[int]) -> None:
    print("\n## Whole loads of 20,000 arrays of one size (raw, local)\n")
    head("array bytes", thresholds)
    for size in [int(s) for s in a.sizes.split(",")]:
        paths = save_each(a, sized_tree(size), str(size), thresholds)
        times: Dict[int, List[float]] = {t: [] for t in thresholds}
        for _ in range(a.runs):
            for t in thresholds:
                times[t].append(child(paths[t], "load"))
        # (Inline or chunked as the file says, not as the threshold should make it.)
        cells = [f"{span(times[t])} ms ({'inline' if inline_bytes(paths[t]) else 'chunked'}, "
                 f"{os.path.getsize(paths[t]) / 2**20:.1f} MiB)" for t in thresholds]
        row(size, cells)
        for p in paths.values():
            os.remove(p)


def workload(a: argparse.Namespace, name: str) -> Tuple[Any, str]:
    """The benchmark's workload ``name`` at scale 1 (generated into --cache once), and the key
    path of its one-leaf load."""
    import workloads as W  # noqa: PLC0415

    tree = W.load_tree(W.ensure_in_child(a.cache, name, 1.0, 0))
    return tree, "/".join(W.partial_targets(name, 1.0)["leaf"])


def part_small(a: argparse.Namespace, thresholds: List[int]) -> None:
    import workloads as W  # noqa: PLC0415
    from nginx import Nginx  # noqa: PLC0415

    tree, key = workload(a, "small")
    paths: Dict[Tuple[str, int], str] = {}
    for kind, comp in (("raw", None), ("zstd", "zstd")):
        for t, path in save_each(a, tree, f"small-{kind}", thresholds, comp).items():
            paths[kind, t] = path
    h5 = None
    try:
        import h5py  # noqa: PLC0415
    except ImportError:
        print("(h5py is not installed: no reference row)")
    else:
        h5 = os.path.join(a.workdir, "inline-small.h5")
        with h5py.File(h5, "w") as f:
            for path, v in W.iter_leaves(tree):
                if isinstance(v, np.ndarray):
                    f.create_dataset("/".join(path), data=v)
    del tree
    ops = ["open", "leaf", "struct", "load"]
    times: Dict[Any, List[float]] = {}
    sent: Dict[Any, int] = {}
    ng = Nginx(a.workdir)
    ng.start()
    try:
        urls = {t: ng.publish(paths["raw", t]) for t in thresholds}
        for _ in range(a.runs):
            for t in thresholds:
                for op in ops:
                    times.setdefault((op, t), []).append(child(paths["raw", t], op, key))
                for op in ("leaf", "struct"):
                    ng.mark()
                    times.setdefault(("http " + op, t), []).append(child(urls[t], op, key))
                    sent["http " + op, t] = ng.since_mark()["body_bytes"]
            if h5 is not None:
                times.setdefault(("h5py leaf", 0), []).append(child(h5, "h5leaf", key))
    finally:
        ng.stop()
    print(f"\n## The small workload (one leaf: {key})\n")
    head("", thresholds)
    row("inline payloads in the header",
        [f"{inline_bytes(paths['raw', t]) / 2**20:.2f} MiB" for t in thresholds])
    for kind in ("raw", "zstd"):
        row(f"{kind} file", [f"{os.path.getsize(paths[kind, t]) / 2**20:.1f} MiB"
                             for t in thresholds])
    for op in ops:
        row(op, [f"{span(times[op, t])} ms" for t in thresholds])
    for op in ("http leaf", "http struct"):
        row(op, [f"{span(times[op, t])} ms, {sent[op, t] / 2**20:.2f} MiB sent"
                 for t in thresholds])
    if h5 is not None:
        print(f"\nh5py, one leaf of the same arrays (local): {span(times['h5py leaf', 0])} ms")
        os.remove(h5)
    for p in paths.values():
        os.remove(p)


def part_llm(a: argparse.Namespace, thresholds: List[int]) -> None:
    tree, key = workload(a, "llm")
    paths = save_each(a, tree, "llm", thresholds)
    del tree
    ops = ["open", "leaf", "load"]
    times: Dict[Any, List[float]] = {}
    for _ in range(a.runs):
        for t in thresholds:
            for op in ops:
                times.setdefault((op, t), []).append(child(paths[t], op, key))
    print(f"\n## The llm workload, raw (one leaf: {key})\n")
    head("", thresholds)
    row("inline payloads in the header",
        [f"{inline_bytes(paths[t]) / 2**20:.2f} MiB" for t in thresholds])
    for op in ops:
        row(op, [f"{span(times[op, t])} ms" for t in thresholds])
    for p in paths.values():
        os.remove(p)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--thresholds", default="4096,1024,512,256")
    ap.add_argument("--sizes", default="256,512,1024,2048",
                    help="array sizes of part 1, bytes")
    ap.add_argument("--parts", default="sizes,small,llm")
    ap.add_argument("--workdir", default="/dev/shm" if os.path.isdir("/dev/shm") else "/tmp")
    ap.add_argument("--cache", default="/var/tmp/jtree-bench-cache", help="generated workloads")
    a = ap.parse_args()
    thresholds = [int(t) for t in a.thresholds.split(",")]
    a.workdir = os.path.join(a.workdir, f"jtree-inline-{os.getpid()}")
    os.makedirs(a.workdir)
    try:
        print(f"# Inline threshold, jtree {jtree.__version__}, {a.runs} fresh processes each")
        parts = a.parts.split(",")
        if "sizes" in parts:
            part_sizes(a, thresholds)
        if "small" in parts:
            part_small(a, thresholds)
        if "llm" in parts:
            part_llm(a, thresholds)
    finally:
        for f in os.listdir(a.workdir):
            os.remove(os.path.join(a.workdir, f))
        os.rmdir(a.workdir)


if __name__ == "__main__":
    main()
