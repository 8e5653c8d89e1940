"""GlobalArray leaves and the multi-process save's planning, in one process: a single process
holding every block, the checks on blocks (gaps, overlaps, shapes, dtypes) with their key
paths, and the collective steps driven by a scripted coordinator that plays the other
processes (the real multi-process jobs are in tests/multihost)."""
import os

import numpy as np
import pytest

import jtree
from jtree import _multi_process
from conftest import require
from test_mmap import is_mapped


def test_blocks_held_by_one_process_round_trip(tmp_path):
    p = str(tmp_path / "g.jtree")
    a = np.arange(10 * 6, dtype=np.float32).reshape(10, 6)
    g = jtree.GlobalArray([a[:3], a[3:]], [(slice(0, 3),), (slice(3, 10),)], (10, 6))
    stats = jtree.save({"w": g, "n": 1}, p)
    assert stats.raw_bytes == a.nbytes and os.listdir(tmp_path) == ["g.jtree"]
    np.testing.assert_array_equal(jtree.load(p)["w"], a)
    # Rows 0:3 / 3:10 -> a chunk grid with a line at every edge: rectilinear (format version 2),
    # one chunk per block, where the gcd rule of a regular grid needed chunks of 3 rows.
    info = jtree.open(p).info()
    assert info["num_chunks"] == 2 and info["min_read_version"] == 2
    with jtree.open(p, mmap=False) as f:
        w = f["w"]
        assert w.chunk_shape == () and w.chunk_bounds == ((3, 10), (6,))
        # Iteration reads one block per stored chunk row: a read for each of the 2 chunks.
        before = f.io_stats()["read_requests"]
        rows = list(w)
        assert len(rows) == 10 and np.array_equal(np.stack(rows), a)
        assert f.io_stats()["read_requests"] - before == 2
    # Saved raw, the rectilinear leaf lies in the file as its array: it loads as a view of the
    # file's map (one process held every block, so its chunks form one run).
    raw = str(tmp_path / "raw.jtree")
    jtree.save({"w": g}, raw, compression=None)
    w = jtree.load(raw)["w"]
    assert is_mapped(w) and np.array_equal(w, a)
    regular = str(tmp_path / "regular.jtree")  # an ordinary array: a regular grid
    jtree.save({"w": np.zeros((1 << 16, 4), np.float32)}, regular)
    with jtree.open(regular) as f:
        assert f["w"].chunk_bounds is None and len(f["w"].chunk_shape) == 2
    # Load side: only the blocks named, as a GlobalArray.
    out = jtree.load(p, {"w": jtree.GlobalArray(None, [(slice(2, 5), slice(1, 3)),
                                                       (slice(9, 10),)]), "n": None})["w"]
    assert isinstance(out, jtree.GlobalArray) and out.shape == (10, 6)
    np.testing.assert_array_equal(out.data[0], a[2:5, 1:3])
    np.testing.assert_array_equal(out.data[1], a[9:10])
    # cast applies; torch tensors for framework="torch".
    out = jtree.load(p, {"w": jtree.GlobalArray(None, (slice(0, 2),)), "n": None},
                     cast=np.float64)["w"]
    assert out.data.dtype == np.float64
    torch = require("torch")
    t = jtree.load(p, {"w": jtree.GlobalArray(None, (slice(4, 6),)), "n": None},
                   framework="torch")["w"].data
    assert isinstance(t, torch.Tensor) and torch.equal(t, torch.from_numpy(a[4:6]))


def test_torch_blocks_and_replicas(tmp_path):
    torch = require("torch")
    p = str(tmp_path / "t.jtree")
    w = torch.randn(8, 4).to(torch.bfloat16)
    tree = {"w": jtree.GlobalArray([w[:4], w[4:]], [(slice(0, 4),), (slice(4, 8),)], (8, 4)),
            "r": jtree.GlobalArray(np.ones(3), (), (3,), replica_id=0)}
    jtree.save(tree, p)
    out = jtree.load(p, framework="torch")
    assert out["w"].dtype == torch.bfloat16 and torch.equal(out["w"], w)


@pytest.mark.parametrize("make,message", [
    (lambda a: jtree.GlobalArray(a[:4], (slice(0, 4),), (10, 6)), "cover 24 of the 60"),
    (lambda a: jtree.GlobalArray([a[:6], a[4:]], [(slice(0, 6),), (slice(4, 10),)], (10, 6)),
     "processes 0 and 0 both hold \\[0:6, 0:6\\]"),
    (lambda a: jtree.GlobalArray(a[:4], (slice(0, 5),), (10, 6)), "block of shape \\(4, 6\\)"),
    (lambda a: jtree.GlobalArray(a, (slice(0, 12),), (10, 6)), "outside dimension 0"),
    (lambda a: jtree.GlobalArray(a, (slice(None),)), "needs its global shape"),
    (lambda a: jtree.GlobalArray([a[:5], a[5:].astype(np.float64)],
                                 [(slice(0, 5),), (slice(5, 10),)], (10, 6)),
     "different dtypes"),
])
def test_bad_blocks_are_refused_with_the_key_path(tmp_path, make, message):
    a = np.zeros((10, 6), np.float32)
    p = str(tmp_path / "bad.jtree")
    with pytest.raises(jtree.InvalidArgumentError, match=message) as e:
        jtree.save({"layer": {"w": make(a)}}, p)
    assert "layer/w" in str(e.value) and p in str(e.value)
    assert os.listdir(tmp_path) == []  # nothing written, no segment left


