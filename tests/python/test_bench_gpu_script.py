"""bench/python/gpu_load.py, the benchmark of loads into GPU memory (issues 6 and 22), runs end
to end.

The benchmark itself needs a GPU; these tests run its very code with --device cpu at a tiny
scale (every system writes a table row whose byte check passed, warm and cold; the copy bound
and the "% of pinned" column; --time-budget cutting the run short), check that --device cuda
without a GPU stops with a message rather than a traceback, that a cold run refuses a tmpfs,
and run it on the GPU where torch sees one (skipped loudly elsewhere). They test the script,
not speed.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from conftest import require

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "python", "gpu_load.py")


# Every system of gpu_load.py (its SYSTEMS), in its order.
SYSTEMS = ["jtree-torch", "jtree-torch-out", "jtree-torch-dev", "jtree-jax", "jtree-raw-torch",
           "jtree-raw-torch-out", "jtree-raw-torch-dev", "jtree-raw-torch-dev-reads",
           "jtree-raw-jax", "jtree-raw-torch-out-zc", "jtree-torch-host", "jtree-raw-torch-host",
           "safetensors", "fastsafetensors", "torch", "torch-mmap"]
# What only a device has: skipped, with the reason, by --device cpu.
DEVICE_ONLY = ["jtree-raw-torch-out-zc"]


def _run(tmp_path, device, workloads, systems=None, timeout=600, extra=(), workdir=None):
    out, md = tmp_path / "gpu.json", tmp_path / "gpu.md"
    cmd = [sys.executable, SCRIPT, "--device", device, "--scale", "0.002", "--runs", "1",
           "--workloads", workloads, "--cache", str(tmp_path / "cache"),
           "--workdir", str(workdir or tmp_path / "work"), "--out", str(out), "--md", str(md), *extra]
    if systems:
        cmd += ["--systems", ",".join(systems)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    return p, out, md


def _section(lines, wl, state):
    """The table lines of one workload's warm or cold table."""
    start = lines.index(f"## Workload `{wl}`")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    sub = lines.index(f"### {state.capitalize()} page cache", start, end)
    stop = next((i for i in range(sub + 1, end) if lines[i].startswith("### ")), end)
    return [ln for ln in lines[sub:stop] if ln.startswith("| ")]


def _rows_ok(res, md_text, systems, workloads, states=("warm",)):
    """Every (workload, system, cache state): a JSON record with a passed byte check, on the
    device, and a markdown row saying ok, with a "% of pinned" figure."""
    lines = md_text.splitlines()
    for wl in workloads:
        for state in states:
            for s in systems:
                recs = [r for r in res["records"]
                        if r["workload"] == wl and r["system"] == s and r["cache"] == state]
                assert recs, f"{wl}/{s}/{state}: no record"
                assert all("error" not in r for r in recs), f"{wl}/{s}/{state}: {recs}"
                assert recs[0].get("check") == "ok", f"{wl}/{s}/{state}: byte check {recs[0].get('check')!r}"
                assert all(r["on_device"] == "ok" for r in recs), f"{wl}/{s}/{state}: {recs}"
                if s.startswith("jtree"):
                    assert all(r["jtree_path"] in ("direct", "host") for r in recs), recs
            rows = _section(lines, wl, state)
            header = rows[0].split(" | ")
            pct = header.index("% of pinned")
            for s in systems:
                mine = [ln for ln in rows if ln.split(" | ")[0].endswith(f"(`{s}`)")]
                assert len(mine) == 1, f"{wl}/{s}/{state}: {len(mine)} rows"
                assert mine[0].endswith("| ok |"), mine[0]
                assert mine[0].split(" | ")[pct].rstrip("%").isdigit(), mine[0]


def test_cpu_mode_writes_a_checked_row_for_every_system(tmp_path):
    for m in ("torch", "safetensors", "jax", "ml_dtypes"):
        require(m)
    # small: fp32, bf16 and int32 arrays, Python ints, floats and a str (llm adds only a bool;
    # one workload keeps the test near 30 s on two cores).
    workloads = ["small"]
    p, out, md = _run(tmp_path, "cpu", ",".join(workloads))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    assert "NOT A GPU MEASUREMENT" in p.stderr
    res = json.loads(out.read_text())
    text = md.read_text()
    assert "NOT A GPU MEASUREMENT" in text.split("## Machine")[0]  # in the header
    assert res["skipped"] == ["jtree-raw-torch-out-zc: zero copy copies to device memory: "
                              "--device cpu has none"], res["skipped"]
    assert "Skipped: jtree-raw-torch-out-zc: zero copy" in text
    _rows_ok(res, text, [s for s in SYSTEMS if s not in DEVICE_ONLY], workloads)
    assert "--device cpu" in text  # the exact command
    assert not os.listdir(tmp_path / "work")  # the files are removed after each workload
    # The copy bound of the same run: host to host here, and said so.
    bl = res["baseline"]["small"]
    assert bl["gpu"] is False and bl["pinned"]["gb_per_s"] > 0 and bl["pageable"]["gb_per_s"] > 0
    assert "not a GPU figure" in text
    # Warm: every run found its whole file in the page cache (read in just before).
    assert all(r["resident_before"] == 1.0 for r in res["records"]), res["records"]


