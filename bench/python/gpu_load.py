"""Loading a whole tree into GPU memory: jtree against safetensors, fastsafetensors and torch
(issues 6 and 22).

    .venv/bin/python bench/python/gpu_load.py --scale 1 --runs 3 --device cuda \\
        --cache-state warm,cold --cold-workdir /var/tmp/jtree-gpu-cold --time-budget 600 \\
        --out /tmp/gpu-load.json --md /tmp/gpu-load.md

For each workload of workloads.py (generated, or found in the cache that run.py also uses) the
files are written once into the work directory (tmpfs /dev/shm when it has room): jtree with
its default compression (zstd), jtree raw (compression=None), safetensors and torch.save. Then
every system below loads the whole tree into the device's memory --runs times, each run in a
fresh Python process, per cache state (--cache-state): warm (the file read into the page cache
just before the run) and cold (copies on a disk file system, --cold-workdir, evicted just
before the run: fsync + POSIX_FADV_DONTNEED, and as root drop_caches; a tmpfs is refused).
Each record says how much of the file was in the page cache before it (mincore). Before the
systems, a child measures the bound of issue 22 in the same run: pinned (and pageable) host to
device copies of the workload's size (capped at 1 GiB), median of 5; each row gets its "% of
pinned". --time-budget stops starting children after that many seconds; the JSON and the
markdown are rewritten after each system, so a kill leaves what was measured.

The clock runs from the call until the tree is on the device and the device is done
(torch.cuda.synchronize / block_until_ready); imports and the start of CUDA or of JAX's
backend happen before it. The first run of each system and cache state is checked byte for byte
against the source (every array copied back to the host), and every run checks that each
array is on the device asked for. Each run records its time, the host's peak RSS and the
device allocator's peak (torch.cuda.max_memory_allocated; JAX's peak_bytes_in_use).

Systems (--systems):
    jtree-torch, jtree-raw-torch          jtree.load(f, like) where like is load_pytreedef's
                                          structure with torch.empty(..., device) for each
                                          array: tensors of that dtype on that device
    jtree-torch-out, jtree-raw-torch-out  jtree.load(f, out=...) into tensors allocated on
                                          the device (the allocation is timed)
    jtree-torch-dev, jtree-raw-torch-dev  jtree.load(f, device=device): no template, the call a
                                          user writes first (as safetensors' load_file)
    jtree-raw-torch-dev-reads             as jtree-raw-torch-dev with JTREE_DEVICE_OVERLAP=reads:
                                          the first planned arrays are read while the rest is
                                          planned and allocated (slower warm, bench/gpu.md;
                                          cold, the disk could start sooner)
    jtree-torch-host, jtree-raw-torch-host
                                          as jtree-torch, with JTREE_DIRECT_DEVICE_LOAD=0: the
                                          fallback (host load, then .to(device)), to measure
                                          the direct path against it
    jtree-raw-torch-out-zc                as jtree-raw-torch-out with DeviceOptions(
                                          zero_copy="on"): copied to the device straight from
                                          the file's registered page-cache pages (experimental;
                                          skipped with --device cpu)
    jtree-jax, jtree-raw-jax              jtree.load(f, framework="jax", shardings=
                                          SingleDeviceSharding(device)); skipped, with the
                                          reason, when JAX sees no GPU
    safetensors                           safetensors.torch.load_file(path, device=...)
    fastsafetensors                       SafeTensorsFileLoader(SingleGroup(), device,
                                          nogds=True).copy_files_to_device(); skipped, with the
                                          reason, when it is not installed
    torch                                 torch.load(path, map_location=device)
    torch-mmap                            torch.load(path, mmap=True), then .to(device)

--device cpu runs the very same code on the CPU, so that the script can be tested on a machine
without a GPU: its figures are NOT GPU measurements, and it says so on stderr and at the top of
the markdown. --device cuda on a machine where torch sees no GPU stops with a message.

jtree's torch and JAX systems load to a CUDA device straight into device memory (issue 22:
pinned staging buffers, cudaMemcpyAsync overlapped with reading and decoding; jtree._device)
when the installed jtree has CUDA support and sees the device; otherwise through the host.
Each jtree record says which ("jtree path": direct or host), and so does the table.

The markdown (--md) has one table per workload: median [min, max], the ratio to the best
system of the same run, throughput, the device's peak allocation, the host's peak RSS, and the
byte check; then the machine (GPU, driver, CUDA, versions) and the command.
``--report JSON`` rewrites the markdown from an earlier run's JSON.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import peers as P  # noqa: E402
import workloads as W  # noqa: E402

# system -> (file format, label, what it calls). The formats are peers.py's adapters.
SYSTEMS: Dict[str, Tuple[str, str, str]] = {
    "jtree-torch": ("jtree", "jtree (zstd) → torch, like=",
                    "jtree.load(f, like): load_pytreedef's tree with torch.empty(..., device) per array"),
    "jtree-torch-out": ("jtree", "jtree (zstd) → torch, out=",
                        "jtree.load(f, out=tensors allocated on the device)"),
    "jtree-torch-dev": ("jtree", "jtree (zstd) → torch, device=",
                        "jtree.load(f, device=device): new tensors on the device, no template"),
    "jtree-jax": ("jtree", "jtree (zstd) → JAX",
                  "jtree.load(f, framework='jax', shardings=SingleDeviceSharding(device))"),
    "jtree-raw-torch": ("jtree-raw", "jtree (raw) → torch, like=", "as jtree-torch, file saved with compression=None"),
    "jtree-raw-torch-out": ("jtree-raw", "jtree (raw) → torch, out=", "as jtree-torch-out, compression=None"),
    "jtree-raw-torch-dev": ("jtree-raw", "jtree (raw) → torch, device=", "as jtree-torch-dev, compression=None"),
    "jtree-raw-torch-dev-reads": ("jtree-raw", "jtree (raw) → torch, device=, reading while planning",
                                  "as jtree-raw-torch-dev with JTREE_DEVICE_OVERLAP=reads: the "
                                  "reads start while the load still plans (for cold files)"),
    "jtree-raw-jax": ("jtree-raw", "jtree (raw) → JAX", "as jtree-jax, compression=None"),
    "jtree-raw-torch-out-zc": ("jtree-raw", "jtree (raw) → torch, out=, zero copy",
                               "as jtree-raw-torch-out with device_options=jtree.DeviceOptions("
                               "zero_copy='on'): DMA from the file's registered page-cache pages"),
    "jtree-torch-host": ("jtree", "jtree (zstd) → torch, via host",
                         "as jtree-torch with JTREE_DIRECT_DEVICE_LOAD=0: host load, then .to(device)"),
    "jtree-raw-torch-host": ("jtree-raw", "jtree (raw) → torch, via host",
                             "as jtree-torch-host, compression=None"),
    "safetensors": ("safetensors", "safetensors", "safetensors.torch.load_file(path, device=device)"),
    "fastsafetensors": ("safetensors", "fastsafetensors",
                        "SafeTensorsFileLoader(SingleGroup(), device, nogds=True): add_filenames, "
                        "copy_files_to_device(), get_tensor per key, close"),
    "torch": ("torch", "torch.load", "torch.load(path, map_location=device, weights_only=True)"),
    "torch-mmap": ("torch", "torch.load(mmap=True) + .to", "torch.load(path, mmap=True, weights_only=True), then .to(device) per tensor"),
}
FORMATS = ("jtree", "jtree-raw", "safetensors", "torch")
CACHE_STATES = ("warm", "cold")
# File systems whose files live in memory: their pages cannot be evicted, so no cold read.
MEMORY_FS = ("tmpfs", "ramfs")
NOT_GPU = ("THIS IS NOT A GPU MEASUREMENT: --device cpu runs the GPU benchmark's code on the "
           "CPU, to test the script; its figures say nothing about loading into GPU memory.")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def warn(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def is_jax(system: str) -> bool:
    return system.endswith("-jax")


# ---- the child: one load in a fresh process ------------------------------------------------------

class HostView:
    """child.check's view of a loaded leaf: a NumPy copy on the host."""

    def to_numpy(self, x: Any) -> Any:
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(x, torch.Tensor):
            return P.PEERS["torch"].to_numpy(x.detach().to("cpu"))
        if hasattr(x, "block_until_ready"):
            import jax
            return jax.device_get(x)
        return x


