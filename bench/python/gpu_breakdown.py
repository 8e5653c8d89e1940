"""Where the time of a jtree load into GPU memory goes, in fresh processes (issue 22).

gpu_load.py times whole loads against the peers; this script splits jtree's own load of one
workload into its parts, each mode in fresh processes (--runs of each), so that the gap between
the native pipeline (bench_device) and a Python load is explained rather than guessed:

  alloc-each   torch.empty on the device for every array (what device= and out= pay)
  alloc-one    one torch.empty for all the arrays' bytes, the arrays as views of it
  dev          jtree.load(f, device=...): the whole call (open, plan, allocate, read, copy),
               as it runs by default: planned in the native pass (since 2026-11-27, fourth
               session), the staging buffers pinned ahead while it plans
  dev-planner  dev planned by the Python planner instead (_load_torch.as_stored: what
               device= loads did before the native pass)
  dev-serial   the same with JTREE_DEVICE_OVERLAP=0: no pinning ahead (the gain of pinning
               ahead is dev against it)
  dev-reads    JTREE_DEVICE_OVERLAP=reads: besides, each staging memory's worth of the plan is
               read on a worker thread while the load plans the rest (not the default since
               2026-11-27: measured slower, bench/gpu.md)
  dev-reads-unpinned  dev-reads without the pinning ahead
  dev-reserve, dev-reads-reserve  dev, dev-reads after one torch.empty of all the arrays'
               bytes, freed at once (inside the clock): torch's caching allocator then carves
               the arrays out of that one segment, so no cudaMalloc runs while copies are in
               flight
  dev-expandable  dev with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (torch maps
               pages into one reserved range instead of a cudaMalloc per new block: the 873
               allocations took 33 ms of the default load's 90 on an H200)
  dev-small-pages  dev with JTREE_STAGING_NO_HUGE_PAGES=1: the staging buffers faulted in as
               small pages, as before 2026-11-27 (the gain of huge pages is dev against it)
  dev-pin-early  dev with the staging buffers' pinning started at the call's start, before
               the open and the plan (inside the clock), instead of once half the staging
               memory is planned: does the pinning then hide behind the open and the plan,
               and do the allocations still wait for it?
  dev-reserve-pin  one reserving torch.empty of all the arrays' bytes, freed, then the
               pinning started, then the load (all inside the clock): the one cudaMalloc
               made before the pinning, the 873 allocations carved from torch's cache while
               it pins. In the fourth run the allocations took 12.7 ms without pinning
               beside them and 32-38 ms with it, the read starting no earlier (dev against
               dev-serial; populating no longer holds the mmap lock since 2026-11-29,
               bench/gpu.md): if they still wait for the pinning, in the driver, this order
               overlaps them, and the library should allocate this way
  dev-per-tensor  dev with DeviceOptions(allocation="per_tensor"): a torch.empty per array, as
               device= loads allocated before 2026-12-05 (the default since then, "grouped",
               makes the arrays views of one torch.empty per device, placed when the load
               reads: the gain of grouping is dev against it; CUDA only)
  out-each     allocation per array (timed apart), then jtree.load(f, out=...) alone
  out-one      one allocation + views (timed apart), then jtree.load(f, out=...) alone
  out-reserved as out-each, after one allocation of all the bytes was made and freed (torch's
               caching allocator then carves the arrays out of one cached segment)
  dev-again    two device= loads in one process: the second finds the pinned buffers and the
               allocator's blocks of the first
  dev-profile  cProfile of a device= load: the functions with the most own time
  fastsafetensors  the peer's load (gpu_load.py's call), for reference in the same run

  gpu_breakdown.py --device cuda [--workload llm] [--runs 3] [--modes a,b] [--out JSON]

The file (jtree raw, and safetensors for the peer) is written to --workdir (default /dev/shm)
from gpu_load.py's workload cache and read into the page cache before every run (warm). Each
child imports torch and jtree and starts CUDA before its clock, as gpu_load.py's children do.
With --device cpu it only tests the script (no device memory is involved).
"""
import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

MODES = ["alloc-each", "alloc-one", "dev", "dev-planner", "dev-serial", "dev-reads",
         "dev-reads-unpinned", "dev-reserve", "dev-reads-reserve", "dev-expandable",
         "dev-small-pages", "dev-pin-early", "dev-reserve-pin", "dev-per-tensor", "out-each",
         "out-one",
         "out-reserved", "dev-again", "dev-profile", "fastsafetensors"]
