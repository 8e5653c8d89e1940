"""Loads over the file's memory map (mmap=True, the default): leaves saved without compression
come back from a local file as copy-on-write views of it. What a user relies on: the values,
private writes, read-only mode, lifetime past close() and past a new save or an append,
checksums (a damaged chunk names its key), the fallbacks (compressed leaves, no map, slices),
and the lazy conversions reading each chunk once."""
import os

import numpy as np
import pytest

import jtree
from conftest import require


def is_mapped(a) -> bool:
    """True when the array views a file mapping: its base chain ends at the native module's
    export (which holds the mapping alive); arrays read into fresh memory end at None."""
    b = a
    while isinstance(b, np.ndarray):
        b = b.base
    return isinstance(b, memoryview) and type(b.obj).__name__ == "nb_ndarray"


def raw_tree():
    rng = np.random.default_rng(0)
    return {"w": rng.standard_normal((1000, 300)).astype(np.float32),  # several chunks
            "b": np.arange(7, dtype=np.int16),                          # inline (small)
            "e": np.zeros((0, 4), np.float32),                          # empty
            "s": np.float64(2.5),                                       # 0-d
            "big0d": np.array(3, np.int64),
            "i": rng.integers(0, 1000, (5000,), dtype=np.int64)}


@pytest.fixture
def raw_file(path):
    tree = raw_tree()
    jtree.save(tree, path, compression=None, chunk_bytes=64 * 1024)
    return path, tree


def test_raw_leaves_come_back_mapped_with_their_values(raw_file):
    path, tree = raw_file
    t = jtree.load(path)
    for k, v in tree.items():
        np.testing.assert_array_equal(t[k], v)
        assert t[k].dtype == v.dtype and np.shape(t[k]) == np.shape(v)
    assert is_mapped(t["w"]) and is_mapped(t["i"])
    assert not is_mapped(t["b"])  # inline in the header: copied from it
    assert t["w"].flags.writeable and t["w"].flags.aligned
    assert type(t["s"]) is np.float64  # 0-d scalars stay scalars


def test_writes_change_the_array_never_the_file(raw_file):
    path, tree = raw_file
    before = open(path, "rb").read()
    t = jtree.load(path)
    t["w"][:] = 7.0
    assert (t["w"] == 7.0).all()
    assert open(path, "rb").read() == before
    np.testing.assert_array_equal(jtree.load(path)["w"], tree["w"])
    # One open File: a write into what one read returned is not seen by the next read, which
    # verifies clean (each read maps anew; a shared map made this a false CorruptionError).
    with jtree.open(path) as f:
        a = f["w"].read()
        assert is_mapped(a)
        a[:] = 0.0
        b = f["w"].read()
        np.testing.assert_array_equal(b, tree["w"])
        np.testing.assert_array_equal(f.load()["w"], tree["w"])
        assert (a == 0.0).all()


def test_read_only_mode_refuses_writes(raw_file):
    path, tree = raw_file
    t = jtree.load(path, mmap="r")
    assert is_mapped(t["w"]) and not t["w"].flags.writeable
    with pytest.raises(ValueError):
        t["w"][0, 0] = 1.0
    np.testing.assert_array_equal(t["w"], tree["w"])


def test_copies_when_asked(raw_file):
    path, tree = raw_file
    t = jtree.load(path, mmap=False)
    assert not is_mapped(t["w"]) and not is_mapped(t["i"])
    np.testing.assert_array_equal(t["w"], tree["w"])
    with pytest.raises(jtree.InvalidArgumentError, match="mmap must be"):
        jtree.load(path, mmap="rw")
    with pytest.raises(jtree.InvalidArgumentError, match="mmap must be"):
        jtree.open(path, mmap=1)


def test_arrays_outlive_close_a_new_save_and_an_append(raw_file):
    path, tree = raw_file
    with jtree.open(path) as f:
        w = f["w"].read()
        i = np.asarray(f["i"])
    assert is_mapped(w) and is_mapped(i)
    np.testing.assert_array_equal(w, tree["w"])  # after close()
    jtree.save({"w": np.zeros((3,), np.float32)}, path, compression=None)  # replaced
    np.testing.assert_array_equal(w, tree["w"])
    np.testing.assert_array_equal(i, tree["i"])
    t = jtree.load(path)
    jtree.save({"x": np.ones(100000, np.float32)}, path, partial_write=True,
               compression=None)  # appended in place
    np.testing.assert_array_equal(t["w"], np.zeros((3,), np.float32))
    t2 = jtree.load(path)
    assert is_mapped(t2["x"]) and (t2["x"] == 1).all()


def test_damaged_chunk_is_corruption_naming_the_key(raw_file):
    path, tree = raw_file
    with jtree.open(path) as f:
        chunks = f._reader.chunks(f["w"]._leaf.index)
    assert len(chunks) > 2
    offset = chunks[2][0] + 11
    data = bytearray(open(path, "rb").read())
    data[offset] ^= 0x40
    open(path, "wb").write(bytes(data))
    with pytest.raises(jtree.CorruptionError, match=r"leaf w: chunk 2: checksum mismatch"):
        jtree.load(path)
    t = jtree.load(path, verify=False)  # what the file holds, damage included
    assert is_mapped(t["w"])
    assert not np.array_equal(t["w"], tree["w"])
    np.testing.assert_array_equal(t["i"], tree["i"])


