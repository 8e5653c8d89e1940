"""bench/gpu_checks.sh runs on a GPU machine lent for minutes: a misspelt system or mode there
would stop its benchmark stage and cost a run. Every --systems and --modes name it passes must
be one that gpu_load.py, shard_load.py and gpu_breakdown.py know (they refuse unknown names at
start)."""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "python"))

import gpu_breakdown  # noqa: E402
import gpu_load  # noqa: E402
import shard_load  # noqa: E402


def _commands(script):
    """The commands of gpu_checks.sh that run `script`, continuation lines joined."""
    with open(os.path.join(ROOT, "bench", "gpu_checks.sh")) as f:
        text = f.read().replace("\\\n", " ")
    return [line for line in text.splitlines()
            if script in line and not line.lstrip().startswith("#")]


def _comma_names(option, script):
    """The names `script`'s commands pass to `option` as comma-separated lists."""
    lists = [lst for cmd in _commands(script) for lst in re.findall(rf"{option} ([\w,-]+)", cmd)]
    assert lists, f"gpu_checks.sh passes {script} no {option}"
    return [n for lst in lists for n in lst.split(",")]


def _word_names(option, script):
    """The names `script`'s commands pass to `option` as words (argparse's nargs="+")."""
    lists = [m.group(1).split() for cmd in _commands(script)
             for m in [re.search(rf"{option}((?: [\w-]+)+)", cmd)] if m]
    assert lists, f"gpu_checks.sh passes {script} no {option}"
    return [n for lst in lists for n in lst]


def test_systems_are_gpu_load_systems():
    names = _comma_names("--systems", "gpu_load.py")
    assert "jtree-raw-torch-dev-reads" in names and "fastsafetensors" in names
    unknown = [n for n in names if n not in gpu_load.SYSTEMS]
    assert not unknown, unknown


def test_systems_are_shard_load_systems():
    names = _word_names("--systems", "shard_load.py")
    assert "jtree-zstd" in names
    unknown = [n for n in names if n not in shard_load.SYSTEMS]
    assert not unknown, unknown


def test_modes_are_gpu_breakdown_modes():
    names = _comma_names("--modes", "gpu_breakdown.py")
    assert "dev" in names
    unknown = [n for n in names if n not in gpu_breakdown.MODES]
    assert not unknown, unknown