DEV_MODES = ("dev", "dev-planner", "dev-serial", "dev-reads", "dev-reads-unpinned",
             "dev-reserve", "dev-reads-reserve", "dev-expandable", "dev-small-pages",
             "dev-pin-early", "dev-reserve-pin", "dev-per-tensor")


def instrument(res: Dict[str, Any]) -> Any:
    """Times, in this child, each native read of a device load (start and end from the
    returned clock's zero, MiB), the device allocations of the load's arrays (their total and
    count) and when the staging buffers' pinning was started, into res["batches"],
    res["alloc_in_load_ms"] and res["alloc_spread"]: the longest allocation, when it started
    and how many took over 1 ms (one allocation that waits the whole pinning out, a driver
    lock, looks unlike every allocation slowed a little, contention for the host's memory),
    the median in microseconds, and when pin_ahead was first called (ms from the clock's zero;
    None: never); returns the functions that start a load's clock and keep what was timed
    (done). Wraps jtree internals: a measurement, not an API."""
    from jtree import _device, _load_torch
    zero = [time.perf_counter()]
    batches: List[Any] = []
    alloc = [0.0, 0]
    each: List[Any] = []  # (start from zero, duration) of every allocation, seconds
    pinned_at: List[float] = []
    native, new = _device._native_load, _load_torch._new_on_device
    pin_ahead = _device.pin_ahead
    device_pass = _load_torch.ADAPTER.device_pass

    def timed_native(reader: Any, reqs: List[Any], dev: Any, kw: dict) -> Any:
        t = time.perf_counter()
        r = native(reader, reqs, dev, kw)
        end = time.perf_counter()
        batches.append([round(1e3 * (t - zero[0]), 1), round(1e3 * (end - zero[0]), 1),
                        round(sum(q[3] for q in reqs) / 2**20)])
        return r

    def timed_new(*a: Any, **k: Any) -> Any:
        return timed_new_with(lambda: new(*a, **k))

    def timed_device_pass(*a: Any) -> Any:
        # (The native pass's allocations: device= loads it plans; the planner's are
        # _new_on_device's, timed above.)
        plain = device_pass(*a)
        new_device = plain.new_device
        plain.new_device = lambda *b: timed_new_with(new_device, *b)
        return plain

    def timed_new_with(fn: Any, *a: Any) -> Any:
        t = time.perf_counter()
        r = fn(*a)
        took = time.perf_counter() - t
        alloc[0] += took
        alloc[1] += 1
        each.append((t - zero[0], took))
        return r

    def timed_pin_ahead(*a: Any, **k: Any) -> Any:
        if not pinned_at:
            pinned_at.append(time.perf_counter() - zero[0])
        return pin_ahead(*a, **k)

    _device._native_load, _load_torch._new_on_device = timed_native, timed_new
    _device.pin_ahead = timed_pin_ahead
    _load_torch.ADAPTER.device_pass = timed_device_pass

    def start() -> None:
        zero[0] = time.perf_counter()
        batches.clear()
        each.clear()
        pinned_at.clear()
        alloc[0], alloc[1] = 0.0, 0

    def done() -> None:
        res["alloc_in_load_ms"] = [round(1e3 * alloc[0], 1), alloc[1]]
        res["batches"] = list(batches)
        spread: Dict[str, Any] = {"pin_ahead_at_ms": (round(1e3 * pinned_at[0], 1)
                                                      if pinned_at else None)}
        if each:
            at, longest = max(each, key=lambda e: e[1])
            took = sorted(d for _, d in each)
            spread.update(max_ms=round(1e3 * longest, 2), max_at_ms=round(1e3 * at, 1),
                          over_1ms=sum(d > 1e-3 for d in took),
                          median_us=round(1e6 * took[len(took) // 2], 1),
                          first_at_ms=round(1e3 * each[0][0], 1),
                          last_end_ms=round(1e3 * (each[-1][0] + each[-1][1]), 1))
        res["alloc_spread"] = spread
    return start, done


def total_bytes(path: str) -> int:
    """The bytes of the file's arrays, each rounded up to 512 as torch's caching allocator
    rounds a block (what one reserving allocation must hold for all of them to be carved out
    of it)."""
    import torch
    total = 0
    for shape, dt in specs(path):
        n = torch.empty((), dtype=dt, device="meta").element_size()
        for d in shape:
            n *= d
        total += -(-n // 512) * 512
    return total


def specs(path: str) -> List[Any]:
    """(shape, torch dtype) of every array of the file, in the order jtree.load_pytreedef's
    tree lists them."""
    import jtree
    import workloads as W
    from gpu_load import torch_dtype
    with jtree.open(path) as f:
        tree = jtree.load_pytreedef(f)
    return [(tuple(s.shape), torch_dtype(s.dtype)) for _p, s in W.iter_leaves(tree)
            if getattr(s, "is_array", False)]


def allocate(path: str, device: str, one: bool) -> Any:
    """The `out=` tree of the file: a new tensor per array, or views of one allocation."""
    import jtree
    import torch
    import workloads as W
    from gpu_load import torch_dtype
    with jtree.open(path) as f:
        tree = jtree.load_pytreedef(f)
    if not one:
        return W.map_tree(lambda _p, s: torch.empty(tuple(s.shape), dtype=torch_dtype(s.dtype),
                                                    device=device)
                          if getattr(s, "is_array", False) else True, tree)
    sizes = []
    for _p, s in W.iter_leaves(tree):
        if getattr(s, "is_array", False):
            n = torch.empty((), dtype=torch_dtype(s.dtype), device="meta").element_size()
            for d in s.shape:
                n *= d
            sizes.append((n + 255) // 256 * 256)
    buf = torch.empty(sum(sizes), dtype=torch.uint8, device=device)
    at = [0]

    def view(_p: Any, s: Any) -> Any:
        if not getattr(s, "is_array", False):
            return True
        dt = torch_dtype(s.dtype)
        n = torch.empty((), dtype=dt, device="meta").element_size()
        for d in s.shape:
            n *= d
        v = buf[at[0]:at[0] + n].view(dt).view(tuple(s.shape))
        at[0] += (n + 255) // 256 * 256
        return v
    return W.map_tree(view, tree)


def child(mode: str, path: str, st_path: str, device: str) -> Dict[str, Any]:
    if device == "cuda":
        device = "cuda:0"  # (fastsafetensors needs the index)
    import torch
    import jtree
    import gpu_load  # noqa: F401  (allocate's imports, before the clock: not an allocation cost)
    import workloads  # noqa: F401
    if mode == "fastsafetensors":
        import fastsafetensors  # noqa: F401
    if device.startswith("cuda"):
        torch.cuda.init()
        torch.zeros(8, device=device)
        torch.cuda.synchronize(device)

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize(device)

    def timed(fn: Any) -> Any:
        t0 = time.perf_counter()
        r = fn()
        sync()
        return time.perf_counter() - t0, r

    res: Dict[str, Any] = {}
    if mode in ("alloc-each", "alloc-one"):
        res["alloc_s"], _ = timed(lambda: allocate(path, device, mode == "alloc-one"))
    elif mode in DEV_MODES:
        from jtree import _device
        if mode == "dev-reads-unpinned":
            _device.pin_ahead = lambda device, options: None
        if mode == "dev-planner":
            from jtree import _load_plain
            real_applies = _load_plain.applies
            _load_plain.applies = lambda o: (real_applies(o)
                                             and _load_plain._device_target(o) is None)
        reserve = (total_bytes(path) if mode in ("dev-reserve", "dev-reads-reserve",
                                                 "dev-reserve-pin") else 0)
        start, done = instrument(res)
        opts = (jtree.DeviceOptions(allocation="per_tensor" if mode == "dev-per-tensor"
                                    else "grouped") if device.startswith("cuda") else None)

        def load() -> Any:
            start()
            if reserve:
                del_me = torch.empty(reserve, dtype=torch.uint8, device=device)
                del del_me
            if mode in ("dev-pin-early", "dev-reserve-pin") and device.startswith("cuda"):
                _device.pin_ahead(torch.device(device), None)
            return jtree.load(path, device=device, device_options=opts)
        res["load_s"], t = timed(load)
        done()
        res["stats"] = str(opts.last_stats) if opts is not None else ""
        del t
        start()
        res["again_s"], _ = timed(lambda: jtree.load(path, device=device))
    elif mode in ("out-each", "out-one", "out-reserved"):
        def alloc() -> Any:
            if mode == "out-reserved":
                views = allocate(path, device, True)
                del views  # (made and freed: torch's allocator keeps the segment)
            return allocate(path, device, mode == "out-one")
        res["alloc_s"], out = timed(alloc)
        res["load_s"], _ = timed(lambda: jtree.load(path, out=out))
    elif mode == "dev-again":
        res["load_s"], t = timed(lambda: jtree.load(path, device=device))
        del t
        res["again_s"], _ = timed(lambda: jtree.load(path, device=device))
    elif mode == "dev-profile":
        import cProfile
        import io
        import pstats
        pr = cProfile.Profile()
        pr.enable()
        res["load_s"], _ = timed(lambda: jtree.load(path, device=device))
        pr.disable()
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(14)
        res["profile"] = s.getvalue()
    elif mode == "fastsafetensors":
        from gpu_load import load_fastsafetensors
        res["load_s"], _ = timed(lambda: load_fastsafetensors(st_path, device))
    return res


def read_in(path: str) -> None:
    with open(path, "rb") as fh:
        while fh.read(64 << 20):
            pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--workload", default="llm")
    ap.add_argument("--scale", type=float, default=1)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--cache", default="/var/tmp/jtree-bench-cache")
    ap.add_argument("--workdir", default="/dev/shm/jtree-gpu-breakdown")
    ap.add_argument("--out", default="")
    ap.add_argument("--child", default="")
    ap.add_argument("--path", default="")
    ap.add_argument("--st-path", default="")
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child, a.path, a.st_path, a.device)))
        return
    modes = [m for m in a.modes.split(",") if m]
    bad = [m for m in modes if m not in MODES]
    if bad:
        raise SystemExit(f"unknown modes {bad}; the modes are {MODES}")
    import jtree
    import peers as P
    import workloads as W
    cache = W.ensure(a.cache, a.workload, a.scale, 0)
    os.makedirs(a.workdir, exist_ok=True)
    tree = W.load_tree(cache)
    path = os.path.join(a.workdir, f"{a.workload}-raw.jtree")
    jtree.save(tree, path, compression=None, overwrite=True)
    st_path = ""
    if "fastsafetensors" in modes:
        peer = P.PEERS["safetensors"]
        st_path = P.output_path(a.workdir, peer, a.workload)
        P.remove(st_path)
        peer.save(peer.prepare(tree), st_path)
    del tree
    arrays = len(specs(path))
    print(f"{a.workload}: {W.raw_bytes(cache) / 2**30:.2f} GiB in {arrays} arrays; "
          f"{a.runs} fresh processes per mode; device {a.device}", flush=True)
    results: Dict[str, List[Dict[str, Any]]] = {}
    for mode in modes:
        for _ in range(a.runs):
            read_in(st_path if mode == "fastsafetensors" else path)
            env = dict(os.environ)
            env.pop("JTREE_DEVICE_OVERLAP", None)  # (the default, but for these modes:)
            if mode == "dev-serial":
                env["JTREE_DEVICE_OVERLAP"] = "0"
            elif mode.startswith("dev-reads"):
                env["JTREE_DEVICE_OVERLAP"] = "reads"
            if mode == "dev-expandable":
                env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
            env.pop("JTREE_STAGING_NO_HUGE_PAGES", None)
            if mode == "dev-small-pages":
                env["JTREE_STAGING_NO_HUGE_PAGES"] = "1"
            p = subprocess.run([sys.executable, __file__, "--child", mode, "--path", path,
                                "--st-path", st_path, "--device", a.device],
                               capture_output=True, text=True, timeout=300, env=env)
            if p.returncode != 0:
                print(f"{mode}: failed ({p.returncode}): {p.stderr.strip()[-2000:]}", flush=True)
                break
            results.setdefault(mode, []).append(json.loads(p.stdout.strip().splitlines()[-1]))
        runs = results.get(mode, [])
        if not runs:
            continue
        line = [f"{mode:19}"]
        for k in ("alloc_s", "load_s", "again_s"):
            v = sorted(r[k] for r in runs if k in r)
            if v:
                line.append(f"{k[:-2]} {1e3 * v[len(v) // 2]:7.1f} ms "
                            f"[{1e3 * v[0]:.1f}, {1e3 * v[-1]:.1f}]")
        print("  ".join(line), flush=True)
        if runs[0].get("stats"):
            print(f"{'':19}  stats: {runs[0]['stats']}")
        for r in runs[:1]:
            if "alloc_in_load_ms" in r:
                print(f"{'':19}  first run: allocations in the load {r['alloc_in_load_ms'][0]} ms "
                      f"({r['alloc_in_load_ms'][1]}); native reads [start, end ms, MiB]: "
                      f"{r['batches']}")
                print(f"{'':19}  first run: allocations' spread {r.get('alloc_spread')}")
        if "profile" in runs[-1]:
            print(runs[-1]["profile"])
    if a.out:
        with open(a.out, "w") as fh:
            json.dump({"workload": a.workload, "arrays": arrays, "device": a.device,
                       "results": results}, fh, indent=1)


if __name__ == "__main__":
    main()