@pytest.fixture
def disk_dir():
    """A directory on a disk file system (/var/tmp): a cold run cannot use a tmpfs."""
    d = tempfile.mkdtemp(prefix="jtree-gpu-cold-test-", dir="/var/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_cpu_mode_cold_and_warm_fastsafetensors(tmp_path, disk_dir):
    for m in ("torch", "safetensors", "fastsafetensors", "ml_dtypes"):
        require(m)
    fs = subprocess.run(["stat", "-f", "-c", "%T", disk_dir], capture_output=True, text=True).stdout.strip()
    if fs in ("tmpfs", "ramfs"):
        pytest.fail(f"/var/tmp is on {fs} here: no disk directory for the cold test")
    systems = ["jtree-raw-torch-out", "safetensors", "fastsafetensors"]
    p, out, md = _run(tmp_path, "cpu", "llm", systems, workdir=disk_dir,
                      extra=["--cache-state", "warm,cold"])
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    res = json.loads(out.read_text())
    text = md.read_text()
    assert not res["skipped"], res["skipped"]
    _rows_ok(res, text, systems, ["llm"], states=("warm", "cold"))
    for r in res["records"]:
        if r["cache"] == "cold":
            # Evicted: fsync + fadvise (and drop_caches as root); mincore then finds no page of it.
            assert r["evicted_with"].startswith("fadvise"), r
            assert r["resident_before"] is not None and r["resident_before"] < 0.05, r
        else:
            assert r["resident_before"] == 1.0, r
    assert "--cache-state warm,cold" in text
    assert not os.listdir(disk_dir)  # the files are removed after the workload


def test_cold_refuses_a_tmpfs(tmp_path):
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm here")
    fs = subprocess.run(["stat", "-f", "-c", "%T", "/dev/shm"], capture_output=True, text=True).stdout.strip()
    if fs != "tmpfs":
        pytest.skip(f"/dev/shm is on {fs}, not a tmpfs")
    shm = tempfile.mkdtemp(prefix="jtree-gpu-cold-test-", dir="/dev/shm")
    try:
        p, out, _md = _run(tmp_path, "cpu", "small", ["safetensors"], timeout=300,
                           extra=["--cache-state", "cold", "--cold-workdir", shm])
    finally:
        shutil.rmtree(shm, ignore_errors=True)
    assert p.returncode != 0
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    assert "cold needs its files on a disk file system" in p.stderr and "tmpfs" in p.stderr, p.stderr


def test_time_budget_cuts_and_still_writes(tmp_path):
    for m in ("torch", "safetensors"):
        require(m)
    # A budget of 0.001 s is spent before the first child: the workload is cut, and the JSON and
    # the markdown still say so.
    p, out, md = _run(tmp_path, "cpu", "small,llm", ["safetensors"], timeout=300,
                      extra=["--time-budget", "0.001"])
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    res = json.loads(out.read_text())
    assert res["cut"] == ["workload small", "workload llm"], res["cut"]
    assert not res["records"]
    text = md.read_text()
    assert "Cut by --time-budget" in text and "workload llm" in text


def test_cuda_without_a_gpu_stops_with_a_message(tmp_path):
    torch = require("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU: the no-GPU message cannot be shown here")
    p, out, _md = _run(tmp_path, "cuda", "llm", timeout=300)
    assert p.returncode != 0
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    assert "torch sees no CUDA GPU" in p.stderr and "--device cpu" in p.stderr, p.stderr
    assert not out.exists()


def test_on_the_gpu(tmp_path):
    torch = require("torch")
    if not torch.cuda.is_available():
        msg = "!!! SKIPPED: no CUDA GPU on this machine: the GPU load benchmark was not exercised"
        print(msg)
        pytest.skip(msg)
    require("safetensors")
    p, out, md = _run(tmp_path, "cuda", "llm")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    res = json.loads(out.read_text())
    text = md.read_text()
    assert "NOT A GPU MEASUREMENT" not in text
    assert torch.cuda.get_device_name(0) in text
    # JAX may see no GPU (a CPU build of jaxlib): then its rows are skipped with the reason.
    jax_skipped = [s for s in SYSTEMS if s.endswith("-jax")
                   and any(x.startswith(s + ":") for x in res["skipped"])]
    systems = [s for s in SYSTEMS if s not in jax_skipped]
    _rows_ok(res, text, systems, ["llm"])
    for r in res["records"]:
        if r["system"] in systems and not r["system"].endswith("-jax"):
            assert r["gpu_peak"] and r["gpu_peak"] > 0, r


def test_breakdown_script_runs_every_mode_on_the_cpu(tmp_path):
    """bench/python/gpu_breakdown.py (where the time of a load to the GPU goes): every mode
    runs in its fresh processes and lands in the JSON, here with --device cpu at a tiny scale
    (no figure is a GPU measurement)."""
    require("torch")
    require("safetensors")
    require("fastsafetensors")
    script = os.path.join(ROOT, "bench", "python", "gpu_breakdown.py")
    out = tmp_path / "breakdown.json"
    p = subprocess.run([sys.executable, script, "--device", "cpu", "--scale", "0.002",
                        "--runs", "1", "--cache", str(tmp_path / "cache"),
                        "--workdir", str(tmp_path / "work"), "--out", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "failed" not in p.stdout, p.stdout
    got = json.loads(out.read_text())
    modes = ["alloc-each", "alloc-one", "dev", "dev-planner", "dev-serial", "dev-reads",
             "dev-reads-unpinned", "dev-reserve", "dev-reads-reserve", "dev-expandable",
             "dev-small-pages", "dev-pin-early", "dev-reserve-pin", "dev-per-tensor",
             "out-each", "out-one", "out-reserved", "dev-again", "dev-profile",
             "fastsafetensors"]
    assert list(got["results"]) == modes
    for mode, runs in got["results"].items():
        assert len(runs) == 1 and all(v > 0 for k, v in runs[0].items() if k.endswith("_s")), mode
    assert "function calls" in got["results"]["dev-profile"][0]["profile"]  # (cProfile's)
    for mode in ("dev", "dev-pin-early", "dev-reserve-pin"):  # (the CPU: no allocation timed)
        assert got["results"][mode][0]["alloc_spread"] == {"pin_ahead_at_ms": None}, mode
    assert got["arrays"] > 0
