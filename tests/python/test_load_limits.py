"""What a load allocates for its caller is bounded by the open's limits before it is allocated
(SECURITY.md): each array, slice or payload within max_leaf_bytes, all of one load within
max_total_bytes, so that a small hostile file cannot make the Python layer allocate without
bound; memory the machine lacks is a jtree.ResourceExhaustedError too."""
import numpy as np
import pytest

import jtree


@pytest.fixture
def path(tmp_path):
    p = str(tmp_path / "limits.jtree")
    jtree.save({"w": np.zeros((100, 100), np.float32), "v": np.ones(1000, np.float32),
                "s": "x" * 5000, "n": 3}, p)
    return p


def test_max_leaf_bytes_bounds_loads_slices_and_payloads(path):
    with jtree.open(path, limits={"max_leaf_bytes": 4000}) as f:
        with pytest.raises(jtree.ResourceExhaustedError, match="max_leaf_bytes"):
            f.load()
        with pytest.raises(jtree.ResourceExhaustedError, match="'w'.*40000 bytes"):
            f["w"][:]
        assert f["w"][:10, :10].shape == (10, 10)  # 400 bytes
        with pytest.raises(jtree.ResourceExhaustedError):
            f["s"]  # a 5000-byte string
        assert f["v"][:].shape == (1000,)  # exactly 4000 bytes
        assert jtree.load(f, keys=["v", "n"])["v"].shape == (1000,)
        with pytest.raises(jtree.ResourceExhaustedError):
            jtree.load(f, keys="w", framework="torch") if _has("torch") else f.load(keys="w")


def test_max_total_bytes_bounds_one_load(path):
    with jtree.open(path, limits={"max_total_bytes": 6000}) as f:
        with pytest.raises(jtree.ResourceExhaustedError, match="max_total_bytes"):
            f.load(keys=["v", "s"])  # 4000 + 5000
        # Each load counts its own: a long-lived File does not run out.
        for _ in range(3):
            assert f.load(keys="v")["v"].shape == (1000,)
            assert f.load(keys="s")["s"] == "x" * 5000


def test_buffers_of_the_caller_are_not_counted(path):
    with jtree.open(path, limits={"max_leaf_bytes": 100}) as f:
        out = {"w": np.empty((100, 100), np.float32), "v": np.empty(1000, np.float32),
               "s": None, "n": None}
        got = jtree.load(f, out=out)
        assert got["w"] is out["w"] and not got["w"].any()


def test_default_limits_load_everything(path):
    tree = jtree.load(path)
    assert tree["w"].shape == (100, 100) and tree["s"] == "x" * 5000


def _has(module):
    try:
        __import__(module)
        return True
    except ImportError:
        return False


def test_a_leaf_over_the_budget_is_named_before_a_later_error_of_the_plan(path):
    # The reservations of a load are made in one native call once the plan is made; a leaf
    # over the limits is still reported, by its key path, before what the plan finds after
    # it (here a keys= pattern matching nothing), as when each was reserved as planned.
    with jtree.open(path, limits={"max_leaf_bytes": 4000}) as f:
        with pytest.raises(jtree.ResourceExhaustedError, match="'s'.*5000 bytes"):
            f.load(keys=["s", "no_such_key"])  # (a payload: reserved as it is planned)
        with pytest.raises(jtree.ResourceExhaustedError, match="'w'.*40000 bytes"):
            f.load(keys=["w", "no_such_key"], mmap=False)
        with pytest.raises(jtree.NotFoundError, match="no_such_key"):
            f.load(keys=["v", "no_such_key"])
