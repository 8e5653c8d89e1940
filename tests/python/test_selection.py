"""Selection that cannot fail silently (issue 23 item 5): a keys= pattern or a target key that
matches nothing is a NotFoundError naming it, the file and the nearest key paths; prune=True
returns only what was selected."""
import numpy as np
import pytest

import jtree
from conftest import assert_same


@pytest.fixture
def ckpt(path):
    tree = {
        "params": {"dense": {"kernel": np.arange(6.0).reshape(2, 3), "bias": np.ones(3)},
                   "layers": [{"w": np.full(2, 7.0)}, {"w": np.full(3, 8.0)}]},
        "opt_state": (np.zeros(2), None),
        "step": 12,
        "empty": {},
        "nothing": None,
    }
    jtree.save(tree, path)
    return path, tree


@pytest.mark.parametrize("pattern, named, near", [
    ("params/dense/kernal", "params/dense/kernal", "params/dense/kernel"),  # a typo
    ("parms/*", "parms/*", "params"),                                       # a glob over a typo
    ("**/bais", "**/bais", "params/dense/bias"),                            # the last key's typo
    (["step", "stpe"], "stpe", "step"),                                     # one bad of two
])
def test_a_pattern_matching_nothing_is_not_found(ckpt, pattern, named, near):
    path, _ = ckpt
    with pytest.raises(jtree.NotFoundError) as e:
        jtree.load(path, keys=pattern)
    msg = str(e.value)
    assert repr(named) in msg and path in msg and "matched nothing" in msg
    assert repr(near) in msg.split("nearest:")[1], msg
    assert e.value.file == path
    if isinstance(pattern, list):
        assert "keys= pattern 'stpe' (nearest: 'step')" in msg  # only the bad one is named


def test_a_pattern_near_an_empty_key_is_not_found(tmp_path):
    # A key "" had the key path "", which splits into no keys: there was no last key to compare
    # the pattern's with (found by atheris: an IndexError instead of NotFoundError). Its path
    # is now "\\e" (test_empty_key.py); the root's "" still has no last key.
    path = str(tmp_path / "empty_key.jtree")
    jtree.save({"": np.arange(3), "a": np.arange(2)}, path)
    with pytest.raises(jtree.NotFoundError, match="matched nothing"):
        jtree.load(path, keys="*/0")


def test_every_unmatched_pattern_is_named(ckpt):
    path, _ = ckpt
    with pytest.raises(jtree.NotFoundError, match="'zz/a'.*'zz/b'.*matched nothing"):
        jtree.load(path, keys=["zz/a", "step", "zz/b"])


def test_patterns_that_match_count_whatever_else_matches(ckpt):
    path, tree = ckpt
    # An overlapping pattern, a None node, an empty container: each matched, no error.
    out = jtree.load(path, keys=["params/*", "params/dense/kernel", "nothing", "empty"])
    assert_same(out["params"]["dense"]["kernel"], tree["params"]["dense"]["kernel"])
    assert out["step"] is None and out["empty"] == {}


def test_a_lazy_file_and_a_subtree_check_too(ckpt):
    path, _ = ckpt
    with jtree.open(path) as f:
        with pytest.raises(jtree.NotFoundError, match="'params/dens/kernel'"):
            f.load(keys="params/dens/kernel")
        with pytest.raises(jtree.NotFoundError, match="matched nothing"):
            f["params"].load(keys="params/zzz")
        assert f["params"].load(keys="params/dense/bias")["dense"]["bias"].shape == (3,)


def test_a_target_naming_a_missing_key_is_not_found(ckpt):
    path, _ = ckpt
    with pytest.raises(jtree.NotFoundError) as e:
        jtree.load(path, {"params": {"dense": {"kernal": True}}})
    msg = str(e.value)
    assert "'kernal'" in msg and "nearest: ['kernel']" in msg and path in msg
    assert e.value.key_path == "params/dense/kernal"


def test_prune_returns_only_the_selected_entries(ckpt):
    path, tree = ckpt
    out = jtree.load(path, keys=["params/dense/kernel", "step"], prune=True)
    assert list(out) == ["params", "step"] and list(out["params"]) == ["dense"]
    assert list(out["params"]["dense"]) == ["kernel"] and out["step"] == 12
    # Lists and tuples keep their positions (None where nothing is loaded).
    out = jtree.load(path, keys=["params/layers/1/w", "opt_state/0"], prune=True)
    assert out == {"params": {"layers": [None, {"w": out["params"]["layers"][1]["w"]}]},
                   "opt_state": (out["opt_state"][0], None)}
    assert_same(out["params"]["layers"][1]["w"], tree["params"]["layers"][1]["w"])
    # A selected None leaf and a selected empty container stay.
    assert jtree.load(path, keys=["nothing", "empty"], prune=True) == {"empty": {},
                                                                       "nothing": None}
    # A target's None / False leaves are dropped too.
    out = jtree.load(path, {"params": {"dense": {"kernel": True, "bias": None}},
                            "step": False}, prune=True)
    assert list(out) == ["params"] and list(out["params"]["dense"]) == ["kernel"]
    # Without prune: the whole skeleton, Nones where nothing was selected.
    full = jtree.load(path, keys="step")
    assert full["params"]["dense"]["kernel"] is None and set(full) == set(tree)


