"""save(..., partial_write=True): new generations appended in place; None keeps what the file
has; kept leaves are not rewritten."""
import collections

import numpy as np
import pytest

import jtree
from conftest import assert_same


def test_merge_rules(path):
    w = np.random.default_rng(0).standard_normal((256, 256))
    base = {"params": {"w": w, "b": np.zeros(3)}, "step": 1, "hist": [1, 2, 3], "cfg": None}
    jtree.save(base, path)
    size0 = jtree.open(path).info()["file_size"]
    # None keeps; values replace; new keys are added (at the end); None -> subtree works.
    stats = jtree.save({"params": {"w": None, "b": np.ones(3), "new": "x"}, "step": 2,
                        "hist": [None, 20, None], "cfg": {"lr": 0.1}}, path, partial_write=True)
    out = jtree.load(path)
    assert list(out) == ["params", "step", "hist", "cfg"]
    assert list(out["params"]) == ["w", "b", "new"]
    np.testing.assert_array_equal(out["params"]["w"], w)
    np.testing.assert_array_equal(out["params"]["b"], np.ones(3))
    assert out["step"] == 2 and out["hist"] == [1, 20, 3] and out["cfg"] == {"lr": 0.1}
    assert stats.generation == 1
    assert stats.raw_bytes < w.nbytes  # w was reused, not rewritten
    assert stats.file_size < size0 + w.nbytes / 2
    # A key absent from the update is kept; a whole container can replace a leaf and back.
    jtree.save({"step": {"a": 1}}, path, partial_write=True)
    jtree.save({"cfg": 5}, path, partial_write=True)
    out = jtree.load(path)
    assert out["step"] == {"a": 1} and out["cfg"] == 5 and out["hist"] == [1, 20, 3]
    np.testing.assert_array_equal(out["params"]["w"], w)
    f = jtree.open(path)
    assert f.info()["generation"] == 3 and f.verify()["ok"]


def test_sequences_must_keep_their_length(path):
    jtree.save({"l": [1, 2, 3]}, path)
    with pytest.raises(jtree.InvalidArgumentError) as e:
        jtree.save({"l": [None, 5]}, path, partial_write=True)
    assert "'l'" in str(e.value) and "list of 3" in str(e.value)
    # The refused update left the file as it was.
    assert jtree.load(path) == {"l": [1, 2, 3]}
    # A tuple may update a list position-wise (and becomes a tuple).
    jtree.save({"l": (None, 5, None)}, path, partial_write=True)
    assert jtree.load(path) == {"l": (1, 5, 3)}


def test_tied_leaves_survive_partial_writes(path):
    w = np.arange(1000.0)
    jtree.save({"a": w, "b": w, "c": 1}, path)
    jtree.save({"c": 2}, path, partial_write=True)
    out = jtree.load(path)
    assert out["a"] is out["b"] and out["c"] == 2
    # Replacing one of the two tied positions unties them.
    jtree.save({"a": np.zeros(2)}, path, partial_write=True)
    out = jtree.load(path)
    np.testing.assert_array_equal(out["b"], w)
    assert out["a"].shape == (2,)


def test_namedtuples_and_ordered_dicts_merge(path):
    P = collections.namedtuple("P", "x y")
    jtree.save({"p": P(1, 2), "o": collections.OrderedDict(a=1, b=2)}, path)
    jtree.save({"p": P(None, 3), "o": collections.OrderedDict(b=None, c=4)}, path,
               partial_write=True)
    out = jtree.load(path)
    assert tuple(out["p"]) == (1, 3) and type(out["p"]).__name__ == "P"
    assert_same(out["o"], collections.OrderedDict(a=1, b=2, c=4))


def test_partial_write_to_a_missing_file_creates_it(path):
    jtree.save({"a": None, "b": 1}, path, partial_write=True)
    assert jtree.load(path) == {"a": None, "b": 1}


def test_metadata_is_kept_across_generations(path):
    jtree.save({"a": 1}, path, metadata={"step": "1", "run": b"\x00x"})
    jtree.save({"a": 2}, path, partial_write=True, metadata={"step": "2"})
    f = jtree.open(path)
    assert f.metadata == {"step": "2", "run": b"\x00x"}  # (each as saved: text, bytes)


def test_compact_drops_dead_bytes(path):
    big = np.random.default_rng(1).standard_normal(100000)
    jtree.save({"a": big, "b": 1}, path)
    for i in range(3):
        jtree.save({"a": big + i}, path, partial_write=True)
    before = jtree.open(path).info()["file_size"]
    stats = jtree.compact(path)
    assert stats.file_size < before / 2
    out = jtree.load(path)
    np.testing.assert_array_equal(out["a"], big + 2)
    assert out["b"] == 1


def test_partial_write_to_a_file_that_is_not_jtree(tmp_path):
    p = str(tmp_path / "notes.txt")
    with open(p, "w") as f:
        f.write("precious, not a checkpoint\n" * 50)
    with pytest.raises(jtree.AlreadyExistsError) as e:
        jtree.save({"a": 1}, p, partial_write=True)
    assert "overwrite_foreign=True" in str(e.value) and p in str(e.value)
    assert open(p).read().startswith("precious")  # left alone
    fut = jtree.nonblocking_save({"a": 1}, p, partial_write=True)
    with pytest.raises(jtree.AlreadyExistsError):
        fut.result()
    # Told to: the file is replaced by the update (there was nothing to keep).
    stats = jtree.save({"a": 1, "b": None}, p, partial_write=True, overwrite_foreign=True)
    assert jtree.load(p) == {"a": 1, "b": None} and stats.generation == 0
    jtree.save({"b": 2}, p, partial_write=True)
    assert jtree.load(p) == {"a": 1, "b": 2}
