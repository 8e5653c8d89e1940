"""The batched save (issue 17 item 5): the Python layer hands the whole flattened tree to the
native Builder as one table of ops (``Builder.build``), not a call per node. The files it
writes load back identically, ties included; the native calls of a save do not grow with the
number of leaves; a value the native Builder refuses is reported with its key path."""
import collections
import math

import numpy as np
import pytest

import jtree
from jtree import _jtree, _save
from jtree._deferred import Deferred
from jtree._structure import DICT, INT, LEAF, LIST, NONE
from conftest import assert_same, require

ml_dtypes = require("ml_dtypes")

Point = collections.namedtuple("Point", ["x", "y"])


def np_dtype(name):
    if name in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                "uint64", "float16", "float32", "float64", "complex64", "complex128"):
        return np.dtype(name)
    return np.dtype(getattr(ml_dtypes, name))


def some_array(name, shape, seed=0):
    """Elements of any dtype from valid bit patterns (small integers cast: finite floats)."""
    rng = np.random.default_rng(seed)
    n = math.prod(shape)
    dt = np_dtype(name)
    if name == "bool":
        return rng.integers(0, 2, n).astype(bool).reshape(shape)
    if name in ("int4", "uint4"):
        lo, hi = (-8, 8) if name == "int4" else (0, 16)
        return rng.integers(lo, hi, n).astype(dt).reshape(shape)
    if name.startswith(("float4", "float6", "float8")):
        return rng.integers(0, 4, n).astype(np.float32).astype(dt).reshape(shape)
    return rng.integers(0, 100, n).astype(dt).reshape(shape)


def count_native_calls(monkeypatch):
    """Counts every call into jtree._jtree (module functions and methods of its classes)
    made while the returned Counter is alive (monkeypatch undoes the wrapping)."""
    calls = collections.Counter()

    def wrap(name, fn):
        def counted(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)
        return counted

    for name in dir(_jtree):
        if name.startswith("__"):
            continue
        obj = getattr(_jtree, name)
        if isinstance(obj, type):
            for attr, member in list(vars(obj).items()):
                kind = type(member).__name__
                if attr.startswith("__"):
                    continue
                if kind == "nb_method":
                    monkeypatch.setattr(obj, attr, wrap(f"{name}.{attr}", member))
                elif kind == "nb_func":
                    monkeypatch.setattr(obj, attr, staticmethod(wrap(f"{name}.{attr}", member)))
        elif callable(obj):
            monkeypatch.setattr(_jtree, name, wrap(name, obj))
    return calls


def many_leaves(n):
    """{"layer<i>": {"w<j>": float32[4], ...}, ...} in dicts of 100, plus values of every kind."""
    tree = {f"layer{i}": {f"w{j}": np.full(4, i * 100 + j, np.float32)
                          for j in range(min(100, n - i * 100))}
            for i in range(math.ceil(n / 100))}
    tree["values"] = [1, 2 ** 80, 2.5, True, 1 + 2j, "s" * (n % 7), b"b", None, Point(1, 2)]
    return tree


# ---- the files load identically -------------------------------------------------------------

def test_every_dtype_inline_and_chunked(path):
    tree = {}
    for name in sorted(jtree._dtypes.TABLE):
        tree[name] = {"small": some_array(name, (3, 2)),  # inline in the header
                      "big": some_array(name, (300, 70), seed=1),  # chunked
                      "strided": some_array(name, (40, 30), seed=2)[::3, ::-2],
                      "empty": some_array(name, (0, 5)),
                      "scalar0d": some_array(name, ())}
    tree["np_scalar"] = np.float32(1.5)
    big_endian = np.arange(1000, dtype=">i4").reshape(10, 100)
    for compression in ("zstd", None):
        jtree.save(dict(tree, big_endian=big_endian), path, compression=compression,
                   chunk_bytes=4096)
        back = jtree.load(path)
        # (loaded in native byte order)
        np.testing.assert_array_equal(back.pop("big_endian"), big_endian)
        assert_same(back, tree)
        assert type(back["np_scalar"]) is np.float32
        for name in jtree._dtypes.TABLE:
            assert back[name]["big"].dtype == np_dtype(name)


