"""bench/python/selection_cost.py (what a keys= selection costs: the native pass, the Python
walk, the walk that looks at every leaf) runs end to end at a tiny size, each load checking the
selected leaf's value. It tests the script, not speed."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "python", "selection_cost.py")


def test_the_script_compares_the_native_pass_and_the_walks():
    p = subprocess.run([sys.executable, SCRIPT, "--groups", "6", "--leaves", "5", "--runs", "2"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "30 leaves (6 groups of 5), 2 loads each, each the first" in p.stdout, p.stdout
    assert len(re.findall(r"native / walk-all: \d+\.\d\dx", p.stdout)) == 6, p.stdout
    assert len(re.findall(r" walk-all : +\d+\.\d\d ms", p.stdout)) == 6, p.stdout
