"""jtree.open: navigating the structure and slicing array leaves, against NumPy, reading only
the chunks a slice overlaps."""
import itertools
import math
import random

import numpy as np
import pytest

import jtree
from conftest import require

ml_dtypes = require("ml_dtypes")


def random_index(rng, shape):
    """A random basic index: ints (negative too), slices with any step, '...', None."""
    parts = []
    for n in shape:
        r = rng.random()
        if r < 0.2 and n > 0:
            parts.append(rng.randrange(-n, n))
        elif r < 0.9:
            a = rng.choice([None, rng.randrange(-n - 2, n + 2)])
            b = rng.choice([None, rng.randrange(-n - 2, n + 2)])
            step = rng.choice([None, 1, 2, 3, -1, -2, 7])
            parts.append(slice(a, b, step))
        else:
            parts.append(slice(None))
    if parts and rng.random() < 0.3:
        k = rng.randrange(len(parts))
        parts = parts[:k] + [Ellipsis]  # '...' standing for the rest
    if rng.random() < 0.2:
        parts.insert(rng.randrange(len(parts) + 1), None)
    return tuple(parts) if len(parts) != 1 or rng.random() < 0.5 else parts[0]


@pytest.mark.parametrize("dtype", ["float32", "int16", "bfloat16", "int4", "complex128", "bool"])
def test_random_slices_match_numpy(path, dtype):
    rng = random.Random(dtype)
    npr = np.random.default_rng(len(dtype))
    arrays = {}
    for i, shape in enumerate([(), (1,), (37,), (20, 30), (7, 11, 13), (3, 4, 5, 6), (0, 5)]):
        a = npr.integers(-8, 8, size=shape) if dtype in ("int4",) else npr.standard_normal(shape) * 10
        if dtype == "bool":
            a = a > 0
        dt = getattr(ml_dtypes, dtype) if dtype in ("bfloat16", "int4") else np.dtype(dtype)
        arrays[f"a{i}"] = np.asarray(a).astype(dt)
    jtree.save(arrays, path, chunk_bytes=200, inline_threshold=64)  # many small chunks
    with jtree.open(path) as f:
        for name, a in arrays.items():
            lazy = f[name]
            assert isinstance(lazy, jtree.LazyArray)
            assert lazy.shape == a.shape and lazy.dtype == a.dtype and lazy.ndim == a.ndim
            for _ in range(60):
                idx = random_index(rng, a.shape)
                want = a[idx]
                got = lazy[idx]
                assert np.shape(got) == np.shape(want), (name, idx)
                assert np.array_equal(got, want), (name, idx)
                assert np.asarray(got).tobytes() == np.asarray(want).tobytes(), (name, idx)
            np.testing.assert_array_equal(np.asarray(lazy), a)