def torch_dtype(d: Any) -> Any:
    import numpy as np
    import torch
    return getattr(torch, np.dtype(d).name)  # bfloat16, float32, int32: the workloads' dtypes


def jax_device(device: str) -> Any:
    import jax
    if device == "cpu":
        return jax.devices("cpu")[0]
    index = int(device.split(":")[1]) if ":" in device else 0
    return jax.devices("gpu")[index]


def load(system: str, path: str, device: str) -> Any:
    """The timed operation: the whole tree, on the device."""
    if system.startswith("jtree"):
        import jtree
        with jtree.open(path) as f:
            if is_jax(system):
                import jax
                return jtree.load(f, framework="jax",
                                  shardings=jax.sharding.SingleDeviceSharding(jax_device(device)))
            if system.endswith(("-dev", "-dev-reads")):
                return jtree.load(f, device=device)
            import torch
            spec = jtree.load_pytreedef(f)

            def empty(_p: Any, s: Any) -> Any:
                if getattr(s, "is_array", False):
                    return torch.empty(tuple(s.shape), dtype=torch_dtype(s.dtype), device=device)
                return True  # load it (a Python value)
            like = W.map_tree(empty, spec)
            if system.endswith("-zc"):
                opts = jtree.DeviceOptions(zero_copy="on")
                return jtree.load(f, out=like, device_options=opts)
            if system.endswith("-out"):
                return jtree.load(f, out=like)
            return jtree.load(f, like)
    if system == "safetensors":
        from safetensors import safe_open
        from safetensors.torch import load_file
        with safe_open(path, "pt") as f:
            index = json.loads(f.metadata()["bench_index"])
        tensors = load_file(path, device=device)
        return P.join_tree(index, tensors.__getitem__)
    if system == "fastsafetensors":
        return load_fastsafetensors(path, device)
    import torch
    if system == "torch":
        return torch.load(path, map_location=device, weights_only=True)
    if system == "torch-mmap":
        t = torch.load(path, mmap=True, weights_only=True)
        return W.map_tree(lambda _p, v: v.to(device) if isinstance(v, torch.Tensor) else v, t)
    raise SystemExit(f"unknown system {system}")


def load_fastsafetensors(path: str, device: str) -> Any:
    """fastsafetensors' documented single-process use (nogds=True: this benchmark assumes no
    GPUDirect Storage; its bounce-buffer copier reads into pinned memory, then copies).
    No clone: since fastsafetensors 0.5.0 the tensors of copy_files_to_device take shared
    ownership of its device buffer and stay valid after FilesBufferOnDevice.close() (its
    docstring); the byte check of the first run of each cache state, made after close(), would
    catch a tensor whose memory was released."""
    from fastsafetensors import SafeTensorsFileLoader, SingleGroup
    from safetensors import safe_open
    with safe_open(path, "pt") as f:
        index = json.loads(f.metadata()["bench_index"])
    loader = SafeTensorsFileLoader(SingleGroup(), device, nogds=True)
    try:
        loader.add_filenames({0: [path]})
        buf = loader.copy_files_to_device()
        try:
            tensors = {k: buf.get_tensor(k) for k in loader.get_keys()}
        finally:
            buf.close()
    finally:
        loader.close()
    return P.join_tree(index, tensors.__getitem__)


def arrays_of(tree: Any) -> List[Tuple[Tuple[str, ...], Any]]:
    return [(p, v) for p, v in W.iter_leaves(tree)
            if hasattr(v, "shape") and not isinstance(v, (int, float, str, bool))]


def sync(tree: Any, device: str) -> None:
    """Waits until every array is in the device's memory. On the CPU (the test mode): reads one
    byte per page, so that a memory-mapped tensor counts as loaded only once it is resident."""
    torch = sys.modules.get("torch")
    for _p, v in arrays_of(tree):
        if hasattr(v, "block_until_ready"):
            v.block_until_ready()
        elif device == "cpu" and torch is not None and isinstance(v, torch.Tensor):
            P.touch(HostView().to_numpy(v))
    if torch is not None and device.startswith("cuda"):
        torch.cuda.synchronize(device)


def where_arrays_are(tree: Any, device: str) -> str:
    """"ok" when every array is on the device asked for, else the first that is not."""
    want = "cpu" if device == "cpu" else "gpu"
    torch = sys.modules.get("torch")
    for p, v in arrays_of(tree):
        if torch is not None and isinstance(v, torch.Tensor):
            got = v.device.type
            got = "gpu" if got == "cuda" else got
            if got != want or (want == "gpu" and v.device.index != (int(device.split(":")[1]) if ":" in device else 0)):
                return f"{'/'.join(p)} is on {v.device}, not {device}"
        elif hasattr(v, "devices"):
            plats = {d.platform for d in v.devices()}
            if plats != {want}:
                return f"{'/'.join(p)} is on {sorted(plats)}, not {device}"
        else:
            return f"{'/'.join(p)} is a {type(v).__name__}, not an array on {device}"
    return "ok"


