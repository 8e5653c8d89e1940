"""progress= on save, nonblocking_save, load, lazy reads and File.verify (issue 23 item 6): a callable
sees monotonic (done, total) reports ending at (total, total); an exception it raises aborts
the operation with that exception and leaves nothing behind; True draws a bar on stderr only
when stderr is a terminal."""
import io
import os
import sys

import numpy as np
import pytest

import jtree
from conftest import assert_same


def _tree():
    rng = np.random.default_rng(3)
    return {"a": rng.standard_normal((256, 256)).astype(np.float32),   # 256 KiB
            "b": rng.integers(0, 9, (300, 100), dtype=np.int64),        # 240,000 B
            "c": np.arange(10.0), "step": 7, "name": "x" * 10}


def _array_bytes(tree):
    return sum(v.nbytes for v in tree.values() if isinstance(v, np.ndarray))


class Stop(BaseException):
    """Raised by a callback (not an Exception: whatever it raises comes back)."""


class Recorder:
    def __init__(self, fail_at=None):
        self.calls = []
        self.fail_at = fail_at

    def __call__(self, done, total):
        self.calls.append((done, total))
        if self.fail_at is not None and len(self.calls) >= self.fail_at:
            raise Stop("stop here")

    def check(self, total=None):
        assert self.calls, "never called"
        dones = [d for d, _ in self.calls]
        assert dones == sorted(dones), self.calls
        totals = {t for _, t in self.calls}
        assert len(totals) == 1, self.calls
        last = self.calls[-1]
        assert last[0] == last[1], self.calls
        if total is not None:
            assert last[1] == total
        return last[1]


@pytest.mark.parametrize("compression", ["zstd", None])
def test_save_reports_monotonic_progress_to_the_total(path, compression):
    tree = _tree()
    rec = Recorder()
    stats = jtree.save(tree, path, chunk_bytes=16 << 10, compression=compression, progress=rec)
    total = rec.check()
    assert total == stats.raw_bytes >= 500_000
    assert_same(jtree.load(path), tree)


def test_nonblocking_save_reports_from_its_thread(path):
    rec = Recorder()
    jtree.nonblocking_save(_tree(), path, chunk_bytes=16 << 10, progress=rec).result()
    rec.check()


@pytest.mark.parametrize("compression, mmap", [("zstd", True), (None, True), (None, False)])
def test_load_reports_the_bytes_of_the_leaves_read(path, compression, mmap):
    tree = _tree()
    jtree.save(tree, path, chunk_bytes=16 << 10, compression=compression)
    rec = Recorder()
    out = jtree.load(path, progress=rec, mmap=mmap)
    # Arrays, plus the payloads read from chunks (none here: the str is inline).
    assert rec.check() >= _array_bytes(tree) - tree["c"].nbytes
    assert_same(out, tree)
    rec = Recorder()
    jtree.load(path, keys="b", progress=rec, mmap=mmap)
    assert rec.check() == tree["b"].nbytes


def test_a_lazy_read_reports_too(path):
    tree = _tree()
    jtree.save(tree, path, chunk_bytes=16 << 10)
    rec = Recorder()
    with jtree.open(path) as f:
        f["a"].read(progress=rec)
        f.load(keys="b", progress=rec)
    assert rec.calls[-1] == (tree["b"].nbytes, tree["b"].nbytes)


def test_an_exception_in_the_callback_aborts_the_save_and_the_old_file_stays(path):
    old = {"old": np.ones(3)}
    jtree.save(old, path)
    before = os.listdir(os.path.dirname(path))
    with pytest.raises(Stop, match="stop here"):
        jtree.save(_tree(), path, chunk_bytes=16 << 10, progress=Recorder(fail_at=1))
    assert_same(jtree.load(path), old)
    assert os.listdir(os.path.dirname(path)) == before  # no temporary file left

    fut = jtree.nonblocking_save(_tree(), path, chunk_bytes=16 << 10,
                                 progress=Recorder(fail_at=2))
    with pytest.raises(Stop):
        fut.result()
    assert_same(jtree.load(path), old)


def test_returning_false_cancels_the_save(path):
    with pytest.raises(jtree.AbortedError):
        jtree.save(_tree(), path, progress=lambda d, t: False)
    assert not os.path.exists(path)


def test_an_exception_in_the_callback_aborts_the_load(path):
    jtree.save(_tree(), path, chunk_bytes=16 << 10)

    def boom(done, total):
        raise ValueError("no more")

    for mmap in (True, False):
        with pytest.raises(ValueError, match="no more"):
            jtree.load(path, progress=boom, mmap=mmap)


def test_file_verify_reports_the_stored_bytes_checked(path):
    jtree.save(_tree(), path, chunk_bytes=16 << 10)
    rec = Recorder()
    with jtree.open(path) as f:
        report = f.verify(progress=rec)
        assert report["ok"], report
        assert rec.check() == report["bytes_checked"] > 0
        # An exception in the callback stops the check and comes back as it was raised.
        with pytest.raises(Stop, match="stop here"):
            f.verify(progress=Recorder(fail_at=1))
        assert f.verify()["ok"]  # (and the File still works)


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_true_draws_a_bar_only_on_a_terminal(path, monkeypatch, capsys):
    jtree.save(_tree(), path, progress=True)  # stderr captured: not a terminal, no bar
    jtree.load(path, progress=True)
    assert capsys.readouterr().err == ""
    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    jtree.save(_tree(), path, progress=True)
    jtree.load(path, progress=True)
    out = term.getvalue()
    assert out.count("100%") == 2 and out.endswith("\n")
    assert "save " + path in out and "load " + path in out


def test_a_bad_progress_value_is_refused(path):
    with pytest.raises(jtree.InvalidArgumentError, match="progress"):
        jtree.save({"a": 1}, path, progress="yes")
    jtree.save({"a": 1}, path)
    with pytest.raises(jtree.InvalidArgumentError, match="progress"):
        jtree.load(path, progress=3)
