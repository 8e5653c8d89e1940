"""One measurement in a fresh process: one (system, operation) on one workload.

    python child.py --cache DIR --workload llm --scale 1 --peer jtree --op save --path OUT

Prints one JSON object on its last stdout line:
    seconds          wall time of the operation alone (imports and input preparation excluded)
    seconds_return   (nbsave) time until the non-blocking call returned
    rss_before       RSS (bytes) just before the operation (the input tree, imported modules)
    rss_peak         peak RSS during the operation (VmHWM after resetting it through
                     /proc/self/clear_refs; psutil sampling every 2 ms where that is refused)
    cpu_seconds      user + system CPU time of the process during the operation (all threads)
    rchar            bytes the process read through read/pread syscalls during it (/proc/self/io;
                     memory-mapped reads do not count: see minflt)
    minflt, majflt   page faults during it
    size             (save) bytes of the output file or directory
    io               (http_*) jtree's own counters: read_requests, bytes_read
    check            (with --check) "ok" or what differs from the source data
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import sys
import threading
import time
from typing import Any, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

import peers as P  # noqa: E402
import workloads as W  # noqa: E402


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _io() -> Dict[str, int]:
    out = {}
    try:
        with open("/proc/self/io") as f:
            for line in f:
                k, v = line.split(":")
                out[k] = int(v)
    except OSError:
        pass
    return out


class PeakRss:
    """Peak RSS over a region: the kernel's high-water mark, reset at the start."""

    def __init__(self):
        self.sampler = None
        self.samples: List[int] = []

    def start(self) -> None:
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            self.kernel = True
        except OSError:
            self.kernel = False
            import psutil
            proc = psutil.Process()
            self.stop_flag = False

            def run():
                while not self.stop_flag:
                    self.samples.append(proc.memory_info().rss)
                    time.sleep(0.002)
            self.sampler = threading.Thread(target=run, daemon=True)
            self.sampler.start()

    def peak(self) -> int:
        if self.kernel:
            return _status("VmHWM")
        self.stop_flag = True
        self.sampler.join()
        return max(self.samples + [_status("VmRSS")])


