"""nonblocking_save / nonblocking_load: snapshots, ordering, concurrency, futures, the GIL."""
import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import jtree


def test_snapshot_is_taken_before_returning(path, torch):
    a = np.arange(1_000_000, dtype=np.float64)
    t = torch.arange(1000, dtype=torch.float32)
    tree = {"a": a, "t": t, "l": [1, 2]}
    fut = jtree.nonblocking_save(tree, path)
    a[:] = -1  # mutate at once: the saved file must hold the values at the call
    t.zero_()
    tree["l"].append(3)
    tree["new"] = 1
    fut.result()
    out = jtree.load(path)
    np.testing.assert_array_equal(out["a"], np.arange(1_000_000, dtype=np.float64))
    np.testing.assert_array_equal(out["t"], np.arange(1000, dtype=np.float32))
    assert out["l"] == [1, 2] and "new" not in out


def test_returns_before_the_file_is_written(path, monkeypatch):
    """The call returns once the snapshot is taken, while the write has not even started:
    the native write is held back until the test lets it go (no timing involved)."""
    import os

    import jtree._api as api

    gate = threading.Event()
    started = threading.Event()
    real = api._jtree

    class HeldWrite:
        def __getattr__(self, name):
            return getattr(real, name)

        def write(self, *args, **kwargs):
            started.set()
            assert gate.wait(60), "the test never let the write go"
            return real.write(*args, **kwargs)

    monkeypatch.setattr(api, "_jtree", HeldWrite())
    a = np.arange(100_000, dtype=np.float32)
    fut = jtree.nonblocking_save({"a": a, "s": "x"}, path)
    # Returned while the write is held: nothing on disk yet, the future pending.
    assert not fut.done() and not os.path.exists(path)
    assert fut.pytree["a"].shape == (100_000,)
    a[:] = -1  # the snapshot, not the caller's array, is what gets written
    assert started.wait(60)
    assert not fut.done() and not os.path.exists(path)
    gate.set()
    assert fut.result(timeout=60).leaves == 2
    np.testing.assert_array_equal(jtree.load(path)["a"], np.arange(100_000, dtype=np.float32))


def test_future_api(path):
    fut = jtree.nonblocking_save({"x": np.ones(10), "s": "a"}, path)
    assert fut.pytree["x"].shape == (10,) and fut.pytree["s"].kind == "str"
    called = []
    fut.add_done_callback(lambda f: called.append(f.done()))
    stats = fut.result(timeout=60)
    assert isinstance(stats, jtree.WriteStats) and stats.leaves == 2
    assert fut.done() and fut.exception() is None and called == [True]
    lf = jtree.nonblocking_load(path)
    assert lf.pytree["x"].dtype == np.float64  # available at once
    out = lf.result(timeout=60)
    assert out["s"] == "a"


def test_futures_are_awaitable(path):
    async def main():
        await jtree.nonblocking_save({"x": np.arange(5)}, path)
        return await jtree.nonblocking_load(path)

    out = asyncio.run(main())
    np.testing.assert_array_equal(out["x"], np.arange(5))


def test_errors_arrive_through_the_future(tmp_path):
    bad = str(tmp_path / "foreign.bin")
    with open(bad, "wb") as f:
        f.write(b"not a jtree file")
    fut = jtree.nonblocking_save({"x": 1}, bad)
    with pytest.raises(jtree.AlreadyExistsError):
        fut.result()
    assert isinstance(fut.exception(), jtree.AlreadyExistsError)
    # Errors found while walking the tree are raised at once, before anything is started.
    with pytest.raises(jtree.InvalidArgumentError):
        jtree.nonblocking_save({"x": object()}, str(tmp_path / "x.jtree"))
    with pytest.raises(jtree.NotFoundError):
        jtree.nonblocking_load(str(tmp_path / "missing.jtree"))


def test_writes_to_one_path_run_in_order(path):
    jtree.save({"step": 0, "log": [None] * 20}, path)
    futs = []
    for i in range(20):
        log = [None] * 20
        log[i] = np.full(1000, i)
        futs.append(jtree.nonblocking_save({"step": i + 1, "log": log}, path, partial_write=True))
    jtree.save({"step": 100}, path, partial_write=True)  # blocking: waits for the earlier ones
    assert all(f.done() for f in futs)
    out = jtree.load(path)
    assert out["step"] == 100
    for i in range(20):
        np.testing.assert_array_equal(out["log"][i], np.full(1000, i))
    assert jtree.open(path).info()["generation"] == 21


def test_many_concurrent_saves_and_loads(tmp_path):
    rng = np.random.default_rng(0)
    trees = [{"w": rng.standard_normal((200, 100)), "i": i, "name": f"t{i}"} for i in range(16)]
    paths = [str(tmp_path / f"c{i}.jtree") for i in range(16)]
    saves = [jtree.nonblocking_save(t, p) for t, p in zip(trees, paths)]
    for f in saves:
        f.result()
    loads = [jtree.nonblocking_load(p) for p in paths]

    def blocking(i):  # loads from other threads at the same time
        return jtree.load(paths[i])

    with ThreadPoolExecutor(8) as ex:
        blocking_results = list(ex.map(blocking, range(16)))
    for t, f, b in zip(trees, loads, blocking_results):
        for out in (f.result(), b):
            assert out["i"] == t["i"] and out["name"] == t["name"]
            np.testing.assert_array_equal(out["w"], t["w"])


