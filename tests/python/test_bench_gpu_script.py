"""bench/python/gpu_load.py, the benchmark of loads into GPU memory (issue 6), runs end to end.

The benchmark itself needs a GPU; these tests run its very code with --device cpu at a tiny
scale (every system writes a table row whose byte check passed), check that --device cuda
without a GPU stops with a message rather than a traceback, and run it on the GPU where torch
sees one (skipped loudly elsewhere). They test the script, not speed.
"""
import json
import os
import subprocess
import sys

import pytest

from conftest import require

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "python", "gpu_load.py")


# Every system of gpu_load.py (its SYSTEMS), in its order.
SYSTEMS = ["jtree-torch", "jtree-torch-out", "jtree-jax", "jtree-raw-torch", "jtree-raw-torch-out",
           "jtree-raw-jax", "jtree-torch-host", "jtree-raw-torch-host", "safetensors", "torch",
           "torch-mmap"]


def _run(tmp_path, device, workloads, systems=None, timeout=600):
    out, md = tmp_path / "gpu.json", tmp_path / "gpu.md"
    cmd = [sys.executable, SCRIPT, "--device", device, "--scale", "0.002", "--runs", "1",
           "--workloads", workloads, "--cache", str(tmp_path / "cache"),
           "--workdir", str(tmp_path / "work"), "--out", str(out), "--md", str(md)]
    if systems:
        cmd += ["--systems", ",".join(systems)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    return p, out, md


def _rows_ok(res, md_text, systems, workloads):
    """Every (workload, system): a JSON record with a passed byte check, on the device, and a
    markdown row saying ok."""
    lines = md_text.splitlines()
    for wl in workloads:
        for s in systems:
            recs = [r for r in res["records"] if r["workload"] == wl and r["system"] == s]
            assert recs, f"{wl}/{s}: no record"
            assert all("error" not in r for r in recs), f"{wl}/{s}: {recs}"
            assert recs[0].get("check") == "ok", f"{wl}/{s}: byte check {recs[0].get('check')!r}"
            assert all(r["on_device"] == "ok" for r in recs), f"{wl}/{s}: {recs}"
        section = lines.index(f"## Workload `{wl}`")
        end = next((i for i in range(section + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        rows = [ln for ln in lines[section:end] if ln.startswith("| ")]
        for s in systems:
            mine = [ln for ln in rows if ln.split(" | ")[0].endswith(f"(`{s}`)")]
            assert len(mine) == 1, f"{wl}/{s}: {len(mine)} rows"
            assert mine[0].endswith("| ok |"), mine[0]


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
    assert not res["skipped"], res["skipped"]
    _rows_ok(res, text, SYSTEMS, workloads)
    assert "--device cpu" in text  # the exact command
    assert not os.listdir(tmp_path / "work")  # the files are removed after each workload


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
