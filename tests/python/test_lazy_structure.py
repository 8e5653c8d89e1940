"""The file's tree in Python is made as it is visited (jtree._structure.LazyTree): opening a
file and loading one leaf make Python objects only along the way, never for the whole tree,
and the result is the same as visiting everything."""
import threading

import numpy as np
import pytest

import jtree
from jtree._errors import InvalidArgumentError


def wide_tree(groups=50, per_group=20):
    """groups x per_group arrays, plus scalars, a tied weight and a namedtuple-free mix."""
    rng = np.random.default_rng(0)
    tree = {f"g{g:03d}": {f"p{p:02d}": {"mu": rng.standard_normal(8).astype(np.float32),
                                        "step": p}
                          for p in range(per_group)}
            for g in range(groups)}
    tree["meta"] = ["a", 1, 2.5, None, (3, b"x")]
    return tree


@pytest.fixture
def wide_file(tmp_path):
    t = wide_tree()
    p = str(tmp_path / "wide.jtree")
    jtree.save(t, p)
    return t, p


def made(f):
    """How many leaves the open file has made Python objects for."""
    return len(f._tree._leaves)


def test_open_makes_only_the_root(wide_file):
    _, p = wide_file
    with jtree.open(p) as f:
        assert made(f) == 0
        assert f._root._children is None  # not even the root's children yet


def test_one_leaf_makes_only_its_path(wide_file):
    t, p = wide_file
    with jtree.open(p) as f:
        out = jtree.load(f, {"g007": {"p03": {"mu": True}}})
        np.testing.assert_array_equal(out["g007"]["p03"]["mu"], t["g007"]["p03"]["mu"])
        # The children of the root, of g007 and of p03: 2 leaves made (p03's mu and step),
        # not the 2,000 of the file.
        assert made(f) == 2
        assert f["g011"]["p01"]["step"] == 1
        assert made(f) == 4


def test_lazy_walk_equals_a_full_walk(wide_file):
    t, p = wide_file
    spec = jtree.load_pytreedef(p)
    assert spec["g049"]["p19"]["mu"].shape == (8,)
    assert spec["meta"][4][1].kind == "bytes"
    out = jtree.load(p)
    np.testing.assert_array_equal(out["g049"]["p19"]["mu"], t["g049"]["p19"]["mu"])
    assert out["meta"] == ["a", 1, 2.5, None, (3, b"x")]
    # A partial walk first, then a full one, on the same open file: the same result.
    with jtree.open(p) as f:
        jtree.load(f, {"g000": True})
        assert made(f) == 2 * 20
        again = jtree.load(f)  # (the plain load, jtree._load_plain: no FileLeaf made)
        assert again["meta"] == out["meta"]
        np.testing.assert_array_equal(again["g020"]["p07"]["mu"], t["g020"]["p07"]["mu"])
        assert made(f) == 2 * 20
        walked = jtree.load(f, progress=lambda done, total: None)  # the general loader's walk
        assert walked["meta"] == out["meta"]
        np.testing.assert_array_equal(walked["g020"]["p07"]["mu"], t["g020"]["p07"]["mu"])
        assert made(f) == 2 * 50 * 20 + 5  # every leaf: "a", 1, 2.5, 3, b"x" in meta


def test_tied_leaves_are_one_object(tmp_path):
    w = np.arange(6, dtype=np.float32)
    p = str(tmp_path / "tied.jtree")
    jtree.save({"a": w, "b": w}, p)
    with jtree.open(p) as f:
        kids = f._root.children
        assert kids[0].leaf is kids[1].leaf


def test_closed_file_refuses_unvisited_parts(wide_file):
    _, p = wide_file
    f = jtree.open(p)
    f.close()
    with pytest.raises(InvalidArgumentError, match="closed"):
        f.keys()