def jtree_path(system: str, device: str) -> str:
    """"direct" when jtree loaded straight into device memory (jtree._device), else "host"."""
    from jtree import _placement
    if is_jax(system):
        why = _placement.why_not_jax_direct(jax_device(device), "float32")
        return "direct" if why is None else "host"
    import torch
    return "direct" if _placement.torch_direct(torch.device(device)) else "host"


def child_main(a: argparse.Namespace) -> None:
    import gc

    import child as C  # run.py's child: its peak-RSS probe, its /proc readers, its byte check

    system, device = a.child, a.device
    res: Dict[str, Any] = {}
    # ---- imports and the device's start-up, not timed ----
    if is_jax(system):
        import jax
        import jax.numpy as jnp
        import jtree  # noqa: F401
        dev = jax_device(device)
        jax.device_put(jnp.zeros(8), dev).block_until_ready()
    else:
        import torch
        if system.startswith("jtree"):
            import jtree  # noqa: F401
        if system == "safetensors":
            import safetensors.torch  # noqa: F401
        if system == "fastsafetensors":
            import fastsafetensors  # noqa: F401
        if device.startswith("cuda"):
            torch.cuda.init()
            torch.zeros(8, device=device)
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
            res["gpu_before"] = torch.cuda.memory_allocated(device)
    gc.collect()

    # ---- the load ----
    rss_before = C._status("VmRSS")
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    peak = C.PeakRss()
    peak.start()
    t0 = time.perf_counter()
    out = load(system, a.path, device)
    sync(out, device)
    t1 = time.perf_counter()
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    res.update(seconds=t1 - t0, rss_before=rss_before, rss_peak=peak.peak(),
               cpu_seconds=(ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime),
               minflt=ru1.ru_minflt - ru0.ru_minflt)
    if is_jax(system):
        try:
            stats = jax_device(device).memory_stats() or {}
        except Exception:  # noqa: BLE001  (a backend without allocator statistics)
            stats = {}
        res["gpu_peak"] = stats.get("peak_bytes_in_use")
        res["gpu_peak_source"] = "jax peak_bytes_in_use"
    elif device.startswith("cuda"):
        import torch
        res["gpu_peak"] = torch.cuda.max_memory_allocated(device)
        res["gpu_peak_source"] = "torch.cuda.max_memory_allocated"
    res["on_device"] = where_arrays_are(out, device)
    if system.startswith("jtree"):
        res["jtree_path"] = jtree_path(system, device)
    if a.check:
        res["check"] = C.check(HostView(), a.cache, out)
    del out
    print(json.dumps(res))


# ---- the bound: host-to-device copies in the same run (a child too) ------------------------------

def baseline_main(a: argparse.Namespace) -> None:
    """Times torch copies of --baseline bytes from a pinned and from a pageable host tensor into a
    preallocated device tensor (non_blocking=True, then synchronize): one warm-up, then the
    median of 5. Issue 22's bound is the pinned figure. On the CPU (the test mode) the same
    copies are host to host: a memcpy, not a GPU figure."""
    import statistics

    import torch
    n, device = a.baseline, a.device
    gpu = device.startswith("cuda")
    if gpu:
        torch.cuda.init()
    dst = torch.empty(n, dtype=torch.uint8, device=device)
    out: Dict[str, Any] = {"bytes": n, "device": device, "gpu": gpu, "repeats": 5}
    for kind in ("pinned", "pageable"):
        src = torch.empty(n, dtype=torch.uint8, pin_memory=(kind == "pinned" and gpu))
        src.fill_(7)  # the pages exist before the clock runs
        times = []
        for i in range(6):
            if gpu:
                torch.cuda.synchronize(device)
            t0 = time.perf_counter()
            dst.copy_(src, non_blocking=True)
            if gpu:
                torch.cuda.synchronize(device)
            if i:  # the first is the warm-up
                times.append(time.perf_counter() - t0)
        med = statistics.median(times)
        out[kind] = {"seconds": times, "median_s": med, "gb_per_s": n / med / 1e9}
        del src
    print(json.dumps(out))


# ---- the page cache: evicting a file for a cold run, reading it in for a warm one ---------------

def files_of(path: str) -> List[str]:
    if os.path.isdir(path):
        return sorted(os.path.join(dp, f) for dp, _dn, fn in os.walk(path) for f in fn)
    return [path]


def resident_fraction(path: str) -> Optional[float]:
    """The share of the file's pages in the page cache (mincore), None where it cannot be told."""
    import ctypes

    import numpy as np
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                              ctypes.c_int, ctypes.c_long]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        page = os.sysconf("SC_PAGE_SIZE")
        total = resident = 0
        for f in files_of(path):
            size = os.path.getsize(f)
            if not size:
                continue
            fd = os.open(f, os.O_RDONLY)
            try:
                addr = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
            finally:
                os.close(fd)
            if addr in (None, ctypes.c_void_p(-1).value):
                return None
            try:
                pages = (size + page - 1) // page
                vec = (ctypes.c_ubyte * pages)()
                if libc.mincore(addr, size, vec) != 0:
                    return None
                resident += int((np.frombuffer(vec, dtype=np.uint8) & 1).sum())
                total += pages
            finally:
                libc.munmap(addr, size)
        return resident / total if total else None
    except (OSError, AttributeError):
        return None


def evict(path: str, drop_caches: bool) -> Dict[str, Any]:
    """Takes the file out of the page cache: fsync (dirty pages cannot be dropped), then
    POSIX_FADV_DONTNEED on every file; as root, also sync + drop_caches (1: the page cache).
    Returns how, and the share of its pages still resident afterwards."""
    how = ["fadvise"]
    # (Not child.drop_from_page_cache: importing child.py sets JAX_PLATFORMS=cpu in this
    # process, which the children would inherit, and the JAX rows would leave the GPU.)
    for f in files_of(path):
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    if drop_caches and os.geteuid() == 0:
        try:
            os.sync()
            with open("/proc/sys/vm/drop_caches", "w") as fh:
                fh.write("1\n")
            how.append("drop_caches")
        except OSError as e:  # a container may refuse it: fadvise alone then
            how.append(f"drop_caches refused ({e.strerror})")
    return {"evicted_with": "+".join(how), "resident_before": resident_fraction(path)}


def read_in(path: str) -> Dict[str, Any]:
    """Reads the whole file once, so that a warm run finds it in the page cache even after a
    cold run (or an O_DIRECT load, which fills no page cache) of the same file."""
    buf = bytearray(8 << 20)
    for f in files_of(path):
        with open(f, "rb", buffering=0) as fh:
            while fh.readinto(buf):
                pass
    return {"resident_before": resident_fraction(path)}


