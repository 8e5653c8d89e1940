"""The benchmark driver: every (workload, system, operation) N times, each in a fresh process.

    .venv/bin/python bench/python/run.py --scale 1 --runs 5 --out bench/results/results.json

For each workload: generate it (or find it in the cache), measure what the data allows
(analyze.py), then for each system: save it N times (output deleted before each save), load it
back in every way the system offers (N times each; the first load of each kind is checked byte
for byte against the source), for jtree also over HTTP from nginx on loopback, then delete the
output. Results go to a JSON file, rewritten after every system, which report.py turns into
bench/RESULTS.md and the plots.

Page cache: files are read back right after they were written (warm). On tmpfs (/dev/shm, the
default work directory when it has room) there is no disk at all: every number is a memory
and CPU number, which is what the comparison is about.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import nginx  # noqa: E402
import peers as P  # noqa: E402
import workloads as W  # noqa: E402

LOAD_OPS = ("load", "load_cold", "load_mmap", "leaf", "struct", "slice")
HTTP_OPS = ("http_struct", "http_leaf", "http_slice", "http_load")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def sh(cmd: str) -> str:
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception:  # noqa: BLE001
        return ""


def loadavg() -> List[float]:
    return [float(x) for x in open("/proc/loadavg").read().split()[:3]]


def machine(workdir: str, cache: str) -> Dict[str, Any]:
    versions = subprocess.run(
        [sys.executable, "-c",
         "import importlib.metadata as m, json\n"
         "out = {}\n"
         "for p in ['jtree','numpy','ml_dtypes','jax','jaxlib','orbax-checkpoint','flax','tensorstore',"
         "'torch','safetensors','h5py','zarr','zstandard','psutil']:\n"
         "    try: out[p] = m.version(p)\n"
         "    except Exception: out[p] = None\n"
         "print(json.dumps(out))"], capture_output=True, text=True).stdout
    mem = sh("free -b | awk '/Mem:/{print $2}'")
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host_cpu": sh("lscpu | sed -n 's/^Model name: *//p'"),
        "cpus": os.cpu_count(),
        "mem_bytes": int(mem) if mem.isdigit() else None,
        "kernel": platform.release(),
        "os": sh(". /etc/os-release && echo $PRETTY_NAME"),
        "python": platform.python_version(),
        "hdf5": sh(f"{sys.executable} -c 'import h5py; print(h5py.version.hdf5_version)'"),
        "nginx": sh("nginx -v 2>&1 | sed 's/.*nginx\\///'"),
        "versions": json.loads(versions or "{}"),
        "workdir": workdir, "workdir_fs": sh(f"stat -f -c %T {workdir}"),
        "cache": cache, "git": sh("git -C " + HERE + " rev-parse --short HEAD"),
        "git_dirty": bool(sh("git -C " + HERE + " status --porcelain -- :/lib :/bindings :/python")),
        "jtree_build": installed_jtree(),
    }


def installed_jtree() -> Dict[str, Any]:
    """Which jtree the children import, and whether its native module is older than the last
    commit to the library or bindings (a stale install measures old code)."""
    out = subprocess.run(
        [sys.executable, "-c", "import jtree, jtree._jtree as n, os, json\n"
         "print(json.dumps({'module': n.__file__, 'mtime': os.path.getmtime(n.__file__)}))"],
        capture_output=True, text=True).stdout
    info = json.loads(out or "{}")
    last = sh("git -C " + HERE + " log -1 --format=%ct -- :/lib :/bindings :/python")
    if info and last.isdigit():
        info["older_than_last_commit"] = info["mtime"] < int(last)
        if info["older_than_last_commit"]:
            print(f"WARNING: {info['module']} was built before the last commit to lib/, "
                  "bindings/ or python/: reinstall (pip install .) to measure this code",
                  file=sys.stderr)
    return info


class Driver:
    def __init__(self, a: argparse.Namespace):
        self.a = a
        self.results: Dict[str, Any] = {"args": vars(a), "records": [], "analysis": {},
                                         "skipped": [], "loadavg": []}
        self.nginx: Optional[nginx.Nginx] = None

    def save_json(self) -> None:
        tmp = self.a.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.results, f, indent=1)
        os.replace(tmp, self.a.out)

    def child(self, cache: str, peer: P.Peer, op: str, path: str = "", url: str = "",
              check: bool = False) -> Dict[str, Any]:
        cmd = [sys.executable, os.path.join(HERE, "child.py"), "--cache", cache, "--peer", peer.name,
               "--op", op]
        if path:
            cmd += ["--path", path]
        if url:
            cmd += ["--url", url]
        if check:
            cmd.append("--check")
        env = dict(os.environ, PYTHONHASHSEED="0", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=self.a.timeout, env=env)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {self.a.timeout} s"}
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
        if p.returncode != 0 or not lines:
            tail = (p.stderr or p.stdout).strip().splitlines()[-6:]
            return {"error": f"exit {p.returncode}: " + " | ".join(tail)[-600:]}
        return json.loads(lines[-1])

    def measure(self, wl: str, cache: str, peer: P.Peer, op: str, path: str = "",
                url: str = "") -> None:
        runs = self.a.runs
        i = 0
        while i < runs:
            if op in ("save", "nbsave"):
                P.remove(path)
            if op.startswith("http_"):
                self.nginx.mark()
            r = self.child(cache, peer, op, path, url, check=(i == 0 and not self.a.no_check))
            if op.startswith("http_") and "error" not in r:
                r["server"] = self.nginx.since_mark()
            r.update(workload=wl, peer=peer.name, op=op, run=i)
            self.results["records"].append(r)
            if "error" in r:
                log(f"  {peer.name} {op}: ERROR {r['error']}")
                return
            if r.get("check", "ok") != "ok":
                log(f"  {peer.name} {op}: CHECK FAILED {r['check']}")
            if i == 0 and r["seconds"] > self.a.slow and runs > 3:
                runs = 3  # a slow operation: three runs are enough for a median and a spread
            i += 1
        secs = sorted(x["seconds"] for x in self.results["records"]
                      if x["workload"] == wl and x["peer"] == peer.name and x["op"] == op and "error" not in x)
        log(f"  {peer.name:12s} {op:12s} median {secs[len(secs) // 2]:.4f} s ({len(secs)} runs)")

    def run(self) -> None:
        a = self.a
        os.makedirs(a.workdir, exist_ok=True)
        os.makedirs(a.cache, exist_ok=True)
        self.results["machine"] = machine(a.workdir, a.cache)
        if "load_cold" in a.ops and self.results["machine"]["workdir_fs"] == "tmpfs":
            log("WARNING: load_cold on tmpfs measures a warm load (tmpfs files are memory): "
                "give --workdir a directory on a disk")
        if not a.no_http and shutil.which("nginx"):
            self.nginx = nginx.Nginx(a.workdir)
            self.nginx.start()
        elif not a.no_http:
            self.results["skipped"].append("http: nginx is not installed")
        try:
            for wl in a.workloads:
                self.workload(wl)
        finally:
            if self.nginx:
                self.nginx.stop()
            self.results["finished"] = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
            self.save_json()

    def workload(self, wl: str) -> None:
        a = self.a
        log(f"workload {wl} (scale {a.scale:g}): generating or finding it in {a.cache}")
        cache = W.ensure_in_child(a.cache, wl, a.scale, a.seed)
        raw = W.raw_bytes(cache)
        specs = W.array_specs(cache)
        targets = W.partial_targets(wl, a.scale)
        leaf_spec = next(s for s in specs if s[0] == tuple(targets["leaf"]))
        import math
        itemsize = W.DTYPES[leaf_spec[2]].itemsize
        info = {"raw_bytes": raw, "arrays": len(specs),
                "values": sum(1 for _p, v in W.iter_leaves(W.manifest(cache)["tree"])
                              if not (isinstance(v, dict) and "__array__" in v)),
                "leaf": "/".join(targets["leaf"]),
                "leaf_bytes": math.prod(leaf_spec[3]) * itemsize,
                "leaf_shape": leaf_spec[3], "leaf_dtype": leaf_spec[2]}
        if "slice" in targets:
            r0, r1 = targets["slice"]
            info["slice"] = [r0, r1]
            info["slice_bytes"] = (r1 - r0) * math.prod(leaf_spec[3][1:]) * itemsize
        if not a.no_analysis:
            log("  analysis: entropy bound and zstd-1 variants on the same bytes")
            out = subprocess.run([sys.executable, os.path.join(HERE, "analyze.py"), cache],
                                 capture_output=True, text=True, check=True).stdout
            info.update(json.loads(out))
        self.results["analysis"][wl] = info
        self.save_json()

        for name in a.peers:
            peer = P.PEERS[name]
            self.results["loadavg"].append([wl, name, loadavg()])
            if peer.kind == "reference":
                for op in peer.ops:
                    self.measure(wl, cache, peer, op)
                continue
            path = P.output_path(a.workdir, peer, wl)
            ops = [op for op in peer.ops if op in a.ops]
            if wl == "emb":
                ops = [op for op in ops if op not in ("leaf", "http_leaf")]  # the leaf is the table
            else:
                ops = [op for op in ops if op not in ("slice", "http_slice")]
            if peer.kind == "anchor":
                for op in ops:
                    self.measure(wl, cache, peer, op)
                continue
            # nbsave first, so that the file left for the loads comes from a plain save.
            for op in [o for o in ("nbsave", "save") if o in ops]:
                self.measure(wl, cache, peer, op, path)
            if not os.path.exists(path):
                log(f"  {peer.name}: no output, loads skipped")
                continue
            for op in [o for o in LOAD_OPS if o in ops]:
                self.measure(wl, cache, peer, op, path)
            http_ops = [o for o in HTTP_OPS if o in ops]
            if http_ops and self.nginx:
                url = self.nginx.publish(path)
                for op in http_ops:
                    self.measure(wl, cache, peer, op, url=url)
            P.remove(path)
            self.save_json()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=0.05,
                    help="workload size factor: 1 = the sizes of issue 6 (1 GiB, 10,000 leaves, 2 GiB)")
    ap.add_argument("--runs", type=int, default=5, help="runs per measurement (median, min, max)")
    ap.add_argument("--slow", type=float, default=60.0,
                    help="an operation whose first run takes longer gets 3 runs instead of --runs")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workloads", default=",".join(W.WORKLOADS))
    ap.add_argument("--peers", default=",".join(P.PEERS))
    ap.add_argument("--ops", default="save,nbsave,load,load_mmap,leaf,struct,slice,"
                                     "http_struct,http_leaf,http_slice,http_load,memcpy,memcpy_warm,read")
    default_work = "/dev/shm/jtree-bench" if os.path.isdir("/dev/shm") else "/tmp/jtree-bench"
    ap.add_argument("--workdir", default=default_work, help="where outputs are written (tmpfs by default)")
    ap.add_argument("--cache", default="/var/tmp/jtree-bench-cache", help="generated workloads")
    ap.add_argument("--out", default=os.path.join(HERE, "..", "results", "results.json"))
    ap.add_argument("--timeout", type=int, default=3600, help="seconds per child process")
    ap.add_argument("--no-http", action="store_true")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--no-analysis", action="store_true")
    a = ap.parse_args()
    a.workloads = [w for w in a.workloads.split(",") if w]
    a.peers = [p for p in a.peers.split(",") if p]
    a.ops = [o for o in a.ops.split(",") if o]
    for p in a.peers:
        if p not in P.PEERS:
            raise SystemExit(f"unknown peer {p}; known: {', '.join(P.PEERS)}")
    a.out = os.path.abspath(a.out)
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    Driver(a).run()
    log(f"results in {a.out}")


if __name__ == "__main__":
    main()
