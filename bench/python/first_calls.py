"""First calls of a fresh process on a bf16 model: jtree against safetensors, side by side.

    .venv/bin/python bench/python/first_calls.py [--runs 9] [--dir /dev/shm]

Each measurement is a fresh interpreter that imports the library (and torch, which both hand
out tensors of), then times one first call: the structure (every name, shape and dtype), one
leaf as a torch tensor, or a row slice of one leaf as a torch tensor. Prints the median [min]
of the call alone and of the import + the call, in ms, and jtree's ratio to safetensors'.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CALLS = {
    "structure": {
        "jtree": "s = jtree.load_pytreedef(P); n = [(k, v.shape) for k, v in s.items()]",
        "safetensors": ("with safe_open(P, framework='pt') as f:\n"
                        "    n = [(k, f.get_slice(k).get_shape(), f.get_slice(k).get_dtype())"
                        " for k in f.keys()]"),
    },
    "one leaf": {
        "jtree": "t = jtree.load(P, keys=K, framework='torch', prune=True)[K]",
        "safetensors": "with safe_open(P, framework='pt') as f:\n    t = f.get_tensor(K)",
    },
    "one slice": {
        "jtree": "f = jtree.open(P); t = f[K].get(slice(64, 128), framework='torch')",
        "safetensors": "with safe_open(P, framework='pt') as f:\n    t = f.get_slice(K)[64:128]",
    },
}
IMPORTS = {"jtree": "import jtree", "safetensors": "from safetensors import safe_open"}


def child_code(system: str, call: str, path: str, key: str) -> str:
    body = "\n".join("    " + line for line in CALLS[call][system].splitlines())
    return (f"import time, json, torch\nt0 = time.perf_counter()\n{IMPORTS[system]}\n"
            f"P, K = {path!r}, {key!r}\nt1 = time.perf_counter()\nif True:\n{body}\n"
            f"t2 = time.perf_counter()\n"
            f"print(json.dumps([(t2 - t1) * 1e3, (t2 - t0) * 1e3]))\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--dir", default="/dev/shm")
    args = ap.parse_args()
    import torch
    from safetensors.torch import save_file

    import jtree

    g = torch.Generator().manual_seed(0)
    sd = {f"model.layers.{i}.{n}.weight": torch.randn(1024, 1024, generator=g).bfloat16()
          for i in range(8) for n in ("q_proj", "o_proj")}
    paths = {"jtree": os.path.join(args.dir, "first-calls.jtree"),
             "safetensors": os.path.join(args.dir, "first-calls.safetensors")}
    jtree.save(sd, paths["jtree"], compression=None)
    save_file(sd, paths["safetensors"])
    key = "model.layers.3.q_proj.weight"
    print(f"first calls in fresh processes, {args.runs} runs alternated, bf16 model of "
          f"{len(sd)} tensors, load average {os.getloadavg()[0]:.1f}")
    print("| call | jtree: the call [min] | safetensors | jtree / safetensors | "
          "import + call: jtree | safetensors |\n|---|---|---|---|---|---|")
    for call in CALLS:
        got = {s: [] for s in paths}
        for _ in range(args.runs):
            for s, p in paths.items():
                r = subprocess.run([sys.executable, "-c", child_code(s, call, p, key)],
                                   capture_output=True, text=True, timeout=300)
                if r.returncode != 0:
                    raise SystemExit(f"{s} {call}:\n{r.stderr}")
                got[s].append(json.loads(r.stdout.strip().splitlines()[-1]))
        med = {s: statistics.median(x[0] for x in v) for s, v in got.items()}
        low = {s: min(x[0] for x in v) for s, v in got.items()}
        whole = {s: statistics.median(x[1] for x in v) for s, v in got.items()}
        print(f"| {call} | {med['jtree']:.2f} [{low['jtree']:.2f}] | "
              f"{med['safetensors']:.2f} [{low['safetensors']:.2f}] | "
              f"{med['jtree'] / med['safetensors']:.2f} | {whole['jtree']:.0f} | "
              f"{whole['safetensors']:.0f} |")
    for p in paths.values():
        os.remove(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