def test_index_checks():
    with pytest.raises(jtree.InvalidArgumentError, match="step"):
        jtree.GlobalArray(np.zeros(2), (slice(0, 4, 2),), (4,))
    with pytest.raises(jtree.InvalidArgumentError, match="tuple of slices"):
        jtree.GlobalArray(np.zeros(2), (0,), (4,))
    with pytest.raises(jtree.InvalidArgumentError, match="as many arrays"):
        jtree.GlobalArray([np.zeros(2)], [(slice(0, 2),), (slice(2, 4),)], (4,))


class Scripted(jtree.Coordinator):
    """Process 0 of 2; process 1's contributions are scripted, one per collective call."""

    def __init__(self, theirs):
        self.process_index, self.process_count = 0, 2
        self.theirs = list(theirs)
        self.barriers = 0

    def barrier(self, name):
        self.barriers += 1

    def all_gather(self, data):
        import pickle  # noqa: PLC0415

        return [data, pickle.dumps(self.theirs.pop(0))]

    def broadcast(self, data):
        return data


def test_plan_refuses_processes_that_disagree(tmp_path):
    p = str(tmp_path / "x.jtree")
    a = np.zeros((4, 2), np.float32)
    mine = {"w": jtree.GlobalArray(a[:2], (slice(0, 2),), (4, 2))}
    theirs = [("w", "float64", (4, 2), [((2, 4), (0, 2))])]
    coord = Scripted([(b"12345678", None), theirs])
    with pytest.raises(jtree.InvalidArgumentError,
                       match=r"process 1 has float64 \(4, 2\) at .w., process 0 float32"):
        jtree.save(mine, p, coordinator=coord)
    coord = Scripted([(b"12345678", None), []])
    with pytest.raises(jtree.InvalidArgumentError, match=r"different numbers of GlobalArray"):
        jtree.save(mine, p, coordinator=coord)
    assert os.listdir(tmp_path) == []


def test_a_failure_elsewhere_fails_the_save_here_and_removes_the_segment(tmp_path):
    p = str(tmp_path / "x.jtree")
    a = np.arange(8, dtype=np.float32).reshape(4, 2)
    mine = {"w": jtree.GlobalArray(a[:2], (slice(0, 2),), (4, 2))}
    theirs = [(b"12345678", None), [("w", "float32", (4, 2), [((2, 4), (0, 2))])],
              ("IOError", "disk full")]
    coord = Scripted(theirs)
    with pytest.raises(jtree.AbortedError, match=r"process 1 failed to write its segment "
                                                 r"\(IOError: disk full\)"):
        jtree.save(mine, p, coordinator=coord)
    assert os.listdir(tmp_path) == []
    # A process that could not even walk its tree tells the others at the first step.
    coord = Scripted([(b"12345678", ("InvalidArgumentError", "bad leaf"))])
    with pytest.raises(jtree.AbortedError, match=r"process 1 could not prepare its save"):
        jtree.save(mine, p, coordinator=coord)
    # And this process's own error reaches the others (here: raised, after the gather).
    coord = Scripted([(b"12345678", None)])
    with pytest.raises(jtree.InvalidArgumentError, match="cannot save an object"):
        jtree.save({"w": object()}, p, coordinator=coord)
    assert coord.theirs == []


def test_a_foreign_target_is_refused_before_any_segment_is_written(tmp_path):
    """Process 0 checks the target in the first collective step: the save fails there, in every
    process, before the blocks are gathered or a segment is written (issue 19)."""
    p = str(tmp_path / "notes.txt")
    with open(p, "wb") as f:
        f.write(b"precious notes\n")
    a = np.arange(8, dtype=np.float32).reshape(4, 2)
    mine = {"w": jtree.GlobalArray(a[:2], (slice(0, 2),), (4, 2))}
    later = [[("w", "float32", (4, 2), [((2, 4), (0, 2))])], None]
    coord = Scripted([(b"12345678", None)] + later)
    with pytest.raises(jtree.AlreadyExistsError, match="is not a jtree file"):
        jtree.save(mine, p, coordinator=coord)
    assert coord.theirs == later  # nothing gathered after step 1
    assert os.listdir(tmp_path) == ["notes.txt"]
    with open(p, "rb") as f:
        assert f.read() == b"precious notes\n"


def test_collective_save_is_refused_for_partial_writes(tmp_path):
    a = np.zeros(4)
    with pytest.raises(jtree.NotSupportedError, match="partial_write"):
        jtree.save({"w": jtree.GlobalArray(a, (), (4,))}, str(tmp_path / "p.jtree"),
                   partial_write=True)


def test_single_process_coordinators(tmp_path):
    s = jtree.SingleProcess()
    assert s.all_gather(b"ab") == [b"ab"] and s.broadcast(b"x") == b"x"
    assert s.gather_objects({"k": 1}) == [{"k": 1}]
    require("jax")
    j = jtree.JaxCoordinator()
    assert (j.process_index, j.process_count) == (0, 1)
    assert j.all_gather(b"hello") == [b"hello"] and j.broadcast_object([1, 2]) == [1, 2]
    # A coordinator of one process and no distributed arrays: an ordinary save.
    p = str(tmp_path / "one.jtree")
    fut = jtree.nonblocking_save({"x": np.arange(3)}, p, coordinator=j)
    assert fut.result().leaves == 1
    with pytest.raises(jtree.InvalidArgumentError, match="jtree.Coordinator"):
        jtree.save({"x": 1}, p, coordinator="mpi")