def test_prune_gives_a_state_dict_subset_torch_accepts(path, torch):
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    jtree.save(model.state_dict(), path)
    fresh = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    before = fresh.state_dict()["2.weight"].clone()
    sub = jtree.load(path, keys="0.*", framework="torch", prune=True)
    assert sorted(sub) == ["0.bias", "0.weight"]
    missing, unexpected = fresh.load_state_dict(sub, strict=False)
    assert sorted(missing) == ["2.bias", "2.weight"] and unexpected == []
    assert torch.equal(fresh[0].weight, model[0].weight)
    assert torch.equal(fresh[2].weight, before)  # untouched
    with pytest.raises(jtree.NotFoundError, match=r"'0\.wieght'.*nearest: '0\.weight'"):
        jtree.load(path, keys="0.wieght", framework="torch", prune=True)


def _general_loader_only(monkeypatch):
    # The Python loader's walk, which loads selections that the native pass does not (to a
    # device, with a cast or a target, of a part of the file): tests/python/
    # test_selection_native.py compares the two.
    from jtree import _load_plain
    monkeypatch.setattr(_load_plain, "applies", lambda o: False)


@pytest.mark.parametrize("keys", [
    "params/dense/kernel", "params/layers/*/w", "params/layers/?", "**/w", "params/layers/[01]/w",
    ["opt_state/0", "step"], "params", "*/dense/*", "nothing", "empty", "opt_state/*",
])
@pytest.mark.parametrize("prune", [False, True])
def test_subtrees_a_selection_cannot_reach_are_not_walked(ckpt, keys, prune, monkeypatch):
    from jtree import _keypath, _load_plan

    _general_loader_only(monkeypatch)
    path, _ = ckpt
    looked = []
    selected = _load_plan.Loader.selected
    monkeypatch.setattr(_load_plan.Loader, "selected",
                        lambda self, p: looked.append(p) or selected(self, p))
    got = jtree.load(path, keys=keys, prune=prune)
    walked = list(looked)
    # The same load looking at every leaf (what loads did before subtrees were skipped).
    monkeypatch.setattr(_keypath.PatternSet, "may_select_below", lambda self, parts: True)
    looked.clear()
    want = jtree.load(path, keys=keys, prune=prune)
    assert_same(got, want)
    assert set(walked) <= set(looked)
    if keys == "params/dense/kernel":  # (nothing of params/layers or opt_state looked at)
        assert ("params", "layers", 0, "w") in looked and ("opt_state", 0) in looked
        assert not [p for p in walked if p[:2] == ("params", "layers") or p[0] == "opt_state"]


def test_a_selection_from_a_large_file_skips_what_it_cannot_reach(path, monkeypatch):
    from jtree import _load_plan

    _general_loader_only(monkeypatch)
    tree = {f"g{i}": {f"l{j}": np.full(3, i * 100 + j, np.int32) for j in range(50)}
            for i in range(40)}
    jtree.save(tree, path)
    looked = []
    selected = _load_plan.Loader.selected
    monkeypatch.setattr(_load_plan.Loader, "selected",
                        lambda self, p: looked.append(p) or selected(self, p))
    with jtree.open(path) as f:
        out = jtree.load(f, keys=["g7/l3", "g9/*"], prune=True)
        assert list(out) == ["g7", "g9"] and list(out["g7"]) == ["l3"]
        assert out["g7"]["l3"].tolist() == [703] * 3 and len(out["g9"]) == 50
        assert len(looked) == 100  # the leaves of g7 and g9, not the other 1,900
        # Nothing was made of the groups it did not look into (the open file's tree is made
        # as it is visited).
        groups = {c.key: c for c in f._root.children}
        assert groups["g3"]._children is None and groups["g7"]._children is not None
        full = jtree.load(f, keys="g7/l3")  # without prune: the whole skeleton, Nones
        assert set(full) == set(tree) and full["g3"]["l1"] is None
        assert full["g7"]["l3"].tolist() == [703] * 3
        assert len(looked) == 150  # (g7's leaves once more)
        # The skeleton is made natively, from the file's nodes: still no FileNode of g3's.
        assert groups["g3"]._children is None


class _Holder:
    def __init__(self, a, b):
        self.a, self.b = a, b


jtree.register_pytree_node_serialization(
    _Holder, serialized_name="test_selection.Holder", serialize_auxdata=lambda aux: b"",
    deserialize_auxdata=lambda b: None, flatten_func=lambda h: ({"a": h.a, "b": h.b}, None),
    unflatten_func=lambda aux, ch: _Holder(ch["a"], ch["b"]))


