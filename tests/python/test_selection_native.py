"""keys= selections of a whole file are loaded by the native pass (Reader.load_plain with a
KeyPathPatterns, bindings/python/src/node_selection.h) with the rules of the Python loader's
walk, which still loads the selections the native pass does not (to a device, with a cast or a
target, of a part of the file). Here both load the same file with many patterns, with and
without prune: the same trees (every kind of container, None nodes, empty containers, int and
empty keys, tied leaves), the same NotFoundError for patterns that match nothing."""
import collections
import random

import numpy as np
import pytest

import jtree
from jtree import _load_plain

Point = collections.namedtuple("Point", ["x", "y"])


# (A custom node with children "a" and "b", registered by that module.)
from test_selection import _Holder as Box  # noqa: E402


def rich_tree():
    rng = np.random.default_rng(3)
    tied = rng.standard_normal((40, 30)).astype(np.float32)  # chunked
    return {
        "params": {"dense": {"kernel": np.arange(6.0).reshape(2, 3), "bias": np.ones(3)},
                   "layers": [{"w": np.full(2, 7.0), "b": np.zeros(1)}, {"w": np.full(3, 8.0)}]},
        "opt": (np.zeros(2), None, {}, [np.int32(4)]),
        "nt": Point(x=np.arange(3), y=[np.ones(2), None]),
        "od": collections.OrderedDict(b=1, a=np.arange(2)),
        "box": Box(np.arange(4), {"z": "text", "e": []}),
        "empty": {},
        "nothing": None,
        7: "an int key",
        "": np.arange(5),
        "tied_a": tied,
        "tied_b": tied,
        "step": 12,
        "big": rng.standard_normal(50_000).astype(np.float32),
    }


def canon(x):
    """A comparable form of a loaded tree: classes, keys in order, dtypes, shapes, bytes."""
    if isinstance(x, np.ndarray):
        return ("array", x.dtype.str, x.shape, x.tobytes(), x.flags.writeable)
    if isinstance(x, np.generic):
        return ("scalar", x.dtype.str, x.tobytes())
    if isinstance(x, tuple) and hasattr(type(x), "_fields"):
        return ("namedtuple", type(x).__name__, x._fields, [canon(v) for v in x])
    if isinstance(x, Box):
        return ("box", canon(x.a), canon(x.b))
    if isinstance(x, dict):  # (OrderedDict too, told apart by the class name)
        return (type(x).__name__, [(k, canon(v)) for k, v in x.items()])
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [canon(v) for v in x])
    return (type(x).__name__, x)


def general(monkeypatch, *args, **kw):
    with monkeypatch.context() as m:
        m.setattr(_load_plain, "applies", lambda o: False)
        return jtree.load(*args, **kw)


def native(monkeypatch, *args, **kw):
    taken = []
    real = _load_plain.load
    with monkeypatch.context() as m:
        m.setattr(_load_plain, "load", lambda *a: taken.append(1) or real(*a))
        got = jtree.load(*args, **kw)
    assert taken, "the native pass was not taken"
    return got


FIXED = ["params/dense/kernel", "params/layers/*/w", "params/layers/?", "**/w", "**",
         "", "opt/1", "opt/2", "opt/*", "nt", "nt/y/1", "od/a", "box/b/z", "box/*", "empty",
         "nothing", "7", "\\e", "tied_a", "tied_*", "step", ["params/dense/bias", "step"],
         "params/layers/[01]/b", "*/dense", "**/e", "box/b/e", "zz", ["step", "zz/a"],
         "params/dense/kernel/0", "**/nothing"]


def _random_patterns(rng, n):
    parts = ["params", "layers", "dense", "*", "?", "**", "0", "1", "w", "b", "[ab]", "t*",
             "nt", "y", "od", "box", "opt", "7", "\\e", "x"]
    out = []
    for _ in range(n):
        one = "/".join(rng.choice(parts) for _ in range(rng.randint(1, 4)))
        out.append(one if rng.random() < 0.7 else [one, "/".join(
            rng.choice(parts) for _ in range(rng.randint(1, 3)))])
    return out


@pytest.mark.parametrize("prune", [False, True])
def test_native_selections_are_the_walks(path, prune, monkeypatch):
    tree = rich_tree()
    jtree.save(tree, path)
    for keys in FIXED + _random_patterns(random.Random(7 + prune), 120):
        try:
            want = general(monkeypatch, path, keys=keys, prune=prune)
        except jtree.NotFoundError as e:
            with pytest.raises(jtree.NotFoundError) as got_error:
                native(monkeypatch, path, keys=keys, prune=prune)
            assert str(got_error.value) == str(e), keys
            continue
        got = native(monkeypatch, path, keys=keys, prune=prune)
        assert canon(got) == canon(want), (keys, prune)
        if isinstance(got, dict) and got.get("tied_a") is not None:
            if got.get("tied_b") is not None:
                assert got["tied_a"] is got["tied_b"]  # (tied: one array, as there)


