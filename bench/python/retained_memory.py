"""Memory a process keeps after a load: the scratch buffers of jtree's read workers.

    .venv/bin/python bench/python/retained_memory.py --threads 0,16,64 --runs 5 \\
        [--build old=/path/to/site-packages] [--file F]

Each run is a fresh Python process that imports jtree and NumPy, reads its resident memory
(VmRSS), loads the file with `threads=T` (T=0: one worker per core, the default), reads it
again, deletes the loaded tree and reads it a third time. Per build and thread count it
prints the medians of: the load's time; the memory the load added beyond the arrays' bytes
(the workers' buffers while they are held); and what is still resident after the tree is
freed (what the process keeps for good). The file is a 128 MiB bf16 array saved with the
default compression (4 MiB chunks, zstd with the float split), written once to --workdir
unless --file names one. `--build LABEL=DIR` runs the same children with DIR first on
PYTHONPATH (an older build installed with `pip install --target DIR .`), side by side with
the installed package ("installed"), alternating run by run.

Why it matters: each worker decodes a chunk into scratch buffers (fetched bytes, decoded
planes, the decoded chunk). Until 2026-11-29 each worker thread kept its buffers for the life
of the process; a host with 64 cores (or any call with threads=64) kept about a chunk's
worth of buffers per worker after every load (bench/README.md, "Memory kept after a load").
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
from typing import Dict, List

CHILD = r"""
import json, sys, time, gc
import numpy as np
import jtree
def rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
path, threads = sys.argv[1], int(sys.argv[2])
gc.collect()
before = rss()
t0 = time.perf_counter()
tree = jtree.load(path, threads=threads)
seconds = time.perf_counter() - t0
def leaves(x):
    if isinstance(x, dict):
        for v in x.values():
            yield from leaves(v)
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from leaves(v)
    else:
        yield x
arrays = sum(int(getattr(x, "nbytes", 0)) for x in leaves(tree))
loaded = rss()
del tree
gc.collect()
after = rss()
print(json.dumps({"seconds": seconds, "beyond_arrays": loaded - before - arrays,
                  "kept": after - before, "arrays": arrays, "jtree": jtree.__file__}))
"""


def make_file(path: str) -> None:
    import ml_dtypes
    import numpy as np

    import jtree
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((16384, 4096), dtype=np.float32) * 0.02).astype(ml_dtypes.bfloat16)
    jtree.save({"w": w}, path)


def run_child(path: str, threads: int, pythonpath: str) -> Dict[str, float]:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", CHILD, path, str(threads)], env=env,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default="0,16,64")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--file", default="")
    ap.add_argument("--workdir", default="/dev/shm" if os.path.isdir("/dev/shm") else "/tmp")
    ap.add_argument("--build", action="append", default=[],
                    help="LABEL=DIR: also run with DIR first on PYTHONPATH")
    ap.add_argument("--out", default="", help="JSON of every run")
    a = ap.parse_args()
    path = a.file or os.path.join(a.workdir, "jtree-retained-memory.jtree")
    made = False
    if not a.file:
        make_file(path)
        made = True
    builds = [("installed", "")] + [tuple(b.split("=", 1)) for b in a.build]
    threads = [int(t) for t in a.threads.split(",")]
    runs: Dict[str, Dict[int, List[Dict[str, float]]]] = {b: {t: [] for t in threads}
                                                          for b, _ in builds}
    try:
        for _ in range(a.runs):
            for t in threads:
                for label, pp in builds:
                    runs[label][t].append(run_child(path, t, pp))
    finally:
        if made:
            os.remove(path)
    mib = 1 << 20
    print(f"{'build':<10} {'threads':>7} {'load ms':>9} {'beyond arrays MiB':>18} "
          f"{'kept after del MiB':>19}   (medians of {a.runs} fresh processes)")
    for label, _ in builds:
        for t in threads:
            rs = runs[label][t]
            med = {k: statistics.median(r[k] for r in rs)
                   for k in ("seconds", "beyond_arrays", "kept")}
            print(f"{label:<10} {t:>7} {med['seconds'] * 1e3:>9.1f} "
                  f"{med['beyond_arrays'] / mib:>18.1f} {med['kept'] / mib:>19.1f}")
    print("jtree modules:", ", ".join(sorted({f"{label}: {runs[label][threads[0]][0]['jtree']}"
                                              for label, _ in builds})))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(runs, f, indent=1)


if __name__ == "__main__":
    main()