def test_values_containers_and_metadata(path):
    tree = collections.OrderedDict(
        ints=[0, -1, 2 ** 63 - 1, -2 ** 63, 2 ** 63, -2 ** 63 - 1, 2 ** 200, -(2 ** 200)],
        floats=(0.0, -1.5, float("inf")), flags=[True, False], complex=1 - 3j,
        text="naïve ✓", data=b"\x00\xff" * 3000, raw=bytearray(b"xyz"),
        none=None, point=Point(x=np.arange(3), y=Point(None, "z")),
        nested={1: {-5: [(), [], {}]}, "k": Point([], ())})
    jtree.save(tree, path, metadata={"step": "7", "blob": b"\x01\x02"})
    back = jtree.load(path)
    assert_same(back, tree)
    assert type(back) is collections.OrderedDict
    # (a namedtuple class not importable by its module path loads as an equal one)
    assert type(back["point"]).__name__ == "Point" and back["point"].y._fields == ("x", "y")
    assert type(back["raw"]) is bytearray
    with jtree.open(path) as f:
        assert f.metadata == {"step": "7", "blob": b"\x01\x02"}  # (str as text: version 3)


def test_ties_stored_once_and_restored_shared(tmp_path):
    path = tmp_path / "ties.jtree"
    a = np.arange(10000, dtype=np.float32)
    t = some_array("bfloat16", (2000,))
    tree = {"a": a, "a_again": a, "same_view": a[:], "other_view": a[::2],
            "reinterpreted": a.view(np.int32), "copy": a.copy(),
            "list": [a, a], "t": t, "t_as_f16": t.view(np.float16), "t2": t}
    jtree.save(tree, path, compression=None)
    back = jtree.load(path)
    assert_same(back, tree)
    # a, a_again, same_view and list[0..1] are one leaf (the same memory and view)...
    assert back["a"] is back["a_again"] is back["same_view"] is back["list"][0] \
        is back["list"][1]
    assert back["t"] is back["t2"]
    # ...other views of the memory, other dtypes of it and copies are not.
    assert back["other_view"] is not back["a"]
    assert back["reinterpreted"] is not back["a"] and back["copy"] is not back["a"]
    assert back["t_as_f16"] is not back["t"]
    # Stored once: the file is as large as one without the tied entries (keys and a few
    # header bytes more), far from another 40 KB.
    alone = path.with_name("alone.jtree")
    jtree.save({k: v for k, v in tree.items() if k in ("a", "other_view", "reinterpreted",
                                                      "copy", "t", "t_as_f16")},
               alone, compression=None)
    assert path.stat().st_size - alone.stat().st_size < 1000


def test_ties_of_a_nonblocking_save_copy_once(path):
    a = np.arange(5000, dtype=np.float64)
    tree = {"a": a, "b": a, "c": a[::-1], "d": a.view(np.int64)}
    fut = jtree.nonblocking_save(tree, path)
    a[:] = -1  # after the snapshot: not in the file
    fut.result()
    back = jtree.load(path)
    assert back["a"] is back["b"]
    assert back["c"] is not back["a"] and back["d"] is not back["a"]
    np.testing.assert_array_equal(back["a"], np.arange(5000, dtype=np.float64))
    np.testing.assert_array_equal(back["c"], np.arange(5000, dtype=np.float64)[::-1])
    np.testing.assert_array_equal(back["d"], np.arange(5000, dtype=np.float64).view(np.int64))


class Box:
    def __init__(self, items, label):
        self.items, self.label = items, label


def test_custom_nodes_and_leaves(path):
    jtree.register_pytree_node_serialization(
        Box, serialized_name="test_batched_save.Box",
        serialize_auxdata=lambda label: label.encode(),
        deserialize_auxdata=lambda b: b.decode(),
        flatten_func=lambda b: (b.items, b.label),
        unflatten_func=lambda label, items: Box(list(items), label))
    a = np.ones((3, 3), np.int16)
    tree = {"box": Box([a, 7, Box([None, "x"], "inner")], "outer"), "a": a}
    jtree.save(tree, path)
    back = jtree.load(path)
    assert type(back["box"]) is Box and back["box"].label == "outer"
    np.testing.assert_array_equal(back["box"].items[0], a)
    assert back["box"].items[0] is back["a"]
    assert back["box"].items[1] == 7
    inner = back["box"].items[2]
    assert type(inner) is Box and inner.label == "inner" and inner.items == [None, "x"]


