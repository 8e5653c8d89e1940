"""A tensor-parallel rank's shard over HTTP: bytes and requests the server sent, and the time, for
jtree's files (raw, default zstd, and both laid out for the ranks) with and without checksum
verification, against ranged GETs of the same tensors' bytes from a safetensors file (issue 47,
items 2 and 3). Fresh processes, side by side in one run, against a loopback nginx that this
script starts and whose access log counts what each load fetched.

    .venv/bin/python bench/python/shard_remote.py [--layers 8] [--rank 3 --world 8] [--runs 3]
                                                  [--dir /var/tmp]

The model is shard_load.py's (a Llama-like bf16 state dict; the same files). Systems, each
loading rank RANK of WORLD's shard as CPU torch tensors and touching every byte of them:

- jtree-FILE (verify) / jtree-FILE (no verify): one call,
  jtree.load(url, slices=jtree.TensorParallel(rank, world), framework="torch", verify=...):
  every range of every leaf issued at once over the connection pool. A verified read of a
  raw chunk fetches the whole chunk (its checksum covers all of it); an unverified one only the
  byte runs the shard wants. Files laid out for the ranks (shard_layout=WORLD) hold each
  rank's part as whole chunks of its own, so the verified shard fetches only its bytes.
- http-ranges: the safetensors file's header, then one ranged GET per tensor of the bytes that
  hold its part (a row part exactly; a column part needs every row, so the whole tensor), 16 at
  a time on threads (what a hand-written loader does with urllib), sliced into tensors.

`needed` is the shard's own bytes; `fetched / needed` is the server's body bytes over them.
Loopback has no round-trip time to speak of: the times here are the clients' own costs; a
simulated link (delay, per-connection caps) is not part of this script.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.abspath(__file__)
sys.path.insert(0, os.path.dirname(HERE))

from nginx import Nginx  # noqa: E402  (bench/python/nginx.py)
from shard_load import add_model_args, split_of, touch, write_files  # noqa: E402

FILES = {"raw": "jtree-raw", "zstd": "jtree-zstd", "raw-tp": "jtree-raw-tp",
         "zstd-tp": "jtree-zstd-tp"}


def http_ranges(url: str, rank: int, world: int):
    """The rank's tensors from a safetensors file over HTTP: its header, then one ranged GET per
    tensor (16 threads)."""
    import struct
    import urllib.request
    from concurrent.futures import ThreadPoolExecutor

    import torch

    def get(first: int, last: int) -> bytes:
        req = urllib.request.Request(url, headers={"Range": f"bytes={first}-{last}"})
        with urllib.request.urlopen(req) as r:
            return r.read()

    head = get(0, 7)
    n = struct.unpack("<Q", head)[0]
    header = json.loads(get(8, 8 + n - 1))
    header.pop("__metadata__", None)
    base = 8 + n

    def one(item):
        name, h = item
        shape, (begin, end) = h["shape"], h["data_offsets"]
        part = split_of(name, shape, rank, world)
        row = 2 * (shape[1] if len(shape) > 1 else 1)  # bf16 bytes per row
        if part is not None and part[0] == 0:
            first, rows = begin + part[1] * row, part[2] - part[1]
        else:
            first, rows = begin, (end - begin) // row
        data = get(base + first, base + first + rows * row - 1) if rows * row else b""
        t = torch.frombuffer(bytearray(data), dtype=torch.bfloat16).reshape(
            [rows] + list(shape[1:]))
        if part is not None and part[0] == 1:
            t = t[:, part[1]:part[2]].contiguous()
        return name, t

    with ThreadPoolExecutor(16) as pool:
        return dict(pool.map(one, header.items()))


def child(system: str, url: str, rank: int, world: int) -> None:
    import torch  # noqa: F401  (every system hands out torch tensors)

    t0 = time.perf_counter()
    if system.startswith("jtree"):
        import jtree

        verify = not system.endswith("no-verify")
        tensors = jtree.load(url, slices=jtree.TensorParallel(rank, world), framework="torch",
                             verify=verify)
    else:
        tensors = http_ranges(url, rank, world)
    touched, nbytes = touch(tensors)
    print(json.dumps({"seconds": time.perf_counter() - t0, "bytes": nbytes, "digest": touched}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", nargs=4, metavar=("SYSTEM", "URL", "RANK", "WORLD"))
    add_model_args(ap)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir", default="/var/tmp")
    args = ap.parse_args()
    if args.child:
        system, url, rank, world = args.child
        child(system, url, int(rank), int(world))
        return 0
    d = os.path.join(args.dir, f"jtree-shard-bench-{args.layers}-{args.hidden}")
    os.makedirs(d, exist_ok=True)
    paths = write_files(d, args)
    server = Nginx(d)
    server.start()
    try:
        systems = {"http-ranges": server.publish(paths["safetensors"])}
        for name, key in FILES.items():
            url = server.publish(paths[key])
            systems[f"jtree-{name} verify"] = url
            systems[f"jtree-{name} no-verify"] = url
        times = {s: [] for s in systems}
        counts, digests = {}, {}
        for _ in range(args.runs):  # alternated: drift hits every system alike
            for s, url in systems.items():
                server.mark()
                out = subprocess.run([sys.executable, HERE, "--child", s.replace(" ", "-"), url,
                                      str(args.rank), str(args.world)],
                                     capture_output=True, text=True, timeout=600)
                if out.returncode != 0:
                    raise SystemExit(f"{s} failed:\n{out.stderr}")
                r = json.loads(out.stdout.strip().splitlines()[-1])
                times[s].append(r["seconds"] * 1e3)
                counts[s] = server.since_mark()
                digests[s] = (r["digest"], r["bytes"])
    finally:
        server.stop()
    needed = next(iter(digests.values()))[1]
    print(f"\nrank {args.rank} of {args.world} over HTTP (loopback nginx): model "
          f"{os.path.getsize(paths['safetensors']) / 2**30:.2f} GiB, the shard {needed / 2**20:.1f}"
          f" MiB, {args.runs} runs, fresh processes, load average {os.getloadavg()[0]:.1f}")
    print("| system | fetched MiB | fetched / needed | requests | process ms: median [min, max] "
          "| / http-ranges |\n|---|---|---|---|---|---|")
    base = statistics.median(times["http-ranges"])
    for s in systems:
        c, med = counts[s], statistics.median(times[s])
        print(f"| {s} | {c['body_bytes'] / 2**20:.1f} | {c['body_bytes'] / needed:.2f} | "
              f"{c['requests']} | {med:.0f} [{min(times[s]):.0f}, {max(times[s]):.0f}] | "
              f"{med / base:.2f} |")
    bad = [s for s, dg in digests.items() if dg != digests["http-ranges"]]
    if bad:
        print(f"!!! the shards of {bad} differ from http-ranges'")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