# ---- writing the files (a child too: the parent never holds a workload) --------------------------

def write_main(a: argparse.Namespace) -> None:
    tree = W.load_tree(a.cache)
    out = {}
    for fmt in a.write.split(","):
        peer = P.PEERS[fmt]
        path = P.output_path(a.workdir, peer, a.workload)
        P.remove(path)
        t = time.perf_counter()
        peer.save(peer.prepare(tree), path)
        out[fmt] = {"path": path, "size": P.path_size(path), "save_seconds": time.perf_counter() - t}
    print(json.dumps(out))


# ---- the parent ---------------------------------------------------------------------------------

def sh(cmd: List[str], env: Optional[Dict[str, str]] = None, timeout: int = 120) -> Tuple[int, str, str]:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
        return p.returncode, p.stdout.strip(), p.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        return -1, "", str(e)


def child_env(device: str, system: str) -> Dict[str, str]:
    env = dict(os.environ, PYTHONHASHSEED="0", TF_CPP_MIN_LOG_LEVEL="3")
    # child.py sets JAX_PLATFORMS=cpu unless it is set: "" lets JAX pick its GPU backend.
    env["JAX_PLATFORMS"] = "cpu" if device == "cpu" else ""
    # The -host systems measure the fallback the direct device path replaces (jtree._device).
    if system.endswith("-host"):
        env["JTREE_DIRECT_DEVICE_LOAD"] = "0"
    else:
        env.pop("JTREE_DIRECT_DEVICE_LOAD", None)
    # -dev-reads: the reads start while the load plans (jtree._device.overlap).
    if system.endswith("-reads"):
        env["JTREE_DEVICE_OVERLAP"] = "reads"
    else:
        env.pop("JTREE_DEVICE_OVERLAP", None)
    return env


_PROBE = r"""
import importlib.util, json, os, subprocess, sys
out = {"missing": [m for m in ("jtree", "torch", "safetensors", "jax", "fastsafetensors")
                   if importlib.util.find_spec(m) is None]}
try:
    import importlib.metadata as md
    out["fastsafetensors_version"] = md.version("fastsafetensors")
except Exception:
    pass
dev = sys.argv[1]
if "torch" not in out["missing"]:
    import torch
    out["torch_cuda_build"] = torch.version.cuda
    out["cuda_available"] = torch.cuda.is_available()
    if dev != "cpu" and torch.cuda.is_available():
        i = int(dev.split(":")[1]) if ":" in dev else 0
        if i >= torch.cuda.device_count():
            out["bad_index"] = torch.cuda.device_count()
        else:
            p = torch.cuda.get_device_properties(i)
            out["gpu"] = {"name": torch.cuda.get_device_name(i), "memory": p.total_memory,
                          "capability": f"{p.major}.{p.minor}", "count": torch.cuda.device_count(),
                          "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version()}
            try:
                out["gpu"]["driver"] = subprocess.run(
                    ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader", "-i", str(i)],
                    capture_output=True, text=True, timeout=30).stdout.strip() or None
            except Exception:
                out["gpu"]["driver"] = None
            # fastsafetensors dlopens "libcudart.so" (no version), which a machine with only
            # torch's bundled CUDA runtime (libcudart.so.13 in site-packages) lacks: find torch's.
            torch.zeros(1, device=dev)
            import ctypes
            try:
                ctypes.CDLL("libcudart.so")
                out["libcudart_so"] = "found"
            except OSError:
                out["libcudart_so"] = None
                for line in open("/proc/self/maps"):
                    path = line.split()[-1]
                    if "/libcudart.so" in path and os.path.exists(path):
                        out["torch_libcudart"] = path
                        break
print(json.dumps(out))
"""

_JAX_PROBE = "import jax, json; print(json.dumps([d.platform for d in jax.devices()]))"


