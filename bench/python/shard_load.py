"""A tensor-parallel rank's shard into torch tensors, on the host or a GPU: jtree against the
peers, in fresh processes, side by side in one run (issue 46's workload).

    .venv/bin/python bench/python/shard_load.py [--layers 8] [--rank 3 --world 8] [--runs 5]
                                                [--dirs /dev/shm /var/tmp] [--cold]
                                                [--device cpu|cuda]

A Llama-like bf16 state dict (flat names, as a checkpoint on the hub) is written once per
directory as safetensors, as a raw .jtree (compression=None) and as the default .jtree (zstd).
Each measurement is one fresh Python process that imports what it needs, loads rank RANK of
WORLD's shard (column-parallel q/k/v and gate/up by rows, row-parallel o and down by columns,
embeddings and lm_head by vocabulary rows, norms whole) as CPU torch tensors, and touches every
byte of them (a sum of each tensor's bytes as 64-bit words): the clock runs from the process's
first line to the last tensor touched, imports included. Systems:

- jtree-raw / jtree-zstd: jtree.load(path, slices=jtree.TensorParallel(rank, world),
  framework="torch", device=DEVICE), checksums verified (the default), one native pass (to a
  CUDA device straight into device memory);
- jtree-raw-tp / jtree-zstd-tp: the same load of files saved with shard_layout=WORLD (the
  chunk grids cut at every rank's part: a rank reads and verifies whole chunks of its own);
- safetensors: safe_open(framework="pt", device=DEVICE) and get_slice(name)[a:b] (or [:, a:b])
  per tensor;
- torch-mmap: torch.load(mmap=True) of a torch.save of the same dict, narrow + contiguous,
  then .to(DEVICE).
With --device cuda the CUDA context is made before the clock, and the clock stops once the
device is done (torch.cuda.synchronize); the bytes are summed on the device.

`--whole` loads the whole model instead (what a file laid out for ranks costs a whole load).
`--cold` evicts the files from the page cache before each load (POSIX_FADV_DONTNEED; a disk
file system, not tmpfs, where nothing can be evicted), and measures the disk's own rate before
and after the loads (`dd iflag=direct bs=8M`, and 8 threads of 8 MiB O_DIRECT reads into
huge pages); with `--whole` each system's file GB/s is printed beside (its file's bytes over
its load's median). Prints one table per directory: the
median [min, max] in ms and each system's ratio to safetensors' median.
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


SYSTEMS = ("jtree-raw", "jtree-zstd", "jtree-raw-tp", "jtree-zstd-tp", "safetensors",
           "torch-mmap")


def model_shapes(layers: int, hidden: int, inter: int, kv: int, vocab: int):
    shapes = {"model.embed_tokens.weight": (vocab, hidden), "lm_head.weight": (vocab, hidden),
              "model.norm.weight": (hidden,)}
    for i in range(layers):
        p = f"model.layers.{i}."
        shapes.update({p + "self_attn.q_proj.weight": (hidden, hidden),
                       p + "self_attn.k_proj.weight": (kv, hidden),
                       p + "self_attn.v_proj.weight": (kv, hidden),
                       p + "self_attn.o_proj.weight": (hidden, hidden),
                       p + "mlp.gate_proj.weight": (inter, hidden),
                       p + "mlp.up_proj.weight": (inter, hidden),
                       p + "mlp.down_proj.weight": (hidden, inter),
                       p + "input_layernorm.weight": (hidden,),
                       p + "post_attention_layernorm.weight": (hidden,)})
    return shapes


def split_of(name: str, shape, rank: int, world: int):
    """(dim, begin, end) of the rank's part, or None for the whole tensor: the split
    jtree.TensorParallel makes by default, written out for the peers (rank -1: the whole
    model)."""
    if rank < 0:
        return None
    if name.endswith(("q_proj.weight", "k_proj.weight", "v_proj.weight", "gate_proj.weight",
                      "up_proj.weight")):
        n = shape[0] // world
        return 0, rank * n, (rank + 1) * n
    if name.endswith(("o_proj.weight", "down_proj.weight")):
        n = shape[1] // world
        return 1, rank * n, (rank + 1) * n
    if name.endswith(("embed_tokens.weight", "lm_head.weight")):
        n = -(-shape[0] // world)
        return 0, min(shape[0], rank * n), min(shape[0], (rank + 1) * n)
    return None


def write_files(d: str, args, systems=None) -> dict:
    """The paths of every system's file in `d`, writing those of `systems` (default: all)
    that are missing."""
    import numpy as np
    import torch
    from safetensors.torch import save_file

    import jtree

    paths = {"safetensors": os.path.join(d, "model.safetensors"),
             "jtree-raw": os.path.join(d, "model-raw.jtree"),
             "jtree-zstd": os.path.join(d, "model.jtree"),
             "jtree-raw-tp": os.path.join(d, f"model-raw-tp{args.world}.jtree"),
             "jtree-zstd-tp": os.path.join(d, f"model-tp{args.world}.jtree"),
             "torch-mmap": os.path.join(d, "model.pt")}
    missing = [s for s in (systems or paths) if not os.path.exists(paths[s])]
    if not missing:
        return paths
    g = torch.Generator().manual_seed(0)
    sd = {k: (torch.randn(s, generator=g) * 0.02).to(torch.bfloat16)
          for k, s in model_shapes(args.layers, args.hidden, args.inter, args.kv,
                                   args.vocab).items()}
    writers = {
        "safetensors": lambda p: save_file(sd, p),
        "jtree-raw": lambda p: jtree.save(sd, p, compression=None),
        "jtree-zstd": lambda p: jtree.save(sd, p),
        "jtree-raw-tp": lambda p: jtree.save(sd, p, compression=None, shard_layout=args.world),
        "jtree-zstd-tp": lambda p: jtree.save(sd, p, shard_layout=args.world),
        "torch-mmap": lambda p: torch.save(sd, p)}
    for s in missing:
        writers[s](paths[s])
    del np
    return paths


# ---- the child: one load in a fresh process --------------------------------------------------

def touch(tensors: dict) -> tuple:
    """(a digest of every byte of the tensors, their bytes): each tensor's bytes summed as
    64-bit words (at memory speed, where a sum of uint8 runs at about 1 GB/s and would hide
    the loads' differences; int() of a device's sum waits for the device)."""
    import torch

    touched = nbytes = 0
    for t in tensors.values():
        b = t.contiguous().view(torch.uint8)
        n8 = b.numel() // 8 * 8
        touched += int(b[:n8].view(torch.int64).sum()) + int(b[n8:].sum(dtype=torch.int64))
        nbytes += b.numel()
    return touched, nbytes


def add_model_args(ap) -> None:
    """The model's and the shard's command-line arguments (shared with shard_remote.py)."""
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--inter", type=int, default=5632)
    ap.add_argument("--kv", type=int, default=512)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--rank", type=int, default=3)
    ap.add_argument("--world", type=int, default=8)


def child(system: str, path: str, rank: int, world: int, device: str) -> None:
    import torch  # (every system hands out torch tensors)

    if device != "cpu":
        torch.zeros(1, device=device)  # (the CUDA context, before the clock)
    t0 = time.perf_counter()

    if system.startswith("jtree"):
        import jtree

        t1 = time.perf_counter()
        tensors = jtree.load(path, slices=jtree.TensorParallel(rank, world) if rank >= 0 else
                             None, framework="torch", device=device)
    elif system == "safetensors":
        from safetensors import safe_open

        t1 = time.perf_counter()
        tensors = {}
        with safe_open(path, framework="pt", device=device) as f:
            for k in f.keys():
                sl = f.get_slice(k)
                part = split_of(k, sl.get_shape(), rank, world)
                if part is None:
                    tensors[k] = f.get_tensor(k)
                elif part[0] == 0:
                    tensors[k] = sl[part[1]:part[2]]
                else:
                    tensors[k] = sl[:, part[1]:part[2]]
    elif system == "torch-mmap":
        t1 = time.perf_counter()
        sd = torch.load(path, mmap=True, weights_only=True)
        tensors = {}
        for k, t in sd.items():
            part = split_of(k, tuple(t.shape), rank, world)
            tensors[k] = (t.clone() if part is None
                          else t.narrow(part[0], part[1], part[2] - part[1]).contiguous()
                          ).to(device)
    else:
        raise SystemExit(f"unknown system {system}")
    for t in tensors.values():
        assert t.device.type == torch.device(device).type, (t.device, device)
    touched, nbytes = touch(tensors)
    t2 = time.perf_counter()
    print(json.dumps({"seconds": t2 - t0, "load_seconds": t2 - t1, "bytes": nbytes,
                      "digest": touched}))


# ---- the disk's own rate (--cold) ------------------------------------------------------------

def _evict(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def dd_rate(path: str) -> float:
    """GB/s of `dd iflag=direct bs=8M` over the evicted file: one O_DIRECT read at a time,
    into dd's own buffer (4 KiB pages)."""
    _evict(path)
    t0 = time.perf_counter()
    subprocess.run(["dd", f"if={path}", "of=/dev/null", "iflag=direct", "bs=8M"], check=True,
                   capture_output=True)
    return os.path.getsize(path) / (time.perf_counter() - t0) / 1e9


