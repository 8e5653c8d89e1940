"""The plain load (jtree._load_plain, bindings/python/src/plain_load.cc): jtree.load(f) of a
whole file with no selection, cast, target or device is built in one native pass. It must give
exactly what the general loader gives (types, values, dtypes, shapes, memory-map views and
their flags, tied leaves as one object, containers), and decline to the general loader, which
raises its clear errors, wherever it does not do the same."""
import collections
import os

import ml_dtypes
import numpy as np
import pytest

import jtree
from jtree import _dtypes, _load_plain, _registry

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def general_load(monkeypatch, *args, **kw):
    """jtree.load through the general loader only."""
    with monkeypatch.context() as m:
        m.setattr(_load_plain, "applies", lambda o: False)
        return jtree.load(*args, **kw)


class Counting:
    """Counts the native plain loads and what they returned (None: declined)."""

    def __init__(self, monkeypatch):
        self.results = []
        real = _load_plain.load

        def load(*args):
            got = real(*args)
            self.results.append(got is not None)
            return got

        monkeypatch.setattr(_load_plain, "load", load)


Point = collections.namedtuple("Point", ["x", "y"])


def mixed_tree():
    rng = np.random.default_rng(1)
    tied = rng.standard_normal((64, 33)).astype(np.float32)  # 8 KiB: chunked
    return {
        "big": rng.standard_normal((300, 200)).astype(np.float32),   # chunked
        "small": np.arange(4, dtype=np.int16),                       # inline in the header
        "bf16": rng.standard_normal(1000).astype(ml_dtypes.bfloat16),
        "f8": np.linspace(-2, 2, 17).astype(ml_dtypes.float8_e4m3fn),
        "i4": np.array([-8, -1, 0, 7], dtype=ml_dtypes.int4),
        "c64": (np.arange(6) + 1j).astype(np.complex64).reshape(2, 3),
        "bool": np.array([True, False, True]),
        "empty": np.zeros((0, 5), np.float64),
        "scalar_np": np.float32(2.5),           # a NumPy scalar: comes back as one
        "zero_d": np.array(7, np.int64),        # a 0-d array: comes back as one
        "tied_a": tied, "tied_b": tied,
        "py": [1, -(2 ** 100), 2.5, True, 3 - 4j, None, "héllo", b"\x00\xff", bytearray(b"ba"),
               "s" * 100_000],
        "nested": (Point(np.ones(3, np.uint8), {"k": ()}), [], {}),
        "ordered": collections.OrderedDict([("z", 1), ("a", np.arange(3, dtype=np.uint64))]),
        7: "an int key",
    }


def same(a, b, path="root"):
    """a and b are the same tree: types, keys, values, dtypes, shapes, writeable flags."""
    assert type(a) is type(b), path
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, path
        assert a.flags.writeable == b.flags.writeable, path
        assert a.tobytes() == b.tobytes(), path
    elif isinstance(a, np.generic):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), path
    elif isinstance(a, dict):
        assert list(a) == list(b), path
        for k in a:
            same(a[k], b[k], f"{path}/{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        if hasattr(a, "_fields"):
            assert a._fields == b._fields and type(a).__name__ == type(b).__name__, path
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}/{i}")
    else:
        assert a == b or (a != a and b != b), path  # (NaN: the same value)


@pytest.mark.parametrize("compression", ["zstd", None])
@pytest.mark.parametrize("mmap", [True, "r", False])
def test_the_plain_load_equals_the_general_one(tmp_path, monkeypatch, compression, mmap):
    tree = mixed_tree()
    p = str(tmp_path / "mixed.jtree")
    jtree.save(tree, p, compression=compression)
    counting = Counting(monkeypatch)
    got = jtree.load(p, mmap=mmap)
    assert counting.results == [True]  # the native pass loaded it
    want = general_load(monkeypatch, p, mmap=mmap)
    same(got, want)
    # What was saved, as saved (the namedtuple is a class made at load, of the same fields).
    np.testing.assert_array_equal(got["big"], tree["big"])
    assert got["py"][1] == -(2 ** 100) and got["py"][6] == "héllo"
    assert isinstance(got["scalar_np"], np.float32) and got["scalar_np"] == 2.5
    assert isinstance(got["zero_d"], np.ndarray) and got["zero_d"].shape == ()
    assert isinstance(got["py"][8], bytearray)
    assert got[7] == "an int key"
    # Tied leaves are one array, as the general loader makes them.
    assert got["tied_a"] is got["tied_b"]
    assert want["tied_a"] is want["tied_b"]
    # Raw chunked arrays are views of the file's map (mmap on), else arrays of their own.
    mapped = compression is None and mmap is not False
    assert (got["big"].base is not None) == mapped == (want["big"].base is not None)
    assert got["big"].flags.writeable == (not mapped or mmap is True)  # ("r": read-only views)