def test_native_selections_as_torch_tensors(path, torch, monkeypatch):
    jtree.save(rich_tree(), path)
    for keys, prune in [("params/**", True), ("**/w", False), ("tied_*", True)]:
        got = native(monkeypatch, path, keys=keys, prune=prune, framework="torch")
        want = general(monkeypatch, path, keys=keys, prune=prune, framework="torch")
        flat_got, flat_want = _flat(got), _flat(want)
        assert [p for p, _ in flat_got] == [p for p, _ in flat_want]
        assert any(isinstance(a, torch.Tensor) for _, a in flat_got)
        for (_, a), (_, b) in zip(flat_got, flat_want):
            if isinstance(a, torch.Tensor):
                assert a.dtype == b.dtype and torch.equal(a, b)
            else:
                assert a == b


def _flat(x, path=()):
    """[(key path, leaf)] of a loaded tree, with the container classes in the paths."""
    if isinstance(x, Box):
        return _flat({"a": x.a, "b": x.b}, path + ("Box",))
    if isinstance(x, dict):
        return [p for k, v in x.items() for p in _flat(v, path + (type(x).__name__, k))]
    if isinstance(x, (list, tuple)):
        return [p for i, v in enumerate(x) for p in _flat(v, path + (type(x).__name__, i))]
    return [(path, x)]


def test_a_native_selection_makes_no_node_of_the_file(path):
    tree = {f"g{i}": {f"l{j}": np.full(3, i * 100 + j, np.int32) for j in range(50)}
            for i in range(40)}
    jtree.save(tree, path)
    with jtree.open(path) as f:
        got = jtree.load(f, keys=["g7/l3", "g9/*"], prune=True)
        assert list(got) == ["g7", "g9"] and list(got["g7"]) == ["l3"]
        assert got["g7"]["l3"].tolist() == [703] * 3 and len(got["g9"]) == 50
        full = jtree.load(f, keys="**/l3")
        assert set(full) == set(tree) and full["g3"]["l1"] is None
        assert full["g3"]["l3"].tolist() == [303] * 3
        assert f._root._children is None  # (the Python tree of the file was never made)
        with pytest.raises(jtree.NotFoundError, match="'g7/l99'.*nearest: 'g7/l9'"):
            jtree.load(f, keys=["g7/l3", "g7/l99"])


def test_unselected_leaves_the_native_pass_cannot_load_do_not_decline_it(path, monkeypatch):
    # A pickled leaf left out by the selection is never looked at: the native pass loads the
    # rest (the whole file would go to the general loader, which needs allow_pickle=True).
    jtree.save({"a": np.arange(3), "obj": {1, 2}}, path, allow_pickle=True)
    got = native(monkeypatch, path, keys="a")
    assert got["obj"] is None and got["a"].tolist() == [0, 1, 2]
    with pytest.raises(jtree.InvalidArgumentError, match="allow_pickle=True"):
        jtree.load(path, keys="obj")  # (selected: the general loader's clear error)


@pytest.mark.parametrize("prune", [False, True])
def test_parts_of_a_file_load_natively_as_the_walk_loads_them(path, prune, monkeypatch):
    # jtree.load(f["params"]) and the like: the subtree of one node, in the native pass, with
    # key paths (for patterns and errors) that go on from the part's own.
    jtree.save(rich_tree(), path)
    parts = [("params",), ("params", "layers"), ("params", "layers", 1), ("opt",), ("nt",),
             ("od",), ("box",), ("big",), ("tied_b",), (7,)]
    patterns = [None, "**/w", "params/layers/1", "params/dense/*", "opt/3", "nt/y/0",
                "box/b/*", "zz", "**"]
    with jtree.open(path) as f:
        for part in parts:
            node = f
            for k in part:
                node = node[k]
            for keys in patterns:
                if keys is None and prune:
                    continue
                kw = {} if keys is None else dict(keys=keys, prune=prune)
                try:
                    want = general(monkeypatch, node, **kw)
                except jtree.NotFoundError as e:
                    with pytest.raises(jtree.NotFoundError) as got_error:
                        native(monkeypatch, node, **kw)
                    assert str(got_error.value) == str(e), (part, keys)
                    continue
                got = native(monkeypatch, node, **kw)
                assert canon(got) == canon(want), (part, keys, prune)
