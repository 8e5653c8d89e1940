"""bench/python/jax_cpu_cost.py (JAX loads on a CPU: the fast paths against the general
planning with jax.device_put) runs end to end at a tiny size, every load checked against the
saved arrays and its DLPack imports counted. It tests the script, not speed."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "python", "jax_cpu_cost.py")


def test_the_script_compares_the_fast_paths_and_the_general_planning(jax):
    p = subprocess.run([sys.executable, SCRIPT, "--groups", "6", "--leaves", "5", "--runs", "2"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "30 arrays (6 groups of 5), 2 loads each, JAX on one CPU device" in p.stdout, p.stdout
    assert len(re.findall(r"fast / before: \d+\.\d\dx", p.stdout)) == 4, p.stdout
    assert len(re.findall(r" before: +\d+\.\d\d ms", p.stdout)) == 4, p.stdout


def test_the_sharded_script_compares_imports_on_every_cpu_device_with_the_first_only(jax):
    """bench/python/jax_sharded_cpu_cost.py, tiny: every load checked (shardings and values)."""
    script = os.path.join(ROOT, "bench", "python", "jax_sharded_cpu_cost.py")
    p = subprocess.run([sys.executable, script, "--groups", "2", "--leaves", "3", "--runs", "1"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "6 arrays of 64x16 float32 over 8 CPU devices" in p.stdout, p.stdout
    assert len(re.findall(r"fast / before: \d+\.\d\dx", p.stdout)) == 2, p.stdout


def test_the_sharded_script_in_fresh_processes_checks_and_times_each_way(jax):
    """--fresh: each load a child process of its own (open and structure on the clock)."""
    script = os.path.join(ROOT, "bench", "python", "jax_sharded_cpu_cost.py")
    p = subprocess.run([sys.executable, script, "--groups", "2", "--leaves", "2", "--runs", "1",
                        "--fresh"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "4 arrays of 64x16 float32 over 8 CPU devices; 1 runs each, alternated; each load " \
        "a fresh process" in p.stdout, p.stdout
    assert len(re.findall(r"fast / before: \d+\.\d\dx", p.stdout)) == 2, p.stdout
