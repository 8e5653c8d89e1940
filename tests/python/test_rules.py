"""One owner per decision (issue 21): the C++ library decides, the Python package and the jtree
command ask it. Each test checks that the C++ owner and a Python or CLI surface agree: the
memory budget of a load (jtree::MemoryBudget), key-path escaping (jtree/key_path.h), slice
resolution (jtree::resolve_index, shared by LazyArray and `jtree get`), local path vs URL
(jtree::is_local_path) and the node/leaf/codec numbers (from the C++ enums)."""
import json
import os
import random
import subprocess

import numpy as np
import pytest

import jtree
from jtree import _api, _jtree, _keypath, _structure
from jtree._errors import IndexOutOfRangeError
from jtree._index import box_of as _box_of

CLI = os.path.join(os.path.dirname(jtree.__file__), "_bin", "jtree")


# ---- memory budget -----------------------------------------------------------------------------

def test_budget_is_per_call_across_several_reads(path):
    # Four 4000-byte leaves; one load may allocate 12000 bytes in total.
    tree = {f"a{i}": np.full(1000, i, np.float32) for i in range(4)}
    jtree.save(tree, path)
    with jtree.open(path, limits={"max_total_bytes": 12000, "max_leaf_bytes": 4000}) as f:
        got = f.load(keys=["a0", "a1", "a2"])  # exactly the budget, over three reads
        assert got["a3"] is None and got["a2"][0] == 2
        with pytest.raises(jtree.ResourceExhaustedError,
                           match=r"needs 4000 bytes; with the 12000 this call already "
                                 r"allocated .* 12000 in total \(max_total_bytes\)") as e:
            f.load()
        assert e.value.file == path and e.value.key_path == "a3"
        # Each call counts its own: the File never runs out.
        for _ in range(5):
            assert f.load(keys=["a1", "a2", "a3"])["a3"][0] == 3
        # A slice is one call of its own, bounded the same way.
        assert f["a0"][:].shape == (1000,)
    with jtree.open(path, limits={"max_leaf_bytes": 3999}) as f:
        with pytest.raises(jtree.ResourceExhaustedError,
                           match=r"needs 4000 bytes, over the limit of 3999 per leaf "
                                 r"\(max_leaf_bytes\)"):
            f["a0"][:]


def test_budget_object_is_the_cpp_rule():
    b = _jtree.MemoryBudget(100, 250)
    assert b.try_reserve(100) is None and b.try_reserve(100) is None
    why = b.try_reserve(100)
    assert "max_total_bytes" in why and "with the 200" in why
    assert b.reserved == 200  # a refused reservation takes nothing
    assert "max_leaf_bytes" in b.try_reserve(101)
    assert b.try_reserve(50) is None and b.reserved == 250
    assert "max_leaf_bytes" in _jtree.MemoryBudget(2 ** 63, 2 ** 64 - 1).try_reserve(2 ** 70)


def test_budget_reserves_a_list_in_order_up_to_the_first_that_does_not_fit():
    b = _jtree.MemoryBudget(100, 250)
    assert b.try_reserve_many([]) is None and b.reserved == 0
    assert b.try_reserve_many([100, 50]) is None and b.reserved == 150
    i, why = b.try_reserve_many([10, 101, 5])  # the one over max_leaf_bytes, by index
    assert i == 1 and "max_leaf_bytes" in why
    assert b.reserved == 160  # the ones before it stay reserved, the ones after it are not
    i, why = b.try_reserve_many([90, 1])
    assert i == 1 and "max_total_bytes" in why and b.reserved == 250
    assert b.try_reserve_many([2 ** 70])[0] == 0  # (saturated: over every limit)
    with pytest.raises(TypeError):
        b.try_reserve_many([1.5])


# ---- key paths ---------------------------------------------------------------------------------

ODD_KEYS = ["a/b", "c\\d", "\\", "/", "", "e\\/f", "/\\/", "plain", "é/ü", "\\\\x//"]