def _every_kind_of_container():
    import collections
    Point = collections.namedtuple("Point", ["x", "y"])
    w = np.arange(4.0)
    return {
        "skip": {"nt": Point(x=np.ones(2), y=[w, None]), "od": collections.OrderedDict(b=1, a=w),
                 "tup": (w, (), {"deep": [[np.zeros(1)]]}), "empty": {}, "list": [],
                 "holder": _Holder(w, {"z": 3}), "none": None},  # (w: one leaf, tied)
        "keep": {"x": np.arange(3)},
    }


@pytest.mark.parametrize("how", ["keys", "mask"])
def test_the_skeleton_of_what_is_not_loaded_is_what_the_walk_made(path, how, monkeypatch):
    """A subtree no keys= pattern reaches, or a False mask, is made in one native pass
    (Reader.none_tree): the same containers, classes and None leaves as the Python walk made
    (Loader.container with a False target), every kind of container included."""
    from jtree import _load_plan

    _general_loader_only(monkeypatch)
    tree = _every_kind_of_container()
    jtree.save(tree, path)
    load = (lambda: jtree.load(path, keys="keep/x")) if how == "keys" else \
        (lambda: jtree.load(path, {"skip": False, "keep": True}))
    calls = []
    native = _load_plan.Loader.none_tree
    monkeypatch.setattr(_load_plan.Loader, "none_tree",
                        lambda self, node, p: calls.append(p) or native(self, node, p))
    got = load()
    assert calls == [("skip",)]
    monkeypatch.setattr(_load_plan.Loader, "none_tree",
                        lambda self, node, p: self.container(node, False, p))
    want = load()
    assert_same(got["keep"], tree["keep"])
    skip = got["skip"]
    assert type(skip["nt"]).__name__ == "Point" and skip["nt"] == (None, [None, None])
    assert type(skip["od"]).__name__ == "OrderedDict" and list(skip["od"].items()) == [
        ("b", None), ("a", None)]
    assert skip["tup"] == (None, (), {"deep": [[None]]}) and skip["empty"] == {}
    assert skip["list"] == [] and skip["none"] is None
    assert isinstance(skip["holder"], _Holder) and skip["holder"].a is None
    assert skip["holder"].b == {"z": None}
    for key in skip:  # the same as the walk's, class by class
        g, w = skip[key], want["skip"][key]
        assert type(g) is type(w) or type(g).__name__ == type(w).__name__ == "Point", key
        if not isinstance(g, _Holder):
            assert g == w, key


def test_an_unregistered_node_in_a_skeleton_is_named_by_its_key_path(path):
    from jtree import _registry

    jtree.save({"keep": np.arange(2), "skip": {"inner": [1, _Holder(np.ones(2), 2)]}}, path)
    with _registry._lock:
        entry = _registry._nodes_by_name.pop("test_selection.Holder")
        del _registry._nodes_by_type[_Holder]
    try:
        with pytest.raises(jtree.NotSupportedError) as e:
            jtree.load(path, keys="keep")
        assert e.value.key_path == "skip/inner/1" and "test_selection.Holder" in str(e.value)
        assert e.value.file == path
        got = jtree.load(path, keys="keep", strict=False)  # loaded as a dict instead
        assert got["skip"] == {"inner": [None, {"a": None, "b": None}]}
    finally:
        with _registry._lock:
            _registry._nodes_by_name["test_selection.Holder"] = entry
            _registry._nodes_by_type[_Holder] = entry


def test_a_node_or_array_of_an_open_file_loads_as_its_subtree(ckpt):
    path, tree = ckpt
    with jtree.open(path) as f:
        assert_same(jtree.load(f["params"]), tree["params"])  # (as f["params"].load())
        kernel = tree["params"]["dense"]["kernel"]
        assert_same(jtree.load(f["params"]["dense"]["kernel"]), kernel)
        # Patterns stay the file's key paths.
        got = jtree.load(f["params"], keys="params/dense/*", prune=True)
        assert list(got) == ["dense"] and sorted(got["dense"]) == ["bias", "kernel"]
        with pytest.raises(jtree.NotFoundError, match="'params/zz'"):
            jtree.load(f["params"], keys="params/zz")
        spec = jtree.load_pytreedef(f["params"])
        assert sorted(spec) == ["dense", "layers"] and spec["dense"]["kernel"].shape == (2, 3)
        fut = jtree.nonblocking_load(f["params"]["dense"])
        assert sorted(fut.pytree) == ["bias", "kernel"]
        assert_same(fut.result(), tree["params"]["dense"])


def test_the_structure_of_a_part_inside_a_namedtuple(path):
    import collections
    Point = collections.namedtuple("Point", ["x", "y"])
    jtree.save({"p": Point(x={"a": np.arange(3)}, y=np.ones(2))}, path)
    with jtree.open(path) as f:
        assert jtree.load_pytreedef(f["p"]["x"])["a"].shape == (3,)
        assert jtree.load_pytreedef(f["p"]).y.shape == (2,)
        assert_same(jtree.load(f["p"]["x"]), {"a": np.arange(3)})