class Bench:
    def __init__(self, a: argparse.Namespace):
        self.a = a
        self.results: Dict[str, Any] = {"args": vars(a), "records": [], "workloads": {},
                                         "skipped": [], "gpu": None}
        self.systems: List[str] = []
        self.jax_gpu: Optional[bool] = None
        self.jax_why = ""
        self.t_start = time.monotonic()
        self.results["cut"] = []
        self.fst_env: Dict[str, str] = {}
        self.cold_dir = ""

    def save_json(self) -> None:
        tmp = self.a.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.results, f, indent=1)
        os.replace(tmp, self.a.out)

    def skip(self, what: str, why: str) -> None:
        warn(f"SKIPPED {what}: {why}")
        self.results["skipped"].append(f"{what}: {why}")

    def probe(self) -> None:
        """Which systems can run here; stops with a message when the device is not there."""
        a = self.a
        rc, out, err = sh([sys.executable, "-c", _PROBE, a.device], env=child_env("cpu", ""), timeout=300)
        if rc != 0:
            raise SystemExit(f"gpu_load.py: could not inspect this Python's packages: {err[-800:]}")
        info = json.loads(out.splitlines()[-1])
        missing = info["missing"]
        if "torch" in missing:
            raise SystemExit("gpu_load.py: torch is not installed in this Python "
                             "(./scripts/python_env.sh test bench installs it into .venv)")
        if "jtree" in missing:
            raise SystemExit("gpu_load.py: jtree is not installed in this Python")
        if a.device != "cpu":
            if not info.get("cuda_available"):
                build = info.get("torch_cuda_build")
                raise SystemExit(
                    f"gpu_load.py: --device {getattr(a, 'device_arg', a.device)}, but torch sees no CUDA GPU here "
                    + ("(this torch is a CPU-only build: torch.version.cuda is None; install a CUDA "
                       "build of torch)" if not build else f"(torch built for CUDA {build}; no device "
                       "visible: check nvidia-smi and CUDA_VISIBLE_DEVICES)")
                    + ". Nothing was measured. To test the script without a GPU, pass --device cpu "
                      "(its figures are not GPU measurements).")
            if "bad_index" in info:
                raise SystemExit(f"gpu_load.py: --device {a.device}: this machine has "
                                 f"{info['bad_index']} CUDA device(s)")
            self.results["gpu"] = info["gpu"]
        else:
            warn("!" * 78 + "\n!!! " + NOT_GPU + "\n" + "!" * 78)
        self.results["fastsafetensors_version"] = info.get("fastsafetensors_version")
        if a.device != "cpu" and "fastsafetensors" in a.systems and info.get("libcudart_so") is None:
            self.cudart_shim(info.get("torch_libcudart"))
        systems = []
        for s in a.systems:
            if s in ("safetensors", "fastsafetensors") and "safetensors" in missing:
                self.skip(s, "safetensors is not installed (./scripts/python_env.sh bench)")
                continue
            if s == "fastsafetensors" and "fastsafetensors" in missing:
                self.skip(s, "fastsafetensors is not installed in this Python (pip install "
                             "fastsafetensors; ./scripts/python_env.sh bench)")
                continue
            if s.endswith("-zc") and a.device == "cpu":
                self.skip(s, "zero copy copies to device memory: --device cpu has none")
                continue
            if is_jax(s):
                if "jax" in missing:
                    self.skip(s, "jax is not installed")
                    continue
                if a.device != "cpu":
                    if self.jax_gpu is None:
                        rc, out, err = sh([sys.executable, "-c", _JAX_PROBE], env=child_env(a.device, s),
                                          timeout=300)
                        plats = json.loads(out.splitlines()[-1]) if rc == 0 and out else []
                        self.jax_gpu = "gpu" in plats
                        self.jax_why = (f"JAX sees no GPU (its devices: {', '.join(sorted(set(plats))) or err[-300:]}); "
                                        "a CUDA build of jax (pip install 'jax[cuda12]') would")
                    if not self.jax_gpu:
                        self.skip(s, self.jax_why)
                        continue
            systems.append(s)
        self.systems = systems

    def workdir(self, raw: int) -> str:
        """Where the warm runs read: the tmpfs when the four files (about 4x the raw bytes, plus
        room) fit there (O_DIRECT reads of a disk file bypass the page cache: a warm jtree raw
        load from a disk would read the disk)."""
        a = self.a
        if a.workdir:
            return a.workdir
        need = 5 * raw + (256 << 20)
        if os.path.isdir("/dev/shm"):
            st = os.statvfs("/dev/shm")
            if st.f_bavail * st.f_frsize >= need:
                return "/dev/shm/jtree-gpu-bench"
        return "/var/tmp/jtree-gpu-bench"

    def cold_workdir(self) -> str:
        """Where the cold runs read: a disk file system (a tmpfs file cannot leave memory).
        --cold-workdir, else --workdir when it is on a disk, else /var/tmp/jtree-gpu-bench-cold.
        Stops with a message when the directory is in memory."""
        a = self.a
        d = a.cold_workdir
        if not d and a.workdir:
            os.makedirs(a.workdir, exist_ok=True)
            if fs_type(a.workdir) not in MEMORY_FS:
                d = a.workdir
        d = d or "/var/tmp/jtree-gpu-bench-cold"
        os.makedirs(d, exist_ok=True)
        fs = fs_type(d)
        if fs in MEMORY_FS:
            raise SystemExit(
                f"gpu_load.py: --cache-state cold needs its files on a disk file system, but {d} is "
                f"on {fs}, whose files never leave memory (no cold read is possible there). Pass "
                "--cold-workdir DIR on a disk (e.g. under /var/tmp), or --cache-state warm.")
        return d

    def cudart_shim(self, torch_cudart: Optional[str]) -> None:
        """A directory with libcudart.so -> torch's CUDA runtime, on LD_LIBRARY_PATH of the
        fastsafetensors children only (it dlopens the unversioned name)."""
        if not torch_cudart:
            warn("fastsafetensors: no libcudart.so on the library path and none found in torch's "
                 "process: its rows will likely fail")
            return
        d = os.path.join(os.path.dirname(self.a.out), "jtree-gpu-bench-cudart")
        os.makedirs(d, exist_ok=True)
        link = os.path.join(d, "libcudart.so")
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(torch_cudart, link)
        self.fst_env = {"LD_LIBRARY_PATH": d + (":" + os.environ["LD_LIBRARY_PATH"]
                                                if os.environ.get("LD_LIBRARY_PATH") else "")}
        self.results["fastsafetensors_cudart"] = f"{link} -> {torch_cudart} (on LD_LIBRARY_PATH)"
        log(f"  fastsafetensors: libcudart.so not on the library path; using {torch_cudart}")

    def elapsed(self) -> float:
        return time.monotonic() - self.t_start

    def over_budget(self, what: str) -> bool:
        """True (and records what is cut) once --time-budget seconds have passed."""
        b = self.a.time_budget
        if b and self.elapsed() > b:
            self.results["cut"].append(what)
            log(f"  time budget ({b:g} s) spent: not started: {what}")
            return True
        return False

    def child_timeout(self) -> float:
        b = self.a.time_budget
        if not b:
            return self.a.timeout
        return min(self.a.timeout, max(60.0, b - self.elapsed() + 120.0))

    def run_child(self, cache: str, system: str, path: str, check: bool) -> Dict[str, Any]:
        a = self.a
        cmd = [sys.executable, os.path.abspath(__file__), "--child", system, "--cache", cache,
               "--path", path, "--device", a.device]
        if check:
            cmd.append("--check")
        env = child_env(a.device, system)
        if system == "fastsafetensors":
            env.update(self.fst_env)
        return self.child_json(cmd, env)

    def child_json(self, cmd: List[str], env: Dict[str, str]) -> Dict[str, Any]:
        timeout = self.child_timeout()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout:.0f} s"}
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
        if p.returncode != 0 or not lines:
            tail = (p.stderr or p.stdout).strip().splitlines()[-6:]
            return {"error": f"exit {p.returncode}: " + " | ".join(tail)[-600:]}
        return json.loads(lines[-1])

    def save(self) -> None:
        """The JSON and the markdown as they stand: a run killed later still leaves them."""
        self.save_json()
        try:
            write_md(self.results, self.a.md)
        except Exception as e:  # noqa: BLE001  (the JSON is the record; --report redoes the table)
            warn(f"gpu_load.py: could not write {self.a.md} yet: {e!r}")

    def run(self) -> None:
        a = self.a
        os.makedirs(a.cache, exist_ok=True)
        self.probe()
        self.cold_dir = self.cold_workdir() if "cold" in a.cache_state else ""
        import run as R  # run.py's machine description (CPU, memory, OS, package versions, git)
        self.results["machine"] = R.machine(a.workdir or "/dev/shm", a.cache)
        self.results["machine"]["versions"]["fastsafetensors"] = self.results.get("fastsafetensors_version")
        if self.cold_dir:
            self.results["machine"].update(cold_workdir=self.cold_dir, cold_workdir_fs=fs_type(self.cold_dir),
                                           euid=os.geteuid())
        self.results["loadavg"] = []
        try:
            for wl in a.workloads:
                if self.over_budget(f"workload {wl}"):
                    continue
                self.workload(wl)
        finally:
            self.results["finished"] = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
            self.results["elapsed_s"] = self.elapsed()
            self.save()

    def workload(self, wl: str) -> None:
        a = self.a
        log(f"workload {wl} (scale {a.scale:g}): generating or finding it in {a.cache}")
        cache = W.ensure_in_child(a.cache, wl, a.scale, a.seed)
        raw = W.raw_bytes(cache)
        work = self.workdir(raw) if "warm" in a.cache_state else self.cold_dir
        os.makedirs(work, exist_ok=True)
        self.results["machine"].update(workdir=work, workdir_fs=fs_type(work))
        formats = [f for f in FORMATS if any(SYSTEMS[s][0] == f for s in self.systems)]
        log(f"  writing {', '.join(formats)} into {work}")
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--write", ",".join(formats),
                            "--workload", wl, "--cache", cache, "--workdir", work],
                           capture_output=True, text=True, env=child_env("cpu", ""))
        if p.returncode != 0:
            raise SystemExit(f"gpu_load.py: writing the {wl} files failed:\n{p.stderr[-2000:]}")
        files = json.loads(p.stdout.splitlines()[-1])
        # state -> format -> path: the cold runs read copies on the disk.
        paths = {st: {} for st in a.cache_state}
        for fmt, v in files.items():
            for st in a.cache_state:
                if st == "cold" and os.path.realpath(self.cold_dir) != os.path.realpath(work):
                    dst = os.path.join(self.cold_dir, os.path.basename(v["path"]))
                    P.remove(dst)
                    (shutil.copytree if os.path.isdir(v["path"]) else shutil.copyfile)(v["path"], dst)
                    paths[st][fmt] = dst
                else:
                    paths[st][fmt] = v["path"]
        self.results["workloads"][wl] = {"raw_bytes": raw, "arrays": len(W.array_specs(cache)),
                                         "files": {k: v["size"] for k, v in files.items()},
                                         "workdir": work, "paths": paths}
        self.save()
        try:
            self.baseline(wl, raw)
            self.save()
            for s in self.systems:
                for st in a.cache_state:
                    self.results["loadavg"].append([wl, s, os.getloadavg()[0]])
                    self.measure(wl, cache, s, st, paths[st][SYSTEMS[s][0]])
                    self.save()
        finally:
            for st in paths.values():
                for path in st.values():
                    P.remove(path)

    def baseline(self, wl: str, raw: int) -> None:
        """Issue 22's bound in this run: pinned (and pageable) host-to-device copies of the
        workload's size, capped at 1 GiB."""
        if self.over_budget(f"{wl} host-to-device baseline"):
            return
        n = max(1 << 20, min(raw, 1 << 30))
        cmd = [sys.executable, os.path.abspath(__file__), "--baseline", str(n), "--device", self.a.device]
        r = self.child_json(cmd, child_env(self.a.device, ""))
        self.results.setdefault("baseline", {})[wl] = r
        if "error" in r:
            log(f"  host-to-device baseline: ERROR {r['error']}")
        else:
            log(f"  host-to-device baseline ({n / 2**20:.0f} MiB): pinned {r['pinned']['gb_per_s']:.2f} GB/s, "
                f"pageable {r['pageable']['gb_per_s']:.2f} GB/s" + ("" if r["gpu"] else " (host to host: not a GPU figure)"))

    def measure(self, wl: str, cache: str, system: str, state: str, path: str) -> None:
        a = self.a
        for i in range(a.runs):
            if self.over_budget(f"{wl} {system} {state}: runs {i + 1}-{a.runs}"):
                return
            prep = evict(path, a.drop_caches != "never") if state == "cold" else read_in(path)
            r = self.run_child(cache, system, path, check=(i == 0 and not a.no_check))
            r.update(prep)
            r.update(workload=wl, system=system, run=i, cache=state)
            self.results["records"].append(r)
            if "error" in r:
                log(f"  {system} ({state}): ERROR {r['error']}")
                return
            for k in ("check", "on_device"):
                if r.get(k, "ok") != "ok":
                    log(f"  {system} ({state}): {k.upper()} FAILED: {r[k]}")
        secs = sorted(x["seconds"] for x in self.results["records"]
                      if x["workload"] == wl and x["system"] == system and x.get("cache", "warm") == state
                      and "error" not in x)
        if secs:
            log(f"  {system:20s} {state}: median {secs[len(secs) // 2]:.4f} s ({len(secs)} runs)")