def test_what_cannot_be_mapped_is_read_as_before(path, tmp_path):
    tree = raw_tree()
    jtree.save(tree, path)  # compressed (the default): random floats stay mostly raw chunks
    t = jtree.load(path)
    for k, v in tree.items():
        np.testing.assert_array_equal(t[k], v)
    raw = str(tmp_path / "raw.jtree")
    jtree.save(tree, raw, compression=None)
    for mmap in (False, True):
        with jtree.open(raw, mmap=mmap):  # mmap=False: the file is not mapped at all
            with open("/proc/self/maps") as maps:
                assert (raw in maps.read()) == mmap
    with pytest.warns(DeprecationWarning, match=r"use_mmap=\) is deprecated: mmap=False"):
        f = jtree.open(raw, use_mmap=False)  # the deprecated spelling of mmap=False
    with f:
        assert f.mmap is False
        w = f.load()["w"]
    assert not is_mapped(w)
    np.testing.assert_array_equal(w, tree["w"])
    with jtree.open(raw, mmap=False) as f:  # slices with mmap off are copies
        part = f["w"][10:20]                 # (mapped slices: test_mmap_slice.py)
    assert not is_mapped(part)
    np.testing.assert_array_equal(part, tree["w"][10:20])
    # A target that casts reads into new memory too.
    c = jtree.load(raw, cast=np.float64)
    assert c["w"].dtype == np.float64 and not is_mapped(c["w"])


def test_torch_and_jax_over_the_map(raw_file):
    torch = require("torch")
    ml_dtypes = require("ml_dtypes")
    path, tree = raw_file
    h = np.arange(10000).astype(ml_dtypes.bfloat16)
    jtree.save(dict(tree, h=h), path, compression=None)
    t = jtree.load(path, framework="torch")
    assert t["h"].dtype == torch.bfloat16
    np.testing.assert_array_equal(t["h"].float().numpy(), h.astype(np.float32))
    np.testing.assert_array_equal(t["w"].numpy(), tree["w"])
    assert t["e"].shape == (0, 4)
    t["w"][0, 0] = 123.0  # writable, private
    assert jtree.load(path)["w"][0, 0] == tree["w"][0, 0]
    jax = require("jax")
    j = jtree.load(path, framework="jax")
    assert isinstance(j["w"], jax.Array)
    np.testing.assert_array_equal(np.asarray(j["w"]), tree["w"])


def test_lazy_conversions_read_each_chunk_once(path):
    torch = require("torch")
    w = np.arange(200000, dtype=np.float32).reshape(2000, 100)
    jtree.save({"w": w}, path, chunk_bytes=64 * 1024)  # compressed: no map, every read counted
    data = os.path.getsize(path)

    def bytes_read(convert):
        with jtree.open(path) as f:
            before = f.io_stats()["bytes_read"]
            out = convert(f["w"])
            return out, f.io_stats()["bytes_read"] - before

    for convert in (torch.as_tensor, lambda a: torch.from_numpy(np.asarray(a)), np.asarray,
                    list, lambda a: [r for r in a]):
        out, n = bytes_read(convert)
        assert 0 < n <= data, (convert, n, data)
        got = np.stack([np.asarray(r) for r in out]) if isinstance(out, list) else np.asarray(out)
        np.testing.assert_array_equal(got, w)
    with jtree.open(path) as f:
        assert len(f["w"]) == 2000


def test_iterating_a_0d_lazy_array_is_an_error(path):
    jtree.save({"s": np.zeros((), np.float32)}, path, inline_threshold=0)
    with jtree.open(path) as f:
        with pytest.raises(TypeError, match="iteration over a 0-d array"):
            iter(f["s"]).__next__()


def test_lazy_slices_as_torch_and_jax(path):
    torch = require("torch")
    jax = require("jax")
    ml_dtypes = require("ml_dtypes")
    rng = np.random.default_rng(2)
    tree = {"h": rng.standard_normal((300, 40)).astype(ml_dtypes.bfloat16),
            "f8": rng.standard_normal((64, 8)).astype(ml_dtypes.float8_e4m3fn),
            "c": (rng.standard_normal((50, 3)) + 1j).astype(np.complex64),
            "i": np.arange(1000, dtype=np.int64)}
    jtree.save(tree, path, chunk_bytes=4096)
    index = (slice(250, 7, -3), slice(None, None, 2))
    with jtree.open(path, framework="torch") as f:
        h = f["h"][index]
        assert isinstance(h, torch.Tensor) and h.dtype == torch.bfloat16
        np.testing.assert_array_equal(h.view(torch.uint16).numpy(),
                                      tree["h"][index].view(np.uint16))
        f8 = f["f8"][3:9, 1]
        assert f8.dtype == torch.float8_e4m3fn and tuple(f8.shape) == (6,)
        np.testing.assert_array_equal(f8.view(torch.uint8).numpy(),
                                      tree["f8"][3:9, 1].view(np.uint8))
        c = f["c"][::-1]
        assert c.dtype == torch.complex64
        np.testing.assert_array_equal(c.numpy(), tree["c"][::-1])
        assert tuple(f["i"][5:5].shape) == (0,)
        assert isinstance(f["i"].get(slice(0, 3)), np.ndarray)  # another framework when asked
        j = f["i"].get(slice(10, 20), framework="jax")
        assert isinstance(j, jax.Array)
        np.testing.assert_array_equal(np.asarray(j), tree["i"][10:20])
        with pytest.raises(jtree.InvalidArgumentError, match="framework must be"):
            f["i"].get(0, framework="tf")
    with pytest.raises(jtree.InvalidArgumentError, match="framework must be"):
        jtree.open(path, framework="tf")