def test_threads_share_one_set_of_children(wide_file):
    _, p = wide_file
    with jtree.open(p) as f:
        node = f._root
        seen = []
        barrier = threading.Barrier(8)

        def visit():
            barrier.wait()
            seen.append(node.children)

        threads = [threading.Thread(target=visit) for _ in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert all(s is seen[0] for s in seen)
        assert len(seen[0]) == 51


class CountingReader:
    """The native reader, counting the calls that make nodes."""

    def __init__(self, reader):
        self.reader, self.calls = reader, {}

    def __getattr__(self, name):
        self.calls[name] = self.calls.get(name, 0) + 1
        return getattr(self.reader, name)


def test_bulk_and_lazy_walks_agree(wide_file):
    _, p = wide_file
    with jtree.open(p) as a:
        counting = CountingReader(a._tree.reader)
        a._tree.reader = counting
        bulk = a.structure()  # nothing made yet: the structure is one native call...
        assert counting.calls == {"spec_tree": 1}
        assert made(a) == 0 and a._root._children is None  # ...without a FileNode or FileLeaf
        assert a.structure() == bulk
        whole = jtree.load(a)  # a plain full load is one native call (jtree._load_plain)...
        assert counting.calls == {"spec_tree": 2, "load_plain": 1}
        assert made(a) == 0  # ...without a FileNode or FileLeaf
        assert whole["g003"]["p07"]["step"] == 7
        # The general loader (progress= is its) makes the whole tree in one pass.
        whole = jtree.load(a, progress=lambda done, total: None)
        assert counting.calls["nodes"] == 1 and "children" not in counting.calls
        assert made(a) == 2005
        assert all(n._children is not None for n in a._root.children)
        assert whole["g003"]["p07"]["step"] == 7
    with jtree.open(p) as b:
        b.keys()  # the root's children made: the structure is still one native call
        before = made(b)
        counting = CountingReader(b._tree.reader)
        b._tree.reader = counting
        lazy = b.structure()
        assert counting.calls == {"spec_tree": 1}
        assert made(b) == before  # (and it makes no FileNode or FileLeaf)
    assert bulk == lazy
    assert bulk["g003"]["p07"]["step"].kind == "int"


def spec_of_file_nodes(path, strict=True):
    """load_pytreedef as it was before the native Reader built it: a walk over FileNodes
    (the Python builder that _load._spec_tree was, kept here as the reference)."""
    from jtree import _keypath as kp
    from jtree._load import rebuild_container
    from jtree._structure import DICT, LEAF, LIST, NONE, TUPLE

    def walk(node, path):
        if node.kind == LEAF:
            return node.leaf.spec()
        if node.kind == NONE:
            return None
        children = node.children
        values = [walk(c, path + (c.key if c.key is not None else i,))
                  for i, c in enumerate(children)]
        if node.kind == DICT:
            return dict(zip([c.key for c in children], values))
        if node.kind == LIST:
            return values
        if node.kind == TUPLE:
            return tuple(values)
        return rebuild_container(node.kind, node.type_name, node.aux,
                                 [c.key for c in children], values, strict=strict,
                                 file=f.name, key_path=kp.join(path))

    with jtree.open(path, strict=strict) as f:
        f._tree.fill_all(f._root)
        return walk(f._root, ())


class Hidden:
    def __init__(self, v):
        self.v = v

    def __repr__(self):
        return f"Hidden({self.v!r})"


jtree.register_pytree_node_serialization(
    Hidden, serialized_name="test.lazy.Hidden", serialize_auxdata=lambda a: b"aux",
    deserialize_auxdata=lambda b: None, flatten_func=lambda h: ({"v": h.v}, None),
    unflatten_func=lambda aux, ch: Hidden(ch["v"]))


@pytest.mark.parametrize("tree", [
    {"a": np.zeros((2, 3), np.float32), "b": [1, 2.5, None, (True, "s", b"x", 3j)], "c": {},
     "d": [], "e": (), "big": 1 << 80},
    [[], [[]], {"x": [None]}, ((),)],
    np.arange(5),
    None,
    "just a string",
], ids=["mixed", "empty-containers", "leaf-root", "none-root", "str-root"])
def test_native_spec_tree_equals_the_file_node_walk(tmp_path, tree):
    import collections
    p = str(tmp_path / "t.jtree")
    if isinstance(tree, dict):
        Point = collections.namedtuple("Point", ["x", "y"])
        tree = dict(tree, nt=Point(np.ones(3), {"q": [Point(1, 2)]}),
                    od=collections.OrderedDict(k=1), custom=[Hidden(np.arange(2))])
        tied = np.ones(4)
        tree["tied"] = [tied, tied]
    jtree.save(tree, p)
    new, old = jtree.load_pytreedef(p), spec_of_file_nodes(p)
    assert repr(new) == repr(old) and type(new) is type(old)
    if isinstance(tree, dict):
        assert new["tied"][0] is new["tied"][1]  # one spec for a leaf referred to twice
        assert isinstance(new["custom"][0], Hidden)


def test_native_spec_tree_names_an_unregistered_node_by_its_key_path(tmp_path):
    from jtree import _registry
    p = str(tmp_path / "t.jtree")
    jtree.save({"a": [1, {"b": Hidden(np.arange(2))}], "z": 0}, p)
    with _registry._lock:
        saved = _registry._nodes_by_name.pop("test.lazy.Hidden")
        _registry._nodes_by_type.pop(Hidden)
    try:
        for walk in (jtree.load_pytreedef, spec_of_file_nodes):
            with pytest.raises(jtree.NotSupportedError, match="'test.lazy.Hidden'") as e:
                walk(p)
            assert e.value.key_path == "a/1/b"
        loose = jtree.load_pytreedef(p, strict=False)
        assert loose == spec_of_file_nodes(p, strict=False)
        assert list(loose["a"][1]["b"]) == ["v"]
    finally:
        with _registry._lock:
            _registry._nodes_by_name["test.lazy.Hidden"] = saved
            _registry._nodes_by_type[Hidden] = saved


def test_leaf_specs_makes_the_rules_specs_and_refuses_bad_rows():
    # _jtree.leaf_specs (the one LeafSpec rule, FileLeaf.spec's and a nonblocking_save's):
    # an array keeps its shape, dtype and scalar flag; another leaf is its kind's name, with
    # the registered name only for a custom leaf; a bad row is an error, not a crash.
    from jtree import _dtypes, _structure as s
    f32 = _dtypes.TABLE["float32"][0]
    got = s.leaf_specs([(s.ARRAY, s.FLAG_SCALAR, f32, (), 4, "ignored"),
                        (s.ARRAY, 0, f32, [2, 3], 24, None),
                        (s.STR, s.FLAG_SCALAR, f32, (5,), 5, "ignored"),
                        (s.CUSTOM_LEAF, 0, None, (3,), 3, "my.Leaf")])
    assert got == [jtree.LeafSpec("array", (), np.dtype(np.float32), 4, True),
                   jtree.LeafSpec("array", (2, 3), np.dtype(np.float32), 24, False),
                   jtree.LeafSpec("str", nbytes=5),
                   jtree.LeafSpec("custom", nbytes=3, type_name="my.Leaf")]
    assert isinstance(got[1].shape, tuple)
    for bad, cls in [([(s.ARRAY, 0, f32, (), 4)], TypeError),
                     ([[s.ARRAY, 0, f32, (), 4, None]], TypeError),
                     ([(250, 0, None, (), 0, None)], ValueError),
                     ([(s.ARRAY, -1, f32, (), 0, None)], ValueError),
                     ([(s.ARRAY, 0, 300, (), 0, None)], ValueError),
                     ([(s.ARRAY, 0, f32, 5, 0, None)], TypeError), (5, TypeError)]:
        with pytest.raises(cls):
            s.leaf_specs(bad)