def test_mapped_views_are_private_copies(tmp_path):
    w = np.arange(50_000, dtype=np.float32)
    p = str(tmp_path / "w.jtree")
    jtree.save({"w": w}, p, compression=None)
    got = jtree.load(p)
    got["w"][:10] = -1  # copy-on-write: this process's copy only
    np.testing.assert_array_equal(jtree.load(p)["w"], w)
    ro = jtree.load(p, mmap="r")["w"]
    with pytest.raises(ValueError):
        ro[0] = 1


def test_file_objects_bytes_and_open_files_take_the_plain_load(tmp_path, monkeypatch):
    tree = {"a": np.arange(10_000, dtype=np.float64), "b": [1, "x"]}
    p = str(tmp_path / "t.jtree")
    jtree.save(tree, p, compression=None)
    counting = Counting(monkeypatch)
    with open(p, "rb") as fo:
        same(jtree.load(fo), general_load(monkeypatch, p, mmap=False))
    same(jtree.loads(open(p, "rb").read()), general_load(monkeypatch, p, mmap=False))
    with jtree.open(p) as f:
        same(f.load(), general_load(monkeypatch, p))
        same(jtree.load(f), general_load(monkeypatch, p))
    assert counting.results == [True] * 4


@pytest.mark.parametrize("options", [
    dict(cast=np.float32), dict(framework="torch", mmap=False),
    # (JAX: with the suite's 8 devices; one CPU device takes the plain pass,
    # test_jax_cpu_loads.py.)
    dict(framework="jax"), dict(prune=True), dict(progress=lambda done, total: None),
])
def test_loads_with_options_take_the_general_loader(tmp_path, monkeypatch, options, request):
    if options.get("framework") in ("torch", "jax"):
        request.getfixturevalue(options["framework"])  # (fails under JTREE_TEST_REQUIRE_ALL)
    p = str(tmp_path / "t.jtree")
    jtree.save({"a": np.arange(4.0), "b": 1}, p)
    counting = Counting(monkeypatch)
    jtree.load(p, **options)
    assert counting.results == []


def test_a_pickled_leaf_is_declined_to_the_general_loader(tmp_path, monkeypatch):
    p = str(tmp_path / "p.jtree")
    jtree.save({"a": np.arange(3), "obj": {1, 2}}, p, allow_pickle=True)
    counting = Counting(monkeypatch)
    with pytest.raises(jtree.InvalidArgumentError, match="allow_pickle=True"):
        jtree.load(p)
    assert jtree.load(p, allow_pickle=True)["obj"] == {1, 2}
    assert counting.results == [False, False]


def test_bfloat16_without_ml_dtypes_is_declined(tmp_path, monkeypatch):
    p = str(tmp_path / "b.jtree")
    x = np.array([1.5, -2.0], dtype=ml_dtypes.bfloat16)
    jtree.save({"x": x}, p)
    monkeypatch.setattr(_dtypes, "ml_dtypes", lambda: None)
    monkeypatch.setattr(_dtypes, "_NUMPY_OF", {})
    counting = Counting(monkeypatch)
    with pytest.raises(jtree.NotSupportedError, match="'x'.*needs the ml_dtypes package"):
        jtree.load(p)  # the general loader's clear error
    assert counting.results == [False]
    got = jtree.load(p, cast=np.float32)["x"]  # (from the bit pattern)
    assert got.dtype == np.float32 and got.tolist() == [1.5, -2.0]


