"""Multi-process JAX saves: two processes of one JAX job (4 CPU devices each, coordinated by
jax.distributed on localhost) save jax.Arrays spread over both; each writes the replica-0
shards it holds, process 0 assembles the one file; loads read each process's slices only."""
import os
import socket
import sys

import numpy as np

import jtree
from conftest import require, run_local_job


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
    cmds = [[sys.executable, worker, str(i), port, path] for i in range(2)]
    codes, outs, report = run_local_job(cmds, env, tmp_path.parent, tmp_path.name, timeout=180)
    for i, (c, out) in enumerate(zip(codes, outs)):
        assert c == 0 and f"process {i}: ok" in out, report
    # And this (single) process reads the file the job wrote.
    out = jtree.load(path)
    a = np.random.default_rng(0).standard_normal((64, 48)).astype(np.float32)
    np.testing.assert_array_equal(out["a"], a)
    assert out["step"] == 8 and jtree.open(path).verify()["ok"]
    assert sorted(os.listdir(tmp_path)) == ["mp.jtree"]  # no segment left behind