def test_deferred_leaves(path):
    fetched = []

    def fetch(i):
        def f():
            fetched.append(i)
            return np.full((50, 40), i, np.float32)
        return f

    leaves = [Deferred((50, 40), np.float32, fetch(i)) for i in range(5)]
    tree = {"d": leaves, "again": leaves[2]}
    jtree.save(tree, path, chunk_bytes=4000)
    assert sorted(fetched) == [0, 1, 2, 3, 4]  # each fetched once (the tie too)
    back = jtree.load(path)
    for i in range(5):
        np.testing.assert_array_equal(back["d"][i], np.full((50, 40), i, np.float32))
    assert back["again"] is back["d"][2]


def test_partial_write_keeps_ties_and_reuses_leaves(path):
    a = np.arange(100, dtype=np.int32)
    jtree.save({"x": a, "y": a, "z": {"k": 1, "s": "old"}, "l": [1, 2]}, path)
    jtree.save({"x": None, "y": None, "z": {"s": "new"}, "w": np.ones(3)}, path,
               partial_write=True, metadata={"m": "1"})
    back = jtree.load(path)
    assert back["x"] is back["y"]
    np.testing.assert_array_equal(back["x"], a)
    assert back["z"] == {"k": 1, "s": "new"} and back["l"] == [1, 2]
    np.testing.assert_array_equal(back["w"], np.ones(3))
    with jtree.open(path) as f:
        assert f.metadata == {"m": "1"}


def test_torch_and_dlpack_sources(path, torch):
    t = torch.arange(12, dtype=torch.bfloat16).reshape(3, 4)
    jtree.save({"t": t, "t2": t, "tt": t.t(), "c": torch.ones(2, dtype=torch.complex128),
                "b": torch.tensor([True, False])}, path)
    back = jtree.load(path, framework="torch")
    assert torch.equal(back["t"], t) and torch.equal(back["tt"], t.t())
    assert back["t"] is back["t2"]
    assert torch.equal(back["c"], torch.ones(2, dtype=torch.complex128))
    assert torch.equal(back["b"], torch.tensor([True, False]))


# ---- a bounded number of native calls -------------------------------------------------------

@pytest.mark.parametrize("kind", ["save", "nonblocking_save", "partial_write"])
def test_native_calls_do_not_grow_with_the_leaves(tmp_path, monkeypatch, kind):
    counts = {}
    for n in (10, 1500):
        p = tmp_path / f"{kind}{n}.jtree"
        tree = many_leaves(n)
        if kind == "partial_write":
            jtree.save(tree, p)
        calls = count_native_calls(monkeypatch)
        if kind == "save":
            jtree.save(tree, p)
        elif kind == "nonblocking_save":
            jtree.nonblocking_save(tree, p).result()
        else:
            tree["layer0"] = None  # kept from the file: REUSE ops
            tree["values"] = [5] + [None] * 8  # None: kept from the file
            jtree.save(tree, p, partial_write=True)
        counts[n] = dict(calls)
        monkeypatch.undo()
        assert_same(jtree.load(p)["values"][0], 1 if kind != "partial_write" else 5)
    if kind == "partial_write":
        # Reading the file's tree for the merge opens its containers one by one (a native
        # call per container, not per leaf: 100 leaves each here); the rest is constant.
        n_containers = 1500 // 100 + 3  # layers, the root, values and its Point
        assert counts[1500].pop("Reader.children") <= n_containers, counts
        counts[10].pop("Reader.children")
    assert counts[10] == counts[1500], counts
    assert counts[10].get("Builder.build") == 1, counts
    # One Builder.build and one write; a snapshot adds one data_addresses, the path's key
    # for ordering writes one local_path (jtree::is_local_path), a nonblocking_save's
    # structure one leaf_specs (all its LeafSpecs), an append reads the file first (Reader
    # calls, constant too).
    if kind == "nonblocking_save":
        assert counts[10].get("leaf_specs") == 1, counts
    most = {"partial_write": 13, "nonblocking_save": 5}.get(kind, 4)
    assert sum(counts[10].values()) <= most, counts


