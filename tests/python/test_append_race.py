"""partial_write without a race (issue 19): the append is pinned to the generation the update
was merged against; when another writer appends in between, it is refused with AbortedError,
nothing is written, and the file holds the other writer's generation intact."""
import os
import subprocess
import sys

import numpy as np
import pytest

import jtree
from jtree import _api


def _other_writer_appends(path):
    """Another process appends a generation (key "theirs") to ``path``."""
    code = ("import sys, numpy as np, jtree; "
            "jtree.save({'theirs': np.arange(5000, dtype=np.int32)}, sys.argv[1], "
            "partial_write=True)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    subprocess.run([sys.executable, "-c", code, path], check=True, env=env)


def test_append_refused_when_another_writer_appended_in_between(path, monkeypatch):
    jtree.save({"w": np.ones(1000)}, path)
    real_merge = _api.merge

    def merge_then_race(root, base, where):
        # The update has been read and planned against generation 0: now another writer
        # appends before this one writes.
        merged = real_merge(root, base, where)
        _other_writer_appends(path)
        return merged

    monkeypatch.setattr(_api, "merge", merge_then_race)
    with pytest.raises(jtree.AbortedError) as e:
        jtree.save({"mine": np.zeros(3000)}, path, partial_write=True)
    msg = str(e.value)
    assert path in msg and "changed since this append was planned" in msg
    assert "generation 0" in msg and "now generation 1" in msg
    size = os.path.getsize(path)
    monkeypatch.setattr(_api, "merge", real_merge)
    # The other writer's generation, intact and alone at the end of the file.
    f = jtree.open(path)
    assert f.info()["generation"] == 1 and f.info()["file_size"] == size
    assert f.verify()["ok"]
    out = jtree.load(path)
    assert list(out) == ["w", "theirs"]
    np.testing.assert_array_equal(out["theirs"], np.arange(5000, dtype=np.int32))
    # Tried again, it is planned against generation 1 and keeps both.
    stats = jtree.save({"mine": np.zeros(3000)}, path, partial_write=True)
    assert stats.generation == 2
    assert list(jtree.load(path)) == ["w", "theirs", "mine"]


def test_append_pinned_when_nobody_interferes(path):
    jtree.save({"w": np.ones(10)}, path)
    for step in range(3):
        jtree.save({"step": step}, path, partial_write=True)
    f = jtree.open(path)
    assert f.info()["generation"] == 3 and jtree.load(path)["step"] == 2
    assert f.info()["footer_offset"] + 128 == f.info()["file_size"]