def fs_type(path: str) -> str:
    rc, out, _ = sh(["stat", "-f", "-c", "%T", path])
    return out if rc == 0 else "?"


# ---- the markdown -------------------------------------------------------------------------------

def command_line(args: Dict[str, Any]) -> str:
    cmd = [".venv/bin/python bench/python/gpu_load.py", f"--scale {args['scale']:g}",
           f"--runs {args['runs']}", f"--device {args.get('device_arg') or args['device']}"]
    if args.get("seed"):
        cmd.append(f"--seed {args['seed']}")
    if list(args["workloads"]) != list(W.WORKLOADS):
        cmd.append("--workloads " + ",".join(args["workloads"]))
    if list(args["systems"]) != list(SYSTEMS):
        cmd.append("--systems " + ",".join(args["systems"]))
    if args.get("workdir"):
        cmd.append("--workdir " + shlex.quote(args["workdir"]))
    if args.get("cache_state", ["warm"]) != ["warm"]:
        cmd.append("--cache-state " + ",".join(args["cache_state"]))
    if args.get("cold_workdir"):
        cmd.append("--cold-workdir " + shlex.quote(args["cold_workdir"]))
    if args.get("drop_caches", "root") != "root":
        cmd.append("--drop-caches " + args["drop_caches"])
    if args.get("time_budget"):
        cmd.append(f"--time-budget {args['time_budget']:g}")
    if args.get("no_check"):
        cmd.append("--no-check")
    cmd += ["--out " + shlex.quote(args["out"]), "--md " + shlex.quote(args["md"])]
    return " ".join(cmd)


