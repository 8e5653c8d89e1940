"""Multi-process JAX saves: two processes of one JAX job (4 CPU devices each, coordinated by
jax.distributed on localhost) save jax.Arrays spread over both; each writes the replica-0
shards it holds, process 0 assembles the one file; loads read each process's slices only."""
import os
import socket
import subprocess
import sys
import time

import numpy as np

import jtree
from conftest import require


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def test_two_process_save_and_sharded_load(tmp_path):
    require("jax")
    path = str(tmp_path / "mp.jtree")
    worker = os.path.join(os.path.dirname(__file__), "multiprocess_worker.py")
    port = str(_free_port())
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    logs = [open(tmp_path.parent / f"{tmp_path.name}-process{i}.log", "w+") for i in range(2)]
    procs = [subprocess.Popen([sys.executable, worker, str(i), port, path], env=env,
                              stdout=logs[i], stderr=subprocess.STDOUT, text=True)
             for i in range(2)]
    # A process that fails leaves the other waiting at a barrier: stop it at once.
    deadline = time.monotonic() + 180
    try:
        while any(p.poll() is None for p in procs):
            if any(p.poll() not in (None, 0) for p in procs) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    outs = []
    for log in logs:
        log.seek(0)
        outs.append(log.read())
        log.close()
    report = "\n".join(f"--- process {i} (exit {p.returncode}):\n{out[-3000:]}"
                       for i, (p, out) in enumerate(zip(procs, outs)))
    for i, (p, out) in enumerate(zip(procs, outs)):
        assert p.returncode == 0 and f"process {i}: ok" in out, report
    # And this (single) process reads the file the job wrote.
    out = jtree.load(path)
    a = np.random.default_rng(0).standard_normal((64, 48)).astype(np.float32)
    np.testing.assert_array_equal(out["a"], a)
    assert out["step"] == 8 and jtree.open(path).verify()["ok"]
    assert sorted(os.listdir(tmp_path)) == ["mp.jtree"]  # no segment left behind