def test_key_paths_with_every_escape_agree_with_the_reader(path):
    tree = {k: {k: [np.int8(i), {k: i}]} for i, k in enumerate(ODD_KEYS)}
    tree[7] = {-3: "int keys"}
    jtree.save(tree, path)
    with jtree.open(path) as f:
        r = f._reader
        # Every node's path from C++ (Reader.path: Tree::path) equals the Python join of
        # its keys, and splits back into them.
        parts = {0: ()}
        for i, (kind, key, *_rest) in enumerate(r.nodes()):
            if i:
                parent = next(p for p in range(i - 1, -1, -1) if p in parts
                              and i in [c for c, *_ in r.children(p)])
                pos = [c for c, *_ in r.children(parent)].index(i)
                parts[i] = parts[parent] + (key if key is not None else pos,)
            assert r.path(i) == _keypath.join(parts[i])
            if parts[i] != ("",):  # (the path of a top-level key "" is the root's, "")
                assert _keypath.split(r.path(i)) == [str(p) for p in parts[i]]
        for k in ODD_KEYS:
            assert f.at(_keypath.join([k, k, 1, k])) == ODD_KEYS.index(k)
        assert f.at("7/-3") == "int keys"
    # The jtree command prints the same paths.
    out = json.loads(subprocess.run([CLI, "ls", "--json", path], capture_output=True, text=True,
                                    check=True).stdout)
    listed = {leaf["path"] for leaf in out["leaves"]}
    assert _keypath.join(["a/b", "a/b", 1, "a/b"]) in listed
    assert _keypath.join(["\\\\x//", "\\\\x//", 0]) in listed
    assert "7/-3" in listed


def test_key_path_escapes_and_errors():
    assert _keypath.escape("a/b\\c") == "a\\/b\\\\c"
    assert _keypath.join(["x", 3, -2, "y/"]) == "x/3/-2/y\\/"
    assert _keypath.join([True, 2 ** 70, 1.5]) == f"True/{2 ** 70}/1.5"
    assert _keypath.join([]) == "" and _keypath.split("") == []
    for k in ODD_KEYS + ["\udcff", "\ud800x", "a\x00b"]:  # lone surrogates pass through
        assert _keypath.split(_keypath.join([k, k])) == [k, k]
    with pytest.raises(jtree.InvalidArgumentError, match="unfinished escape"):
        _keypath.split("a/b\\")


# ---- slice resolution --------------------------------------------------------------------------

def _random_index(rng, shape):
    def bound(n):
        return rng.choice([None, rng.randint(-n - 3, n + 3)])
    items = []
    for n in shape:
        r = rng.random()
        if r < 0.25 and n:
            items.append(rng.randint(-n, n - 1))
        elif r < 0.35:
            items.append(np.int64(rng.randint(-n - 2, n + 2)) if not n else slice(None))
        else:
            items.append(slice(bound(n), bound(n), rng.choice([None, 1, 2, 3, -1, -2, -5])))
    items = items[:rng.randint(0, len(items))]
    if rng.random() < 0.3:
        items.insert(rng.randint(0, len(items)), Ellipsis)
    if rng.random() < 0.3:
        items.insert(rng.randint(0, len(items)), None)
    return tuple(items)


def test_box_of_agrees_with_numpy():
    rng = random.Random(21)
    for shape in [(7,), (5, 6), (4, 0, 3), (2, 3, 4, 5), ()]:
        a = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
        for _ in range(300):
            index = _random_index(rng, shape)
            try:
                want = a[index]
            except IndexError:
                with pytest.raises(IndexOutOfRangeError):
                    _box_of(index, shape, "f", "w")
                continue
            begin, end, post = _box_of(index, shape, "f", "w")
            box = a[tuple(slice(b, e) for b, e in zip(begin, end))]
            np.testing.assert_array_equal(box[post], want, err_msg=str(index))