def test_loads_while_saving_see_a_whole_file(path):
    # A save replaces the file atomically: a concurrent load sees the old or the new tree.
    jtree.save({"v": np.zeros(200_000), "gen": 0}, path)
    stop = threading.Event()
    seen = set()
    errors = []

    def reader():
        while not stop.is_set():
            try:
                out = jtree.load(path)
            except Exception as e:  # noqa: BLE001
                errors.append(e)
                return
            assert np.all(out["v"] == out["gen"])
            seen.add(out["gen"])

    th = threading.Thread(target=reader)
    th.start()
    for g in range(1, 8):
        jtree.nonblocking_save({"v": np.full(200_000, float(g)), "gen": g}, path).result()
    stop.set()
    th.join()
    assert not errors and max(seen) <= 7


def test_the_gil_is_released_while_saving_and_loading(path):
    data = {"w": np.random.default_rng(1).standard_normal(8_000_000)}  # 64 MB
    counts = []

    def measure(fn):
        stop = threading.Event()
        n = [0]

        def spin():
            while not stop.is_set():
                n[0] += 1

        th = threading.Thread(target=spin)
        th.start()
        t0 = time.perf_counter()
        fn()
        elapsed = time.perf_counter() - t0
        stop.set()
        th.join()
        return n[0], elapsed

    counts.append(measure(lambda: jtree.save(data, path, level=3, threads=1)))
    counts.append(measure(lambda: jtree.load(path, threads=1)))
    # A thread holding the GIL for the whole call would leave the spinner ~no turns; released,
    # it spins all along (tens of thousands of iterations per 0.1 s).
    for n, elapsed in counts:
        assert n > 1000 * max(elapsed, 0.01) * 10, (n, elapsed)


_PEAK_SCRIPT = r"""
import resource, sys
import numpy as np
import jtree
mib = 1 << 20
rng = np.random.default_rng(0)
# 8 leaves of 32 MiB of float32 normal values (compressible, like weights): 256 MiB in all.
tree = {f"w{i}": rng.standard_normal(8 * mib, dtype=np.float32) for i in range(8)}
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
if sys.argv[2] == "nonblocking":
    jtree.nonblocking_save(tree, sys.argv[1]).result()
else:
    jtree.save(tree, sys.argv[1])
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print((peak - base) // mib)
"""


@pytest.mark.parametrize("kind, allowed_mib", [
    # A save streams: chunks compressed on the pool and written as they complete, never a copy
    # of the tree (measured: about 20 MiB more than the tree itself).
    ("blocking", 96),
    # A nonblocking save first snapshots the arrays (256 MiB, the price of safety against
    # mutation), then streams like a save.
    ("nonblocking", 256 + 96),
])
def test_save_memory_is_bounded_by_bytes_in_flight(tmp_path, kind, allowed_mib):
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", _PEAK_SCRIPT, str(tmp_path / "m.jtree"), kind],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    extra_mib = int(out.stdout.strip())
    assert extra_mib <= allowed_mib, f"{kind} save of 256 MiB took {extra_mib} MiB more memory"


class _Tag:
    """A registered custom leaf of test_the_future_structure_is_the_files."""

    def __init__(self, text):
        self.text = text


class _Unregistered:
    """Saved only by pickling (allow_pickle=True)."""

    def __eq__(self, other):
        return type(other) is _Unregistered


def test_the_future_structure_is_the_files(path, jax, torch, ml_dtypes):
    # A nonblocking save's structure (made from the tree being written) and load_pytreedef
    # of the file (made by the native Reader) follow one LeafSpec rule, for every leaf kind
    # (and FileLeaf.spec, asked one leaf at a time, gives the same LeafSpecs).
    import collections
    jtree.register_pytree_leaf_serialization(
        _Tag, serialized_name="test.nonblocking.Tag", serialize_leaf=lambda t: t.text,
        deserialize_leaf=lambda b: _Tag(bytes(b).decode()))
    Point = collections.namedtuple("Point", ["x", "y"])
    tree = {"f32": np.ones((2, 3), np.float32), "scalar": np.float64(2.5), "zero_d": np.array(1),
            "i": 7, "big": 1 << 80, "f": 2.5, "b": True, "c": 1j, "s": "tëxt", "by": b"\x00\x01",
            "ba": bytearray(b"xyz"), "none": None, "l": [1, (2, "3")], "nt": Point(1, np.zeros(2)),
            "od": collections.OrderedDict(k=np.arange(4, dtype=np.int8)), "empty": {},
            "custom": _Tag("ünïcode"), "pickled": _Unregistered(), "empty_s": "",
            "bf16": np.ones(3, ml_dtypes.bfloat16), "int4": np.zeros((2, 2), ml_dtypes.int4),
            "torch": torch.ones(2, 2, dtype=torch.float16), "jax": jax.numpy.ones((3,)),
            "jax_scalar": jax.numpy.float32(1), "empty_a": np.zeros((0, 5), np.complex64),
            "tied": [np.ones(2)] * 2}
    fut = jtree.nonblocking_save(tree, path, allow_pickle=True)
    fut.result(timeout=60)
    from_file = jtree.load_pytreedef(path)
    assert repr(fut.pytree) == repr(from_file)
    assert fut.pytree == from_file
    assert fut.pytree["custom"] == jtree.LeafSpec("custom", nbytes=len("ünïcode".encode()),
                                                  type_name="test.nonblocking.Tag")
    assert fut.pytree["scalar"].scalar and not fut.pytree["zero_d"].scalar
    assert fut.pytree["pickled"].kind == "pickle" and fut.pytree["pickled"].nbytes > 0
    with jtree.open(path) as f:
        leaves = [n for n in f._root.children if n.leaf is not None]
        assert len(leaves) == sum(isinstance(v, jtree.LeafSpec) for v in from_file.values())
        for node in leaves:
            assert node.leaf.spec() == from_file[node.key], node.key
            if node.leaf.spec().is_array:
                assert f[node.key].spec == from_file[node.key], node.key
