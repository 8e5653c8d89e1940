"""Many processes, one file, with torch.distributed: 4 real processes joined by a gloo process
group save torch tensors as GlobalArray blocks (the coordinator detected from
torch.distributed) and read back their blocks of another split (torch_worker.py)."""
import os
import socket
import sys

import numpy as np

import jtree
from conftest import run_local_job

HERE = os.path.dirname(os.path.abspath(__file__))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_torch_distributed_save_and_load(tmp_path):
    path = str(tmp_path / "ckpt.jtree")
    port = str(_free_port())
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmds = [[sys.executable, os.path.join(HERE, "torch_worker.py"), str(i), "4", port, path]
            for i in range(4)]
    codes, outs, report = run_local_job(cmds, env, tmp_path.parent, tmp_path.name)
    for i, (c, o) in enumerate(zip(codes, outs)):
        assert c == 0 and f"rank {i}: ok" in o, report
    # This process (no torch.distributed) reads the whole file as NumPy.
    out = jtree.load(path)
    full = np.random.default_rng(3).standard_normal((1000, 96)).astype(np.float32)
    np.testing.assert_array_equal(out["w"], full)
    assert out["emb"].dtype.name == "bfloat16" and out["emb"].shape == (1000, 96)
    np.testing.assert_array_equal(out["bias"], np.arange(8.0, dtype=np.float32))
    assert out["step"] == 42 and jtree.open(path).verify()["ok"]
