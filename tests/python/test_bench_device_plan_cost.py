"""bench/python/device_plan_cost.py (the Python side of loads into device memory: torch with
and without the template fast path, device= with and without the native pass, JAX with and
without its fast path) runs end to end at a tiny size, and checks itself that each fast path took its general path never and the
general path every time. It tests the script, not speed."""
import os
import re
import subprocess
import sys

from conftest import require

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "python", "device_plan_cost.py")


def test_the_script_compares_both_paths():
    require("torch")
    p = subprocess.run([sys.executable, SCRIPT, "--layers", "2", "--runs", "2"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "63 arrays, 2 loads each" in p.stdout, p.stdout  # (2 layers: 3 x (2 x 9 + 3))
    require("jax")  # (its rows too, where it is installed)
    for call in ("out=", "like=", "device=", "shardings=", "shardings= pass"):
        assert re.search(rf"{re.escape(call)} fast / general: \d+\.\d\dx", p.stdout), p.stdout


def test_the_script_in_fresh_processes_checks_both_ways():
    """--fresh: each load a child process, the first of each way checked against a host load,
    and each child checks that it took (or not) the native pass."""
    require("torch")
    p = subprocess.run([sys.executable, SCRIPT, "--fresh", "--layers", "1", "--runs", "1"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "1 fresh processes each, alternated" in p.stdout, p.stdout
    assert re.search(r"device= native / planner: \d+\.\d\dx", p.stdout), p.stdout