@pytest.mark.parametrize("kind", ["load", "load raw", "payloads", "File.load"])
def test_native_calls_of_a_load_do_not_grow_with_the_leaves(tmp_path, monkeypatch, kind):
    # The load's memory reservations are one MemoryBudget.try_reserve_many, not a
    # try_reserve per leaf (a 20,000-leaf load made 20,006 native calls).
    counts = {}
    for n in (10, 1500):
        p = tmp_path / f"{n}.jtree"
        tree = many_leaves(n)
        if kind == "payloads":  # a str and a bytes leaf per array leaf: all reserved
            tree = {k: {w: [str(a[0]), a.tobytes()] for w, a in v.items()}
                    for k, v in tree.items() if k != "values"}
        if kind == "load raw":  # chunked, raw: mapped
            jtree.save(tree, p, compression=None, inline_threshold=0)
        else:
            jtree.save(tree, p)
        calls = count_native_calls(monkeypatch)
        if kind == "File.load":
            with jtree.open(p) as f:
                back = f.load()
        else:
            back = jtree.load(p)
        counts[n] = dict(calls)
        monkeypatch.undo()
        assert_same(back, tree)
    assert counts[10] == counts[1500], counts
    assert counts[1500].get("MemoryBudget.try_reserve", 0) == 0, counts
    # Reader.open, node, nodes, leaves, memory_limits, MemoryBudget.try_reserve_many,
    # read_many (and map_leaves for mapped leaves), and a constant few key_path calls.
    assert sum(counts[1500].values()) <= 10, str(sorted(counts[1500].items()))



# ---- errors name the key path ---------------------------------------------------------------

def test_a_value_the_builder_refuses_names_its_key_path():
    # (Through the public API every value is checked before it reaches the Builder; a table
    # with a wrong value stands for a check the Python layer might miss.)
    from jtree._save import SLeaf, SNode
    bad = SNode(DICT, None, [
        SNode(LEAF, "a", leaf=SLeaf(INT, 1)),
        SNode(LIST, "b", [SNode(LEAF, None, leaf=SLeaf(INT, 2)),
                          SNode(DICT, None, [SNode(LEAF, 7, leaf=SLeaf(INT, "three"))])]),
    ])
    with pytest.raises(jtree.InvalidArgumentError) as e:
        _save.Emitter("f.jtree", -1, None).run(bad)
    assert "b/1/7" in str(e.value) and "f.jtree" in str(e.value)
    assert "int" in str(e.value)
    # A bad key (a float) on a container, deep in a list.
    bad = SNode(LIST, None, [SNode(DICT, None, []), SNode(DICT, None, [
        SNode(NONE, "x"), SNode(DICT, 1.5, [])])])
    with pytest.raises(jtree.InvalidArgumentError, match="keys must be None, str or int") as e:
        _save.Emitter("g.jtree", -1, None).run(bad)
    assert "1/1.5" in str(e.value) or "1/[1.5]" in str(e.value) or "1.5" in str(e.value)


@pytest.mark.parametrize("where, ops", [
    ("a", [(_save.OP_BEGIN, None, DICT, None, None), (_save.OP_INT, "a", "x"), (_save.OP_END,)]),
    ("b/1", [(_save.OP_BEGIN, None, DICT, None, None), (_save.OP_INT, "a", 1),
             (_save.OP_BEGIN, "b", LIST, None, None), (_save.OP_NONE, None),
             (_save.OP_INT, None, "x"), (_save.OP_END,), (_save.OP_END,)]),
    ("c", [(_save.OP_BEGIN, None, DICT, None, None),
           (_save.OP_BEGIN, "b", LIST, None, None), (_save.OP_NONE, None), (_save.OP_END,),
           (_save.OP_INT, "c", "x"), (_save.OP_END,)]),
])
def test_a_bad_value_names_its_op_key_path(where, ops):
    # The native Builder names the file and the key path of the op it refuses (an int leaf
    # whose value is a str): a jtree error that is also the TypeError it was.
    with pytest.raises(jtree.InvalidArgumentError) as e:
        _jtree.Builder().build(ops, file="f.jtree")
    assert isinstance(e.value, TypeError)
    assert (e.value.file, e.value.key_path) == ("f.jtree", where)
    assert str(e.value).startswith(f"f.jtree: at '{where}': ")


def test_a_malformed_table_is_refused():
    b = _jtree.Builder()
    with pytest.raises(ValueError, match="op"):
        b.build([(99,)])
    assert b.failed_op == 0
    b = _jtree.Builder()
    with pytest.raises(ValueError, match="TIED"):
        b.build([(_save.OP_BEGIN, None, LIST, None, None), (_save.OP_TIED, None, 0)])
    assert b.failed_op == 1
    b = _jtree.Builder()
    with pytest.raises(TypeError):
        b.build("not a list")
    b = _jtree.Builder()
    b.build([(_save.OP_NONE, None)])
    with pytest.raises(ValueError, match="already"):
        b.build([(_save.OP_NONE, None)])