def markdown(res: Dict[str, Any]) -> str:
    import report as RP  # run.py's report: number formats, median/min/max

    args, m, gpu = res["args"], res.get("machine", {}), res.get("gpu")
    v = m.get("versions", {})
    cpu_mode = args["device"] == "cpu"
    out = ["# Loading into GPU memory: jtree against safetensors and torch", ""]
    if cpu_mode:
        out += [f"> **{NOT_GPU}** (`--device cpu`)", ""]
    out += ["Generated by `bench/python/gpu_load.py`. Every figure is the median of the runs with "
            "[min, max]; \"vs best\" is the ratio to the fastest system of the same run (1.00 = the "
            "best, in **bold**). The clock covers the call until the whole tree is in "
            f"{'CPU' if cpu_mode else 'GPU'} memory, synchronized (torch.cuda.synchronize, "
            "block_until_ready); imports and the device's start-up are not in it. Each run is a "
            "fresh process. Warm: the file was read into the page cache just before the run; cold: "
            "it was evicted from the page cache just before (a disk file system).", ""]
    out += ["## Machine and run", ""]
    if gpu:
        out.append(f"- GPU: {gpu['name']} ({RP.fmt_bytes(gpu['memory'])}, compute capability "
                   f"{gpu['capability']}; {gpu['count']} on the machine), driver {gpu.get('driver') or '?'}, "
                   f"CUDA {gpu.get('cuda')} (torch's build), cuDNN {gpu.get('cudnn')}")
    else:
        out.append("- GPU: **none; device cpu** (not a GPU measurement)")
    mem = m.get("mem_bytes")
    out.append(f"- Host: {m.get('cpus', '?')} CPUs ({m.get('host_cpu', '?')}), "
               f"{RP.fmt_bytes(mem) if mem else '?'} RAM, {m.get('os', '?')}, Linux {m.get('kernel', '?')}, "
               f"Python {m.get('python', '?')}")
    out.append(f"- Date: {m.get('date', '?')} to {res.get('finished', '?')}; jtree commit {m.get('git', '?')}"
               + (" (with uncommitted changes in lib/, bindings/ or python/)" if m.get("git_dirty") else ""))
    out.append("- Versions: " + ", ".join(f"{k} {v[k]}" for k in
                                         ("jtree", "torch", "safetensors", "jax", "jaxlib", "numpy", "ml_dtypes")
                                         if v.get(k)))
    out.append(f"- Files in `{m.get('workdir', '?')}` ({m.get('workdir_fs', '?')})")
    if m.get("cold_workdir"):
        out.append(f"- Cold runs' copies in `{m['cold_workdir']}` ({m.get('cold_workdir_fs', '?')}); "
                   f"running as {'root' if m.get('euid') == 0 else 'uid ' + str(m.get('euid'))}")
    loads = [x[2] for x in res.get("loadavg", [])]
    if loads:
        out.append(f"- 1-minute load average while it ran: {min(loads):.2f} to {max(loads):.2f}")
    out.append(f"- Runs: {args['runs']} per system and workload, the first checked byte for byte against "
               "the source (copied back to the host)" + (" (checks off)" if args.get("no_check") else ""))
    out += ["", "Command (from the repository root, after `./scripts/python_env.sh bench`):", "",
            "```sh", command_line(args), "```", ""]
    if res.get("skipped"):
        out += ["Skipped: " + "; ".join(res["skipped"]), ""]
    if res.get("cut"):
        out += [f"**Cut by --time-budget {args.get('time_budget', 0):g} s** (not measured): "
                + "; ".join(res["cut"]), ""]
    if res.get("fastsafetensors_cudart"):
        out += [f"fastsafetensors: libcudart.so for its dlopen: {res['fastsafetensors_cudart']}", ""]
    out += ["Systems:", ""]
    for s in args["systems"]:
        fmt, lab, how = SYSTEMS[s]
        out.append(f"- `{s}` ({lab}): {how}")
    out.append("")

    recs = [r for r in res["records"] if "error" not in r]
    errors = [r for r in res["records"] if "error" in r]
    states = args.get("cache_state") or ["warm"]
    for wl, info in res.get("workloads", {}).items():
        out += [f"## Workload `{wl}`", ""]
        files = ", ".join(f"{k} {RP.fmt_bytes(n)}" for k, n in info["files"].items())
        out += [f"{RP.fmt_bytes(info['raw_bytes'])} of array data in {info['arrays']:,} arrays. "
                f"Files: {files}.", ""]
        bl = res.get("baseline", {}).get(wl)
        pinned = None
        if bl and "error" not in bl:
            pinned = bl["pinned"]["gb_per_s"] * 1e9
            where = ("host to device" if bl["gpu"] else
                     "**host to host (a memcpy), not a GPU figure**")
            out += [f"Copy bound measured in this run ({where}, {RP.fmt_bytes(bl['bytes'])}, median of "
                    f"{bl['repeats']} after a warm-up, `tensor.copy_(non_blocking=True)` + synchronize): "
                    f"pinned **{bl['pinned']['gb_per_s']:.2f} GB/s**, pageable "
                    f"{bl['pageable']['gb_per_s']:.2f} GB/s. \"% of pinned\" below is the row's "
                    "throughput (array bytes / median time) over the pinned figure; issue 22's target "
                    "is ≥ 80% for a raw jtree file from the page cache.", ""]
        elif bl:
            out += [f"Copy bound: **failed**: {bl['error']}", ""]
        else:
            out += ["Copy bound: not measured (cut by the time budget)", ""]
        for state in states:
            out += [f"### {state.capitalize()} page cache", ""]
            rows = []
            for s in args["systems"]:
                rs = [r for r in recs if r["workload"] == wl and r["system"] == s
                      and r.get("cache", "warm") == state]
                if rs:
                    rows.append((RP.Stat([r["seconds"] for r in rs]), s, rs))
            if not rows:
                out += ["(no measurement)", ""]
                continue
            if state == "cold":
                hows = sorted({r.get("evicted_with", "?") for _st, _s, rs in rows for r in rs})
                out += [f"Before each run the file was evicted ({', '.join(hows)}; fadvise = fsync + "
                        f"POSIX_FADV_DONTNEED), in `{m.get('cold_workdir', '?')}` "
                        f"on {m.get('cold_workdir_fs', '?')}.", ""]
            else:
                out += ["Before each run the whole file was read once (into the page cache).", ""]
            best = min(st.med for st, _s, _r in rows)
            out += ["| system | time | vs best | throughput | % of pinned | device peak | host RSS peak "
                    "| host RSS added | cached before | jtree path | check |",
                    "|---|---|---|---|---|---|---|---|---|---|---|"]
            for st, s, rs in sorted(rows, key=lambda x: x[0].med):
                gp = [r["gpu_peak"] for r in rs if r.get("gpu_peak") is not None]
                gpu_cell = RP.fmt_bytes(RP.median(gp)) + (" (jax)" if is_jax(s) else "") if gp else "–"
                rss = RP.median([r["rss_peak"] for r in rs])
                added = RP.median([r["rss_peak"] - r["rss_before"] for r in rs])
                checks = [r["check"] for r in rs if "check" in r]
                placed = [r["on_device"] for r in rs if r.get("on_device", "ok") != "ok"]
                check = ("ok" if checks and all(c == "ok" for c in checks) else
                         "not checked" if not checks else "**FAILED**: " + next(c for c in checks if c != "ok"))
                if placed:
                    check += "; **wrong device**: " + placed[0]
                jpath = "/".join(sorted({r["jtree_path"] for r in rs if "jtree_path" in r})) or "–"
                pct = f"{100 * info['raw_bytes'] / st.med / pinned:.0f}%" if pinned else "–"
                res_before = [r["resident_before"] for r in rs if r.get("resident_before") is not None]
                cached = f"{100 * RP.median(res_before):.0f}%" if res_before else "?"
                out.append(f"| {SYSTEMS[s][1]} (`{s}`) | {RP.fmt_span(st.med, st.lo, st.hi)} | "
                           f"{RP._bold(RP.fmt_ratio(st.med / best), st.med == best)} | "
                           f"{RP.fmt_rate(info['raw_bytes'], st.med)} | {pct} | {gpu_cell} | {RP.fmt_bytes(rss)} | "
                           f"{RP.fmt_bytes(added)} | {cached} | {jpath} | {check} |")
            jt = [(st.med, s) for st, s, _r in rows if s.startswith("jtree")]
            peers = [(st.med, s) for st, s, _r in rows if not s.startswith("jtree")]
            if jt and peers:
                (tj, sj), (tp, sp) = min(jt), min(peers)
                out += ["", f"Fastest jtree row `{sj}` against the fastest peer `{sp}`: "
                        f"{tp / tj:.2f}x ({'ahead' if tj < tp else '**behind**'})."]
            out.append("")
    if errors:
        out += ["## Failures", ""]
        out += [f"- {r['workload']} {r['system']} {r.get('cache', 'warm')} (run {r['run']}): {r['error']}" for r in errors]
        out.append("")
    out += ["Device peak: torch.cuda.max_memory_allocated during the load (reset after CUDA's start-up), "
            "or, for JAX, its allocator's peak_bytes_in_use. Host RSS peak: the process's high-water "
            "mark during the load (imports included); added: over the RSS just before it. jtree path: "
            "direct (straight into device memory through pinned staging buffers) or host (a host "
            "load, then a copy to the device). Cached before: the share of the file's pages in the "
            "page cache just before the run (mincore), median over the runs.", ""]
    return "\n".join(out)


