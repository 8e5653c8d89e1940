"""Deferred array leaves (jtree._deferred.Deferred): data fetched when the writer reaches the
leaf and dropped once written -- what lets a conversion stream a model of any size."""
import os
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

import jtree
from jtree._deferred import Deferred


def _data(shape, dtype, seed=0):
    return (np.arange(int(np.prod(shape))).reshape(shape) % 251 + seed).astype(dtype)


def test_values_dtypes_and_fetch_count(tmp_path):
    calls = []

    def leaf(name, shape, dtype):
        def fetch():
            calls.append(name)
            return _data(shape, dtype)
        return Deferred(shape, dtype, fetch)

    big = leaf("big", (1000, 300), np.float32)  # several chunks at a small chunk size
    tree = {"big": big, "bf16": leaf("bf16", (7,), ml_dtypes.bfloat16),
            "be": leaf("be", (3, 4), ">i4"), "empty": leaf("empty", (0, 5), np.int8),
            "scalar": leaf("scalar", (), np.float64), "tied": big}
    jtree.save(tree, tmp_path / "d.jtree", chunk_bytes=64 << 10)
    out = jtree.load(tmp_path / "d.jtree")
    np.testing.assert_array_equal(out["big"], _data((1000, 300), np.float32))
    assert out["bf16"].dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(out["bf16"], _data((7,), ml_dtypes.bfloat16))
    np.testing.assert_array_equal(out["be"], np.arange(12, dtype=np.int32).reshape(3, 4))
    assert out["empty"].shape == (0, 5) and out["scalar"].shape == ()
    np.testing.assert_array_equal(out["tied"], out["big"])
    # Each leaf fetched once (the tied one is stored once); the empty one may not be fetched.
    assert sorted(c for c in calls if c != "empty") == ["be", "bf16", "big", "scalar"]


def test_wrong_result_and_raising_fetch_fail_naming_the_leaf(tmp_path):
    path = tmp_path / "d.jtree"
    jtree.save({"old": np.ones(3)}, path)
    bad = {"x": {"y": Deferred((2, 2), np.float32, lambda: np.zeros((3, 3), np.float32))}}
    with pytest.raises(jtree.InvalidArgumentError, match=r"x/y.*shape \(3, 3\)"):
        jtree.save(bad, path)

    def boom():
        raise RuntimeError("decode failed")
    with pytest.raises(jtree.InvalidArgumentError, match=r"w.*RuntimeError: decode failed"):
        jtree.save({"w": Deferred((500, 500), np.float32, boom)}, path)
    np.testing.assert_array_equal(jtree.load(path)["old"], np.ones(3))  # the old file survives


def test_bad_declarations_are_refused():
    with pytest.raises(ValueError):
        Deferred((-1,), np.float32, lambda: None)
    with pytest.raises(TypeError):
        Deferred((1,), np.float32, "not callable")


def test_nonblocking_save(tmp_path):
    fut = jtree.nonblocking_save({"a": Deferred((64, 64), np.int16,
                                                lambda: _data((64, 64), np.int16))},
                                 tmp_path / "d.jtree")
    fut.result()
    np.testing.assert_array_equal(jtree.load(tmp_path / "d.jtree")["a"], _data((64, 64), np.int16))


def test_memory_holds_only_the_leaves_being_written(tmp_path):
    # 48 leaves of 8 MiB (384 MiB): a save holding them all would grow by that much; deferred
    # leaves are dropped once written, so the peak stays far below it.
    script = textwrap.dedent(f"""
        import resource, numpy as np, jtree
        from jtree._deferred import Deferred
        n, rows = 48, 2048
        def fetch(i):
            return lambda: np.full((rows, 1024), i, np.float32)
        tree = {{f"l{{i}}": Deferred((rows, 1024), np.float32, fetch(i)) for i in range(n)}}
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        jtree.save(tree, {str(tmp_path / "m.jtree")!r}, compression=None, threads=2)
        print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) // 1024)
    """)
    env = dict(os.environ)
    growth_mib = int(subprocess.run([sys.executable, "-c", script], check=True, env=env,
                                    capture_output=True, text=True).stdout.split()[-1])
    assert growth_mib < 384 // 3, f"peak RSS grew by {growth_mib} MiB for 384 MiB of leaves"
    f = jtree.open(tmp_path / "m.jtree")
    assert float(f["l47"][0, 0]) == 47.0
