"""bench/gpu_checks.sh runs on a GPU machine lent for minutes: a misspelt system or mode there
would stop its benchmark stage and cost a run. Every --systems and --modes name it passes must
be one that gpu_load.py and gpu_breakdown.py know (they refuse unknown names at start)."""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "python"))

import gpu_breakdown  # noqa: E402
import gpu_load  # noqa: E402


def _names(option):
    with open(os.path.join(ROOT, "bench", "gpu_checks.sh")) as f:
        text = f.read()
    lists = re.findall(rf"{option} ([\w,-]+)", text)
    assert lists, f"gpu_checks.sh passes no {option}"
    return [n for lst in lists for n in lst.split(",")]


def test_systems_are_gpu_load_systems():
    names = _names("--systems")
    assert "jtree-raw-torch-dev-reads" in names and "fastsafetensors" in names
    unknown = [n for n in names if n not in gpu_load.SYSTEMS]
    assert not unknown, unknown


def test_modes_are_gpu_breakdown_modes():
    names = _names("--modes")
    assert "dev" in names
    unknown = [n for n in names if n not in gpu_breakdown.MODES]
    assert not unknown, unknown