def drop_from_page_cache(path: str) -> bool:
    """Asks the kernel to drop the cached pages of a file (or of every file under a
    directory): fsync, then POSIX_FADV_DONTNEED. True when the storage is not tmpfs (where
    nothing can be dropped: the file is memory)."""
    files = [path] if os.path.isfile(path) else [
        os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs]
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    real, fs, best = os.path.realpath(path), "", ""
    with open("/proc/mounts") as m:
        for line in m:
            mnt, kind = line.split()[1], line.split()[2]
            if (real == mnt or real.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                best, fs = mnt, kind
    return fs != "tmpfs"


def check(peer: P.Peer, cache: str, got: Any, key=None, rows=None) -> str:
    """Compares what was loaded with the source data, leaf by leaf, byte for byte."""
    src = W.load_tree(cache)
    if key is not None:
        src = W.get(src, key)
        if rows is not None:
            src = src[rows[0]:rows[1]]
        want = [((), src)]
        have = [((), peer.to_numpy(got))]
    else:
        want = list(W.iter_leaves(src))
        have_d = dict(P.native_leaves(peer, got))
        have = [(p, have_d.get(p, "<missing>")) for p, _ in want]
    for (p, w), (_, h) in zip(want, have):
        name = "/".join(p)
        if isinstance(w, np.ndarray):
            h = np.asarray(h) if not isinstance(h, np.ndarray) else h
            if h.dtype == np.uint16 and w.dtype == W.BF16:
                h = h.view(W.BF16)
            if h.shape != w.shape or h.dtype != w.dtype:
                return f"{name}: {h.dtype}{list(h.shape)} != {w.dtype}{list(w.shape)}"
            if not np.array_equal(h.view(np.uint8), w.view(np.uint8)):
                return f"{name}: bytes differ"
        else:
            if isinstance(h, np.ndarray) or hasattr(h, "shape"):
                h = np.asarray(h)
                if isinstance(w, str) and h.dtype == np.uint8:
                    h = h.tobytes().decode()
                else:
                    h = h.item()
            if isinstance(w, float) and isinstance(h, float):
                if abs(h - w) > 1e-6 * max(1.0, abs(w)):
                    return f"{name}: {h!r} != {w!r}"
            elif h != w:
                return f"{name}: {h!r} != {w!r}"
    return "ok"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", required=True, help="the workload's cache directory")
    ap.add_argument("--peer", required=True)
    ap.add_argument("--op", required=True)
    ap.add_argument("--path", default="", help="the file (or directory) saved or read")
    ap.add_argument("--url", default="", help="http_* ops: the file's URL")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()

    peer = P.PEERS[a.peer]
    m = W.manifest(a.cache)
    targets = W.partial_targets(m["workload"], m["scale"])
    key = tuple(targets["leaf"])
    rows = targets.get("slice")
    res: Dict[str, Any] = {}

    # ---- imports and input, not timed ----
    peer.setup()
    tree = None
    if a.op in ("save", "nbsave", "memcpy", "memcpy_warm") or (peer.name == "zstd"):
        tree = peer.prepare(W.load_tree(a.cache))
    frames = None
    if peer.name == "zstd" and a.op == "load":
        frames = peer.save(tree, None)
        tree = None
    dst = None
    if a.op == "memcpy_warm":
        dst = [np.ones_like(v) for _p, v in W.iter_leaves(tree) if isinstance(v, np.ndarray)]
    if a.op == "read":
        arrays = W.array_specs(a.cache)
        data = os.path.join(a.cache, "data.bin")
        with open(data, "rb", buffering=0) as f:  # warm-up: the file is in the page cache
            while f.read(64 << 20):
                pass
    if a.op == "load_cold":
        # A cold cache: the output's pages dropped from the page cache (on a disk; tmpfs files
        # are memory and stay), so that the load reads the storage.
        res["evicted"] = drop_from_page_cache(a.path)
    if a.op == "leaf" and isinstance(peer, P.Orbax):
        spec = W.get(m["tree"], key)["__array__"]
        extra = {"shape": tuple(spec[2]), "dtype": W.DTYPES[spec[1]]}
    else:
        extra = {}
    gc.collect()

    # ---- the operation ----
    rss_before = _status("VmRSS")
    io0, ru0 = _io(), resource.getrusage(resource.RUSAGE_SELF)
    peak = PeakRss()
    peak.start()
    t0 = time.perf_counter()
    out: Any = None
    if a.op == "save":
        out = peer.save(tree, a.path)
    elif a.op == "nbsave":
        wait = peer.nbsave(tree, a.path)
        res["seconds_return"] = time.perf_counter() - t0
        wait()
    elif a.op == "load":
        out = peer.load(frames if frames is not None else a.path)
    elif a.op == "load_cold":
        out = peer.load(a.path)
    elif a.op == "load_mmap":
        out = peer.load_mmap(a.path)
    elif a.op == "leaf":
        out = peer.leaf(a.path, key, **extra)
    elif a.op == "struct":
        out = peer.struct(a.path)
    elif a.op == "slice":
        out = peer.slice(a.path, key, rows)
    elif a.op.startswith("http_"):
        out, res["io"] = peer.http(a.op, a.url, key, rows)
    elif a.op in ("memcpy", "memcpy_warm"):
        srcs = [v for _p, v in W.iter_leaves(tree) if isinstance(v, np.ndarray)]
        if dst is None:
            out = [np.empty_like(v) for v in srcs]
        else:
            out = dst
        for s, d in zip(srcs, out):
            np.copyto(d, s)
    elif a.op == "read":
        out = []
        with open(data, "rb", buffering=0) as f:
            for _p, off, dt, shape in arrays:
                x = np.empty(shape, W.DTYPES[dt])
                buf = x.reshape(-1).view(np.uint8)
                pos = 0
                while pos < buf.size:
                    n = os.preadv(f.fileno(), [buf[pos:pos + (1 << 30)]], off + pos)
                    if n <= 0:
                        raise EOFError(data)
                    pos += n
                out.append(x)
    else:
        raise SystemExit(f"unknown op {a.op}")
    if a.op in ("load", "load_cold", "load_mmap", "leaf", "slice", "http_load", "http_leaf",
                "http_slice") \
            and peer.kind != "anchor":
        peer.materialize(out)
    t1 = time.perf_counter()
    ru1, io1 = resource.getrusage(resource.RUSAGE_SELF), _io()
    res.update(seconds=t1 - t0, rss_before=rss_before, rss_peak=peak.peak(),
               cpu_seconds=(ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime),
               rchar=io1.get("rchar", 0) - io0.get("rchar", 0),
               minflt=ru1.ru_minflt - ru0.ru_minflt, majflt=ru1.ru_majflt - ru0.ru_majflt)
    if a.op in ("save", "nbsave"):
        if peer.name == "zstd":
            res["size"] = sum(len(f) for f in out)
        else:
            res["size"] = P.path_size(a.path)
    if a.check and peer.kind != "anchor":
        if a.op in ("load", "load_cold", "load_mmap", "http_load"):
            res["check"] = check(peer, a.cache, out)
        elif a.op in ("leaf", "http_leaf"):
            got = out if a.op == "leaf" else W.get(out, key)
            res["check"] = check(peer, a.cache, got, key)
        elif a.op in ("slice", "http_slice"):
            res["check"] = check(peer, a.cache, out, key, rows)
    del out
    print(json.dumps(res))


if __name__ == "__main__":
    main()