def write_md(res: Dict[str, Any], path: str) -> None:
    with open(path, "w") as f:
        f.write(markdown(res))


# ---- main ---------------------------------------------------------------------------------------

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=0.05,
                    help="workload size factor: 1 = the sizes of issue 6 (1 GiB, 10,000 leaves, 2 GiB)")
    ap.add_argument("--runs", type=int, default=5, help="runs per system and workload (median, min, max)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workloads", default=",".join(W.WORKLOADS))
    ap.add_argument("--systems", default=",".join(SYSTEMS), help="some of: " + ", ".join(SYSTEMS))
    ap.add_argument("--device", default="cuda", help="cuda, cuda:N, or cpu (a test of the script, not a GPU measurement)")
    ap.add_argument("--workdir", default="", help="where the files go (default: /dev/shm when it has room)")
    ap.add_argument("--cache-state", default="warm",
                    help="warm, cold or warm,cold: the file in the page cache (read in before each "
                         "run), or evicted before each run (fsync + POSIX_FADV_DONTNEED, and as root "
                         "drop_caches); cold needs a disk file system")
    ap.add_argument("--cold-workdir", default="",
                    help="where the cold runs' copies go: a disk file system (default: --workdir when "
                         "on a disk, else /var/tmp/jtree-gpu-bench-cold)")
    ap.add_argument("--drop-caches", choices=("root", "never"), default="root",
                    help="cold runs: also sync + echo 1 > /proc/sys/vm/drop_caches when root (default)")
    ap.add_argument("--time-budget", type=float, default=0,
                    help="seconds: start no new child after this (what was measured is still written, "
                         "and what was cut is listed); 0 = no limit")
    ap.add_argument("--cache", default="/var/tmp/jtree-bench-cache", help="generated workloads (shared with run.py)")
    ap.add_argument("--out", default="/tmp/jtree-gpu-load.json", help="the results (JSON)")
    ap.add_argument("--md", default="", help="the markdown table (default: --out with .md)")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per child process")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--report", default="", help="only rewrite --md from this earlier JSON")
    # Internal: one load (--child SYSTEM) or the writing of the files (--write FORMATS).
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    ap.add_argument("--write", default="", help=argparse.SUPPRESS)
    ap.add_argument("--baseline", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--workload", default="", help=argparse.SUPPRESS)
    ap.add_argument("--path", default="", help=argparse.SUPPRESS)
    ap.add_argument("--check", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.child:
        return child_main(a)
    if a.write:
        return write_main(a)
    if a.baseline:
        return baseline_main(a)
    if a.report:
        with open(a.report) as f:
            res = json.load(f)
        md = a.md or os.path.splitext(a.report)[0] + ".md"
        write_md(res, md)
        print(f"wrote {md}")
        return

    a.device_arg = dev = a.device
    if dev == "cuda":
        dev = "cuda:0"
    if not (dev == "cpu" or (dev.startswith("cuda:") and dev[5:].isdigit())):
        raise SystemExit(f"gpu_load.py: --device must be cuda, cuda:N or cpu, not {a.device!r}")
    a.device = dev
    a.workloads = [w for w in a.workloads.split(",") if w]
    a.systems = [s for s in a.systems.split(",") if s]
    a.cache_state = [c for c in a.cache_state.split(",") if c]
    for c in a.cache_state:
        if c not in CACHE_STATES:
            raise SystemExit(f"gpu_load.py: --cache-state takes warm, cold or both, not {c!r}")
    if not a.cache_state:
        raise SystemExit("gpu_load.py: --cache-state is empty")
    for w in a.workloads:
        if w not in W.WORKLOADS:
            raise SystemExit(f"gpu_load.py: unknown workload {w}; known: {', '.join(W.WORKLOADS)}")
    for s in a.systems:
        if s not in SYSTEMS:
            raise SystemExit(f"gpu_load.py: unknown system {s}; known: {', '.join(SYSTEMS)}")
    a.out = os.path.abspath(a.out)
    a.md = os.path.abspath(a.md or os.path.splitext(a.out)[0] + ".md")
    a.cache = os.path.abspath(a.cache)
    if a.workdir:
        a.workdir = os.path.abspath(a.workdir)
    if a.cold_workdir:
        a.cold_workdir = os.path.abspath(a.cold_workdir)
    # A kill at a timeout (SIGTERM) still writes what was measured and removes the files.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("gpu_load.py: terminated (SIGTERM)"))
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    os.makedirs(os.path.dirname(a.md), exist_ok=True)
    b = Bench(a)
    try:
        b.run()
    finally:
        if b.results.get("machine"):
            write_md(b.results, a.md)
    if a.device == "cpu":
        warn("!!! " + NOT_GPU)
    log(f"results in {a.out} and {a.md}")


if __name__ == "__main__":
    main()
