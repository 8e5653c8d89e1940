"""The atheris corpus of the Python load path and every input it ever found, replayed through
fuzz/python/fuzz_load.py's own driver (no atheris needed): hostile files give jtree.Error and
nothing else, on every test run (fuzz/README.md)."""
import importlib.util
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HARNESS = os.path.join(ROOT, "fuzz", "python", "fuzz_load.py")


def _harness():
    # As `fuzz_load.py --replay`: imported without atheris.
    argv = sys.argv
    sys.argv = [HARNESS, "--replay"]
    try:
        spec = importlib.util.spec_from_file_location("jtree_fuzz_load", HARNESS)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.argv = argv
    return mod


def _inputs():
    out = []
    for d in ("corpus", "crashes"):
        base = os.path.join(ROOT, "fuzz", d, "python")
        if os.path.isdir(base):
            out += sorted(os.path.join(base, f) for f in os.listdir(base)
                          if not f.startswith(".") and not f.endswith(".md"))
    return out


def test_the_corpus_is_there():
    assert len(_inputs()) > 50


@pytest.mark.parametrize("path", _inputs(), ids=os.path.basename)
def test_replay(path):
    harness = _harness() if not hasattr(test_replay, "mod") else test_replay.mod
    test_replay.mod = harness
    with open(path, "rb") as f:
        harness.test_one_input(f.read())