def parallel_direct_rate(path: str, reads: int = 8, part: int = 8 << 20,
                         huge: bool = True) -> float:
    """GB/s of `reads` threads reading the evicted file with O_DIRECT, `part` bytes at a time,
    each into a buffer of its own, reused, backed by transparent huge pages (what jtree's cold
    reads do, lib/src/read/cold_reads.h: the device then gets large requests) or, with
    huge=False, by 4 KiB pages."""
    import ctypes
    import mmap
    import threading

    huge = 2 << 20
    _evict(path)
    size = os.path.getsize(path)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    nxt, lock = [0], threading.Lock()

    def reader():
        m = mmap.mmap(-1, part + huge, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        m.madvise(mmap.MADV_HUGEPAGE if huge else mmap.MADV_NOHUGEPAGE)
        addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
        buf = memoryview(m)[(-addr) % huge:][:part]
        buf[:] = bytes(part)  # (faulted in once, before the clock, as reused buffers are)
        barrier.wait()
        while True:
            with lock:
                off = nxt[0]
                nxt[0] += part
            if off >= size:
                break
            os.preadv(fd, [buf], off)
        del buf
        m.close()

    barrier = threading.Barrier(reads + 1)
    threads = [threading.Thread(target=reader) for _ in range(reads)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - t0
    os.close(fd)
    return size / seconds / 1e9


def disk_rates(path: str) -> str:
    return (f"dd iflag=direct bs=8M {dd_rate(path):.2f} GB/s; 8 O_DIRECT reads of 8 MiB in "
            f"flight into huge pages {parallel_direct_rate(path):.2f} GB/s")


# ---- the driver ------------------------------------------------------------------------------

def run_one(system: str, path: str, args) -> dict:
    # (Imported here, in the driver: the children import only what they measure.)
    sys.path.insert(0, os.path.dirname(HERE))
    from child import drop_from_page_cache  # noqa: PLC0415  (bench/python/child.py)

    if args.cold and not drop_from_page_cache(path):
        raise SystemExit(f"--cold: {path} is on tmpfs, whose pages cannot be dropped")
    rank = -1 if args.whole else args.rank
    out = subprocess.run([sys.executable, HERE, "--child", system, path, str(rank),
                          str(args.world), args.device], capture_output=True, text=True,
                         timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"{system} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", nargs=5, metavar=("SYSTEM", "PATH", "RANK", "WORLD", "DEVICE"))
    ap.add_argument("--device", default="cpu", help="cpu, or cuda / cuda:N")
    add_model_args(ap)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dirs", nargs="+", default=["/dev/shm", "/var/tmp"])
    ap.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    ap.add_argument("--cold", action="store_true")
    ap.add_argument("--whole", action="store_true",
                    help="load the whole model instead of a rank's shard (what a layout for "
                         "ranks costs a whole load)")
    args = ap.parse_args()
    if args.child:
        system, path, rank, world, device = args.child
        child(system, path, int(rank), int(world), device)
        return 0
    for base in args.dirs:
        d = os.path.join(base, f"jtree-shard-bench-{args.layers}-{args.hidden}")
        os.makedirs(d, exist_ok=True)
        paths = write_files(d, args, args.systems)
        results = {s: [] for s in args.systems}
        loads = {s: [] for s in args.systems}
        digests = {}
        disk = [disk_rates(paths[args.systems[0]])] if args.cold else []
        # Alternated: each round loads every system once, so drift hits them alike.
        for _ in range(args.runs):
            for s in args.systems:
                r = run_one(s, paths[s], args)  # (--whole: rank -1)
                results[s].append(r["seconds"] * 1e3)
                loads[s].append(r["load_seconds"] * 1e3)
                digests.setdefault(s, (r["digest"], r["bytes"]))
        first = next(iter(digests.values()))
        bad = [s for s, dg in digests.items() if dg != first]
        size = os.path.getsize(paths["safetensors"])
        what = "the whole model" if args.whole else f"rank {args.rank} of {args.world}"
        print(f"\n{d} ({'cold' if args.cold else 'warm'}), to {args.device}: {what}, "
              f"model {size / 2**30:.2f} GiB, loaded {first[1] / 2**20:.1f} MiB, "
              f"{args.runs} runs, fresh processes, load average {os.getloadavg()[0]:.1f}")
        if args.cold:
            disk.append(disk_rates(paths[args.systems[0]]))
            print(f"the disk ({paths[args.systems[0]]}), before the loads: {disk[0]}; after: "
                  f"{disk[1]}")
        # A cold whole load reads its file: its rate from the disk (file bytes / load alone).
        rate_column = args.cold and args.whole
        print("| system | process, imports included: median ms [min, max] | / safetensors "
              "| the load alone (after the imports) | / safetensors |"
              + (" file GB/s (load alone) |" if rate_column else "") + "\n|---|---|---|---|---|"
              + ("---|" if rate_column else ""))
        med = {s: statistics.median(ms) for s, ms in results.items()}
        lmed = {s: statistics.median(ms) for s, ms in loads.items()}
        for s in results:
            ratio = (f"{med[s] / med['safetensors']:.2f}" if "safetensors" in med else "-")
            lratio = (f"{lmed[s] / lmed['safetensors']:.2f}" if "safetensors" in lmed else "-")
            print(f"| {s} | {med[s]:.0f} [{min(results[s]):.0f}, {max(results[s]):.0f}] | "
                  f"{ratio} | {lmed[s]:.0f} [{min(loads[s]):.0f}, {max(loads[s]):.0f}] | "
                  f"{lratio} |"
                  + (f" {os.path.getsize(paths[s]) / lmed[s] / 1e6:.2f} |" if rate_column
                     else ""))
        if bad:
            print(f"!!! the shards of {bad} differ from {next(iter(digests))}'s")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
