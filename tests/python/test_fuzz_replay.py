"""The atheris corpus of the Python load path and every input it ever found, replayed through
fuzz/python/fuzz_load.py's own driver (no atheris needed): hostile files give jtree.Error and
nothing else, on every test run (fuzz/README.md)."""
import os

import pytest

from conftest import fuzz_harness

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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
    harness = fuzz_harness() if not hasattr(test_replay, "mod") else test_replay.mod
    test_replay.mod = harness
    with open(path, "rb") as f:
        harness.test_one_input(f.read())
