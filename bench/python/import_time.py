"""What importing costs a fresh process: `import jtree` against `import numpy` (which jtree
imports) and the peers' modules, each in its own fresh interpreter, alternated, N rounds.

    .venv/bin/python bench/python/import_time.py --runs 15

Prints, per module, the min and median milliseconds of `import <module>` (the interpreter's
own start not included) and the median over numpy's median.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from typing import Dict, List

CODE = ("import time\nt = time.perf_counter()\nimport {m}\n"
        "print((time.perf_counter() - t) * 1000)\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--modules", default="numpy,jtree,safetensors.numpy,safetensors.torch,torch")
    a = ap.parse_args()
    modules = a.modules.split(",")
    times: Dict[str, List[float]] = {m: [] for m in modules}
    for _ in range(a.runs):
        for m in modules:
            r = subprocess.run([sys.executable, "-c", CODE.format(m=m)], capture_output=True,
                               text=True)
            if r.returncode != 0:
                times.pop(m, None)
                print(f"({m}: cannot be imported here, left out)")
                modules.remove(m)
                break
            times[m].append(float(r.stdout))
    base = statistics.median(times["numpy"]) if "numpy" in times else None
    print(f"import in a fresh process, {a.runs} runs each, alternated (ms)")
    print(f"{'module':22} {'min':>8} {'median':>8} {'x numpy':>8}")
    for m, t in times.items():
        med = statistics.median(t)
        print(f"{m:22} {min(t):8.1f} {med:8.1f} {med / base if base else float('nan'):8.2f}")


if __name__ == "__main__":
    main()