def test_lazy_slices_agree_with_the_cli(path, tmp_path):
    rng = random.Random(7)
    w = np.arange(40 * 50, dtype=np.float32).reshape(40, 50)
    jtree.save({"w": w}, path, chunk_bytes=1024)  # many chunks: boxes cut across them
    out = str(tmp_path / "s.npy")
    cases = ["0", "-1", "3:17", "-5:", ":-30, 7", "10:2", "-100:100, -50:3", "39, -1", ""]
    for _ in range(20):
        s, e = rng.randint(-45, 45), rng.randint(-45, 45)
        cases.append(f"{s}:{e}, {rng.randint(-50, 49)}")
    with jtree.open(path) as f:
        for c in cases:
            r = subprocess.run([CLI, "get", "-q", "-o", out, path, f"w[{c}]"],
                               capture_output=True, text=True)
            index = tuple(int(p) if ":" not in p else slice(*[int(x) if x.strip() else None
                                                               for x in p.split(":")])
                          for p in c.split(",") if p.strip())
            try:
                want = f["w"][index]
            except IndexError as e:
                assert r.returncode == 1 and str(e).split(": ")[-1] in r.stderr, (c, r.stderr)
                continue
            assert r.returncode == 0, (c, r.stderr)
            np.testing.assert_array_equal(np.load(out), want, err_msg=c)
            np.testing.assert_array_equal(want, w[index], err_msg=c)
    r = subprocess.run([CLI, "get", path, "w[0, 99]"], capture_output=True, text=True)
    assert r.returncode == 1 and "index 99 is out of bounds for axis 1 with size 50" in r.stderr


# ---- local path vs URL -------------------------------------------------------------------------

@pytest.mark.parametrize("given, local", [
    ("ckpt.jtree", "ckpt.jtree"),
    ("runs/a://b.jtree", "runs/a://b.jtree"),  # not a scheme before '://': a path
    ("file:///tmp/x%20y.jtree", "/tmp/x y.jtree"),
    ("FILE://localhost/tmp/z", "/tmp/z"),
    ("s3://bucket/key", None),
    ("HTTPS://host/f.jtree", None),
    ("gs://bucket/k", None),
])
def test_local_path_is_the_cpp_rule(given, local):
    assert _jtree.local_path(given) == local
    key = _api._path_key(given)
    assert key == (os.path.abspath(local) if local is not None else given)


def test_a_path_with_colon_slash_slash_saves_and_loads_locally(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.makedirs("runs/a:/", exist_ok=True)
    futures = [jtree.nonblocking_save({"x": np.full(3, i)}, "runs/a://b.jtree")
               for i in range(3)]
    for fut in futures:
        fut.result()
    assert jtree.load("runs/a://b.jtree")["x"].tolist() == [2, 2, 2]  # in order, locally
    assert os.path.exists(tmp_path / "runs" / "a:" / "b.jtree")


# ---- constants ---------------------------------------------------------------------------------

def test_constants_come_from_the_cpp_enums(path):
    assert _jtree.NODE_KINDS == {"dict": 1, "list": 2, "tuple": 3, "namedtuple": 4,
                                 "OrderedDict": 5, "None": 6, "custom": 7, "leaf": 8}
    assert _structure.LEAF_KIND_NAMES[_structure.CUSTOM_LEAF] == "custom"
    assert {_structure.LEAF_KIND_NAMES[v] for v in _jtree.LEAF_KINDS.values()} == {
        "array", "int", "float", "bool", "complex", "str", "bytes", "bytearray", "custom",
        "pickle"}
    # The numbers Python gives the Builder are the ones the reader and the CLI report.
    jtree.save({"d": {"l": [1, (2.0, None)], "s": "x"}, "a": np.float32(1.5),
                "z": np.zeros(10000, np.float32)}, path, compression="zstd")
    with jtree.open(path) as f:
        kinds = [n[0] for n in f._reader.nodes()]
        assert kinds[0] == _structure.DICT and _structure.LIST in kinds
        assert _structure.TUPLE in kinds and _structure.NONE in kinds
        leaves = f._reader.leaves()
        assert any(lt[0] == _structure.ARRAY and lt[1] & _structure.FLAG_SCALAR for lt in leaves)
        assert any(lt[0] == _structure.STR for lt in leaves)
        assert any(lt[8] == _structure.CODEC_ZSTD for lt in leaves)
    out = json.loads(subprocess.run([CLI, "ls", "--json", path], capture_output=True, text=True,
                                    check=True).stdout)
    assert {leaf["kind"] for leaf in out["leaves"]} >= {"array", "int", "float", "str", "None"}