def test_slice_reads_only_the_overlapped_chunks(path):
    emb = np.random.default_rng(1).standard_normal((10000, 256)).astype(np.float32)  # ~10 MiB
    jtree.save({"params": {"emb": emb}}, path, chunk_bytes=256 << 10)  # 256 rows per chunk
    with jtree.open(path) as f:
        lazy = f["params"]["emb"]
        rows = lazy.chunk_shape[0]
        assert lazy.chunk_shape == (rows, 256) and rows == 256
        chunks = f._reader.chunks(lazy._leaf.index)
        before = f.io_stats()
        part = lazy[1000:2000, :64]
        after = f.io_stats()
        np.testing.assert_array_equal(part, emb[1000:2000, :64])
        touched = range(1000 // rows, (2000 - 1) // rows + 1)  # chunks 3..7
        want = sum(chunks[i][1] for i in touched)
        assert after["bytes_read"] - before["bytes_read"] == want
        assert want < sum(c[1] for c in chunks) / 5
        # One row inside one chunk reads that chunk only.
        before = f.io_stats()["bytes_read"]
        np.testing.assert_array_equal(lazy[5000], emb[5000])
        assert f.io_stats()["bytes_read"] - before == chunks[5000 // rows][1]


def test_navigation(path):
    import collections
    P = collections.namedtuple("P", "w b")
    tree = {"a": [1, {"x": np.arange(6).reshape(2, 3)}], "n": P(np.ones(2), None), "s": "str",
            "t": (b"b", 2.5), "sl/ash": 7}
    jtree.save(tree, path)
    with jtree.open(path) as f:
        assert f.keys() == ["a", "n", "s", "t", "sl/ash"] and len(f) == 5 and "a" in f
        a = f["a"]
        assert isinstance(a, jtree.Node) and a.kind == "list" and len(a) == 2
        assert a[0] == 1 and a[-1]["x"][1, 2] == 5 and a.path == "a"
        assert list(a[1]) == ["x"]
        assert f["n"].kind == "namedtuple" and f["n"].type_name.endswith("P")
        assert f["n"]["b"] is None and f["n"].keys() == ["w", "b"]
        assert f["s"] == "str" and f["t"][0] == b"b" and f["sl/ash"] == 7
        assert f.at("a/1/x").shape == (2, 3) and f.at("sl\\/ash") == 7
        assert f.at("a/1/x").path == "a/1/x"
        assert f["n"]["w"].read(framework="numpy").tolist() == [1.0, 1.0]
        loaded = f["a"].load()
        assert loaded[0] == 1 and np.array_equal(loaded[1]["x"], tree["a"][1]["x"])
        assert f.load({"a": None, "n": None, "s": True, "t": None, "sl/ash": None})["s"] == "str"
        with pytest.raises(jtree.NotFoundError, match="no key 'zz'"):
            f["zz"]
        with pytest.raises(IndexError, match="out of range") as e:
            f["a"][2]
        assert isinstance(e.value, jtree.InvalidArgumentError)
        with pytest.raises(jtree.InvalidArgumentError, match="indexed by position"):
            f["a"]["x"]
        with pytest.raises(jtree.NotFoundError, match="no child 'q'"):
            f.at("a/1/q")


def test_a_missing_key_names_the_nearest(path):
    """A typo in f[...], Node[...] or f.at(...) is answered with the nearest keys there (as
    keys= patterns are), and a key like none of them with none."""
    jtree.save({"params": {"layer0": {"kernel": np.ones(2), "bias": np.ones(2)},
                           "emb": np.ones(2), "a/b": 1}}, path)
    with jtree.open(path) as f:
        with pytest.raises(jtree.NotFoundError, match=r"no key 'parms'.*; nearest: 'params'$"):
            f["parms"]
        with pytest.raises(jtree.NotFoundError, match=r"'kernal'.*; nearest: 'kernel'$"):
            f["params"]["layer0"]["kernal"]
        with pytest.raises(jtree.NotFoundError, match=r"no key 'zzzz' in this dict$"):
            f["params"]["zzzz"]
        # at(): key paths, escaped as the caller writes them
        with pytest.raises(jtree.NotFoundError,
                           match=r"no child 'layr0' .*; nearest: 'params/layer0'$"):
            f.at("params/layr0/bias")
        with pytest.raises(jtree.NotFoundError, match=r"; nearest: 'params/a\\\\/b'$"):
            f.at("params/a\\/c")


def test_slicing_errors_name_the_leaf(path):
    jtree.save({"w": np.zeros((4, 5))}, path)
    with jtree.open(path) as f:
        w = f["w"]
        with pytest.raises(IndexError, match="'w'.*out of bounds") as e:
            w[4]
        assert isinstance(e.value, jtree.InvalidArgumentError) and path in str(e.value)
        assert [r.tolist() for r in w] == [[0.0] * 5] * 4  # iteration stops at IndexError
        with pytest.raises(IndexError, match="too many indices"):
            w[1, 2, 3]
        with pytest.raises(TypeError, match="indexed by ints, slices") as e:
            w[[0, 1]]
        assert isinstance(e.value, jtree.Error)
        with pytest.raises(TypeError):
            w[np.array([True, False, True, True])]
        assert w[1:1].shape == (0, 5) and w[..., 3].shape == (4,) and w[None].shape == (1, 4, 5)
    with pytest.raises(jtree.InvalidArgumentError, match="closed"):
        w[0]


def test_lazy_reads_are_thread_safe(path):
    from concurrent.futures import ThreadPoolExecutor
    a = np.random.default_rng(2).standard_normal((2000, 100))
    jtree.save({"a": a}, path, chunk_bytes=16 << 10)
    with jtree.open(path) as f:
        lazy = f["a"]

        def work(i):
            lo = (i * 37) % 1900
            return np.array_equal(lazy[lo:lo + 100, i % 7::3], a[lo:lo + 100, i % 7::3])

        with ThreadPoolExecutor(8) as ex:
            assert all(ex.map(work, range(200)))


@pytest.mark.parametrize("verify", [True, False])
def test_raw_chunk_slices(path, verify):
    """Slices of raw (uncompressed) chunks: parts of chunks, steps, several requests sharing
    chunks in one read; all against NumPy."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((300, 40, 7)).astype(np.float32)
    b = rng.integers(0, 255, size=(5000,), dtype=np.uint8)
    jtree.save({"a": a, "b": b}, path, compression=None, chunk_bytes=8 << 10)
    with jtree.open(path, verify=verify) as f:
        assert f["a"].chunk_shape[0] < 300
        for idx in [np.s_[10:200], np.s_[:, 3:9], np.s_[5:250:3, ::2, 1:6], np.s_[299],
                    np.s_[..., 4], np.s_[:], np.s_[7:8, 39, 6]]:
            np.testing.assert_array_equal(f["a"][idx], a[idx])
        np.testing.assert_array_equal(f["b"][123:4567], b[123:4567])
        leaf = f["a"]._leaf.index
        x = np.empty((100, 40, 7), np.float32)
        y = np.empty((150, 40, 3), np.float32)
        f._reader.read_many([(leaf, [20, 0, 0], [120, 40, 7], x.reshape(-1).view(np.uint8)),
                             (leaf, [50, 0, 2], [200, 40, 5], y.reshape(-1).view(np.uint8))],
                            verify, 0)
        np.testing.assert_array_equal(x, a[20:120])
        np.testing.assert_array_equal(y, a[50:200, :, 2:5])


def test_a_slice_of_a_damaged_raw_chunk_is_refused(path):
    """A slice checks the whole chunk it reads from, also the bytes it does not return."""
    a = np.arange(64 * 1024, dtype=np.float32).reshape(256, 256)
    jtree.save({"a": a}, path, compression=None, chunk_bytes=64 << 10)  # 64 rows per chunk
    with jtree.open(path) as f:
        assert f["a"].chunk_shape == (64, 256)
        offset, stored, _raw = f._reader.chunks(f["a"]._leaf.index)[1]  # rows 64..127
    with open(path, "r+b") as fh:
        fh.seek(offset + stored - 1)  # the chunk's last byte: row 127
        last = fh.read(1)
        fh.seek(offset + stored - 1)
        fh.write(bytes([last[0] ^ 0xFF]))
    with jtree.open(path) as f:
        with pytest.raises(jtree.CorruptionError, match="checksum"):
            f["a"][70:80]  # rows of the damaged chunk that are intact
        np.testing.assert_array_equal(f["a"][0:64], a[0:64])  # other chunks are fine
    with jtree.open(path, verify=False) as f:
        np.testing.assert_array_equal(f["a"][70:80], a[70:80])