def test_the_memory_limits_are_the_general_loaders(tmp_path, monkeypatch):
    p = str(tmp_path / "l.jtree")
    jtree.save({"w": np.zeros((100, 100), np.float32), "s": "x" * 5000, "n": 3}, p)
    counting = Counting(monkeypatch)
    with jtree.open(p, limits={"max_leaf_bytes": 4000}) as f:
        with pytest.raises(jtree.ResourceExhaustedError, match="'w'.*max_leaf_bytes"):
            f.load(mmap=False)
    with jtree.open(p, limits={"max_total_bytes": 42000}) as f:
        with pytest.raises(jtree.ResourceExhaustedError, match="'s'.*max_total_bytes"):
            f.load(mmap=False)
        assert f.load(keys="s")["s"] == "x" * 5000  # (a selection: the native pass too)
    with jtree.open(p, limits={"max_total_bytes": 45000}) as f:
        assert f.load(mmap=False)["s"] == "x" * 5000
    assert counting.results == [False, False, True, True]


def test_mapped_leaves_are_not_counted_against_the_limits(tmp_path, monkeypatch):
    p = str(tmp_path / "m.jtree")
    jtree.save({"w": np.ones((100, 100), np.float32)}, p, compression=None)
    counting = Counting(monkeypatch)
    with jtree.open(p, limits={"max_leaf_bytes": 1000}) as f:
        assert f.load()["w"].sum() == 10_000  # a view of the map: nothing allocated
        with pytest.raises(jtree.ResourceExhaustedError, match="max_leaf_bytes"):
            f.load(mmap=False)
    assert counting.results == [True, False]


def _flip_in_chunk(path, marker):
    data = bytearray(open(path, "rb").read())
    at = data.index(marker)
    data[at + 10] = 0xFF  # no UTF-8 byte
    open(path, "wb").write(bytes(data))


def test_a_str_that_is_not_utf8_is_the_general_loaders_corruption_error(tmp_path, monkeypatch):
    p = str(tmp_path / "s.jtree")
    text = "abcdefghij" * 20_000  # chunked, raw
    jtree.save({"a": [np.arange(3), {"s": text}]}, p, compression=None)
    _flip_in_chunk(p, b"abcdefghij")
    counting = Counting(monkeypatch)
    with pytest.raises(jtree.CorruptionError, match="checksum"):
        jtree.load(p)
    with pytest.raises(jtree.CorruptionError, match=r"a/1/s.*not UTF-8"):
        jtree.load(p, verify=False)
    assert counting.results == [False]  # (the first raised in the native read)


def test_a_damaged_array_chunk_is_a_corruption_error(tmp_path, monkeypatch):
    p = str(tmp_path / "d.jtree")
    jtree.save({"w": np.full(50_000, 3, np.int32)}, p, compression=None)
    data = bytearray(open(p, "rb").read())
    at = data.index(np.full(8, 3, np.int32).tobytes())
    data[at + 100] ^= 1
    open(p, "wb").write(bytes(data))
    for mmap in (True, False):
        with pytest.raises(jtree.CorruptionError, match="w"):
            jtree.load(p, mmap=mmap)


class Unregistered:
    def __init__(self, a):
        self.a = a


def test_custom_nodes_follow_strict(tmp_path, monkeypatch):
    name = "test_plain_load.Unregistered"
    # (Registered in copies of the registry's tables, which monkeypatch puts back.)
    monkeypatch.setattr(_registry, "_nodes_by_name", dict(_registry._nodes_by_name))
    monkeypatch.setattr(_registry, "_nodes_by_type", dict(_registry._nodes_by_type))
    jtree.register_pytree_node_serialization(
        Unregistered, serialized_name=name, serialize_auxdata=lambda aux: b"",
        deserialize_auxdata=lambda b: None,
        flatten_func=lambda o: ([o.a], None), unflatten_func=lambda aux, kids: Unregistered(*kids))
    p = str(tmp_path / "c.jtree")
    jtree.save({"c": Unregistered(np.arange(3))}, p)
    counting = Counting(monkeypatch)
    got = jtree.load(p)  # registered: the plain load asks Python for the node
    assert isinstance(got["c"], Unregistered)
    np.testing.assert_array_equal(got["c"].a, np.arange(3))
    del _registry._nodes_by_name[name]
    with pytest.raises(jtree.NotSupportedError, match=f"'c'.*{name}"):
        jtree.load(p)
    assert type(jtree.load(p, strict=False)["c"]) is list
    assert counting.results == [True, True]  # (the error raised while building: no decline)


