"""Many processes, one file, with torch.distributed: 4 real processes joined by a gloo process
group save torch tensors as GlobalArray blocks (the coordinator detected from
torch.distributed) and read back their blocks of another split (torch_worker.py)."""
import os
import socket
import subprocess
import sys
import time

import numpy as np

import jtree

HERE = os.path.dirname(os.path.abspath(__file__))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_torch_distributed_save_and_load(tmp_path):
    path = str(tmp_path / "ckpt.jtree")
    port = str(_free_port())
    logs = [open(tmp_path.parent / f"{tmp_path.name}-rank{i}.log", "w+") for i in range(4)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, os.path.join(HERE, "torch_worker.py"), str(i),
                               "4", port, path], env=env, stdout=logs[i],
                              stderr=subprocess.STDOUT, text=True) for i in range(4)]
    # One failed process leaves the others waiting in a collective: stop them all.
    deadline = time.monotonic() + 300
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
    report = "\n".join(f"--- rank {i} (exit {p.returncode}):\n{o[-3000:]}"
                       for i, (p, o) in enumerate(zip(procs, outs)))
    for i, (p, o) in enumerate(zip(procs, outs)):
        assert p.returncode == 0 and f"rank {i}: ok" in o, report
    # This process (no torch.distributed) reads the whole file as NumPy.
    out = jtree.load(path)
    full = np.random.default_rng(3).standard_normal((1000, 96)).astype(np.float32)
    np.testing.assert_array_equal(out["w"], full)
    assert out["emb"].dtype.name == "bfloat16" and out["emb"].shape == (1000, 96)
    np.testing.assert_array_equal(out["bias"], np.arange(8.0, dtype=np.float32))
    assert out["step"] == 42 and jtree.open(path).verify()["ok"]