def same_torch(a, b, torch, path="root"):
    """a and b are the same tree of tensors and values."""
    assert type(a) is type(b), path
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape and a.device == b.device, path
        assert torch.equal(a.view(-1).view(torch.uint8) if a.numel() else a,
                           b.view(-1).view(torch.uint8) if b.numel() else b), path
    elif isinstance(a, dict):
        assert list(a) == list(b), path
        for k in a:
            same_torch(a[k], b[k], torch, f"{path}/{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            same_torch(x, y, torch, f"{path}/{i}")
    else:
        assert a == b, path


@pytest.mark.parametrize("compression", ["zstd", None])
@pytest.mark.parametrize("mmap", [True, "r"])
@pytest.mark.parametrize("device", [None, "cpu"])
def test_the_plain_torch_load_equals_the_general_one(tmp_path, monkeypatch, torch, compression,
                                                     mmap, device):
    tied = torch.randn(40, 50)
    tree = {
        "w": torch.randn(300, 200), "bf16": torch.randn(1000).to(torch.bfloat16),
        "f8": torch.linspace(-2, 2, 17).to(torch.float8_e4m3fn),
        "u16": torch.tensor([0, 1, 65535], dtype=torch.int32).to(torch.uint16),
        "empty_bf16": torch.zeros(0, 3, dtype=torch.bfloat16),
        "i64": torch.tensor(7), "tied_a": tied, "tied_b": tied, "size": torch.Size([2, 3]),
        "py": [1, 2.5, "s", b"b", None, (True,)], "np_scalar": np.float32(1.5),
    }
    p = str(tmp_path / "t.jtree")
    jtree.save(tree, p, compression=compression)
    counting = Counting(monkeypatch)
    got = jtree.load(p, framework="torch", mmap=mmap, device=device)
    assert counting.results == [True]
    want = general_load(monkeypatch, p, framework="torch", mmap=mmap, device=device)
    same_torch(got, want, torch)
    assert torch.equal(got["w"], tree["w"]) and got["bf16"].dtype == torch.bfloat16
    assert type(got["size"]) is torch.Size and got["size"] == torch.Size([2, 3])
    assert got["tied_a"] is got["tied_b"]
    assert got["np_scalar"].shape == () and got["np_scalar"].item() == 1.5  # (a 0-d tensor)
    got["w"][0, 0] = 123.0  # writable (copy-on-write: the file is unchanged)
    assert jtree.load(p, framework="torch")["w"][0, 0] == tree["w"][0, 0]


def test_a_dtype_torch_lacks_is_declined_to_the_general_loader(tmp_path, monkeypatch, torch):
    p = str(tmp_path / "i4.jtree")
    jtree.save({"x": np.array([-8, 7], dtype=ml_dtypes.int4)}, p)
    counting = Counting(monkeypatch)
    with pytest.raises(jtree.NotSupportedError, match="'x'.*int4"):
        jtree.load(p, framework="torch")  # the general loader's clear error
    assert counting.results == [False]


CORPUS = [os.path.join(d, n) for d in (os.path.join(ROOT, "fuzz", "corpus", "python"),
                                       os.path.join(ROOT, "fuzz", "crashes", "python"))
          if os.path.isdir(d) for n in sorted(os.listdir(d))]


def outcome(load):
    """('ok', tree) or ('error', the jtree.Error); anything else raised is a failure."""
    try:
        return "ok", load()
    except jtree.Error as e:
        return "error", e


def test_the_plain_load_agrees_with_the_general_one_on_the_fuzz_corpus(tmp_path, monkeypatch):
    # Valid files of many kinds and hostile mutations of them (fuzz/python/fuzz_load.py's
    # corpus: a file, then 8 option bytes): both loaders load the same tree or both refuse.
    assert len(CORPUS) > 50
    agreed = {"ok": 0, "error": 0}
    for i, name in enumerate(CORPUS):
        data = open(name, "rb").read()[:-8]
        p = str(tmp_path / f"{i}.jtree")
        open(p, "wb").write(data)
        for kw in (dict(), dict(verify=False), dict(mmap=False, strict=False)):
            got = outcome(lambda: jtree.load(p, **kw))
            want = outcome(lambda: general_load(monkeypatch, p, **kw))
            assert got[0] == want[0], (name, kw, got[1], want[1])
            if got[0] == "ok":
                same(got[1], want[1], name)
            agreed[got[0]] += 1
    assert agreed["ok"] > 50 and agreed["error"] > 10, agreed  # (both kinds were met)
