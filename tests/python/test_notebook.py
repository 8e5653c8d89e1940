"""Every cell of the jax.tree.save / jax.tree.load proposal notebook, as a test.

The proposal saved to a directory; jtree saves to one file, so `tempdir` becomes a file path.
Where the proposal failed (the custom leaf cell, None -> array in incremental writes) the test
checks that jtree does what the cell meant. Each test names its cell.
"""
import collections
import functools
import json
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import jtree
from conftest import assert_same, require

jax = require("jax")
jnp = jax.numpy


def _dataclass_node(name, data_fields, meta_fields, serialized_name, dumps, loads):
    """A JAX dataclass pytree node registered for serialization, as the notebook does."""
    cls = dataclass(type(name, (), {"__annotations__": {f: Any for f in data_fields + meta_fields}}))
    cls = jax.tree_util.register_dataclass(cls, data_fields=data_fields, meta_fields=meta_fields)
    return jtree.register_pytree_node_serialization(
        cls, serialized_name=serialized_name, serialize_auxdata=dumps, deserialize_auxdata=loads)


def test_cell_register_a_custom_node_and_save_it(path, capsys):
    # "Register a custom node": class D, aux data through JSON (with a print), then
    # save(D(1, 2)); load_pytreedef; load.
    def json_dumps(aux_data):
        print(f"hello from json_dumps: {aux_data}")
        return json.dumps(aux_data).encode("utf-8")

    @functools.partial(jtree.register_pytree_node_serialization, serialized_name="class_D",
                       serialize_auxdata=json_dumps, deserialize_auxdata=json.loads)
    @functools.partial(jax.tree_util.register_dataclass, data_fields=["a", "b"], meta_fields=[])
    @dataclass
    class D:
        a: int
        b: int

    jtree.save(D(1, 2), path)
    assert "hello from json_dumps" in capsys.readouterr().out
    spec = jtree.load_pytreedef(path)
    assert isinstance(spec, D) and spec.a.kind == "int" and spec.b.kind == "int"
    assert jtree.load(path) == D(1, 2)


def test_cell_bytearray_leaf(path):
    jtree.save(bytearray(b"hello"), path)
    out = jtree.load(path)
    assert type(out) is bytearray and out == bytearray(b"hello")


def _simple_data():
    return [jnp.array(1), {"world": [jnp.ones((2, 1024, 1024)), (jnp.zeros(3), jnp.ones(4))]},
            jnp.ones(5)]


def test_cell_simple_use_case(path):
    # Cells [2]-[3]: float64 JAX arrays (JAX_ENABLE_X64) saved and restored; all equal.
    with jax.enable_x64(True):
        assert jax.typeof(jnp.ones(10)).dtype == jnp.float64
        data = _simple_data()
        jtree.save(data, path)
        restored = jtree.load(path)
        same = jax.tree.map(lambda x, y: bool(jnp.all(x == y)), data, restored)
        assert jax.tree.leaves(same) == [True] * 5
        assert restored[1]["world"][0].dtype == np.float64
        as_jax = jtree.load(path, framework="jax")
        assert isinstance(as_jax[1]["world"][0], jax.Array)
        assert jax.tree.structure(as_jax) == jax.tree.structure(data)


def test_cell_load_pytreedef_gives_shapes_and_dtypes(path):
    # Cell [4]: the structure with a shape/dtype per array, no data.
    with jax.enable_x64(True):
        jtree.save(_simple_data(), path)
    spec = jtree.load_pytreedef(path)
    assert spec[0].shape == () and spec[0].dtype == np.int64
    assert spec[1]["world"][0].shape == (2, 1024, 1024)
    assert spec[1]["world"][0].dtype == np.float64
    assert [s.shape for s in spec[1]["world"][1]] == [(3,), (4,)]
    assert spec[2].shape == (5,)
    assert type(spec[1]["world"][1]) is tuple


def test_cell_the_checkpoint_is_one_file_with_a_readable_structure(path, tmp_path):
    # Cell [5] listed a pytreedef.json and a directory of arrays; jtree writes one file whose
    # structure is read from its header alone.
    rng = np.random.default_rng(0)
    with jax.enable_x64(True):
        data = _simple_data()
        data[1]["world"][0] = jnp.asarray(rng.standard_normal((2, 1024, 1024)))  # incompressible
        jtree.save(data, path)
    assert [p.name for p in tmp_path.iterdir()] == ["t.jtree"]
    with jtree.open(path) as f:
        size = f.info()["file_size"]
        assert f.structure()[1]["world"][0].shape == (2, 1024, 1024)
        assert f.io_stats()["bytes_read"] < size / 10  # no array data read


def test_cell_partial_read_with_the_structure_and_an_int_mask(path):
    # Cell [11]: load with pytree=structure (everything), then the commented-out mask that keeps
    # only the integer leaves.
    big = np.random.default_rng(1).standard_normal((2, 1024, 1024))  # 16 MiB, incompressible
    with jax.enable_x64(True):
        data = _simple_data()
        data[1]["world"][0] = jnp.asarray(big)
        jtree.save(data, path)
    structure = jtree.load_pytreedef(path)
    full = jtree.load(path, pytree=structure)
    assert np.array_equal(full[1]["world"][0], big)
    mask = jax.tree.map(lambda x: x if x.dtype.kind == "i" else None, structure)
    with jtree.open(path) as f:
        before = f.io_stats()["bytes_read"]
        part = jtree.load(f, pytree=mask)
        read = f.io_stats()["bytes_read"] - before
    assert part[0] == 1 and part[1]["world"][0] is None and part[2] is None
    assert read < 1024  # none of the 16 MiB leaf (nor the others) was read
    with jtree.open(path) as f:  # and the check can fail: loading everything reads it all
        before = f.io_stats()["bytes_read"]
        jtree.load(f)
        assert f.io_stats()["bytes_read"] - before >= f.info()["stored_bytes"] > 8 << 20


def test_cell_mask_from_a_condition_on_the_structure(path):
    # `pytree_mask = jax.tree.map(condition_fn, load_pytreedef(...)); load(pytree=mask)`.
    jtree.save({"w": np.ones((4, 4), np.float32), "step": np.int64(7), "name": "run"}, path)

    def condition_fn(spec):
        return spec if spec.kind != "array" or spec.dtype.kind != "f" else None

    mask = jax.tree.map(condition_fn, jtree.load_pytreedef(path))
    out = jtree.load(path, pytree=mask)
    assert out == {"w": None, "step": np.int64(7), "name": "run"}
    assert type(out["step"]) is np.int64


def test_cell_nonblocking_save_then_nonblocking_load(path):
    arr = jnp.ones(10)
    fut = jtree.nonblocking_save(arr, path)
    while not fut.done():
        time.sleep(1e-3)
    fut.result()
    fut = jtree.nonblocking_load(path)
    assert fut.pytree.shape == (10,) and fut.pytree.dtype == np.float32
    assert np.array_equal(fut.result(), np.ones(10, np.float32))


def test_cell_custom_node_with_meta_fields(path):
    CustomNode = _dataclass_node("CustomNode", ["a", "b"], ["op"], "CustomNode",
                                 json.dumps, json.loads)
    data = ["hello", {"world": ["!", (1, b"data")]}, None, CustomNode(1, 2, "hi")]
    jtree.save(data, path)
    out = jtree.load(path)
    assert out[:3] == data[:3]
    assert isinstance(out[3], CustomNode) and (out[3].a, out[3].b, out[3].op) == (1, 2, "hi")


def test_cell_static_custom_leaf_and_custom_node(path):
    @functools.partial(jtree.register_pytree_node_serialization, serialized_name="CustomLeaf",
                       serialize_auxdata=lambda p: json.dumps(p.a),
                       deserialize_auxdata=lambda x: CustomLeaf(json.loads(x)))
    @jax.tree_util.register_static
    @dataclass
    class CustomLeaf:
        a: int = 2

    CustomNode = _dataclass_node("CustomNode", ["a", "b"], ["op"], "CustomNode",
                                 json.dumps, json.loads)
    data = ["hello", {"world": ["!", (1, 2)]}, None, (CustomLeaf(), CustomNode(1, 2, "hi"))]
    assert len(jax.tree.flatten(data)[0]) == 6
    jtree.save(data, path)
    out = jtree.load(path)
    assert out[3][0] == CustomLeaf(2)
    assert out[3][1] == CustomNode(1, 2, "hi")
    assert out[:3] == data[:3]


def test_cell_custom_leaf_autonomous_driving_map(path):
    # The proposal's cell failed (NameError on a pybind module); the Python class works here.
    class AutonomousDrivingMap:
        def __init__(self, chunks: int):
            self.lines = [["blob" for _ in range(j)] for j in range(chunks)]

        @staticmethod
        def serialize(self):
            return json.dumps(self.lines)

        @staticmethod
        def deserialize(data):
            (a := AutonomousDrivingMap(0)).lines = json.loads(data)
            return a

    jtree.register_pytree_leaf_serialization(
        AutonomousDrivingMap, serialized_name="AutonomousDrivingMap",
        serialize_leaf=AutonomousDrivingMap.serialize,
        deserialize_leaf=AutonomousDrivingMap.deserialize)
    data = ["hello", {"world": ["!", (1, b"data")]}, None, AutonomousDrivingMap(5)]
    jtree.save(data, path)
    out = jtree.load(path)
    assert out[:3] == data[:3]
    assert isinstance(out[3], AutonomousDrivingMap) and out[3].lines == data[3].lines
    assert jtree.load_pytreedef(path)[3].type_name == "AutonomousDrivingMap"


def test_cell_unregistered_custom_node_saves_as_a_dataclass(path):
    # The proposal refuses this cell's node (registered with JAX only). jtree saves classes
    # registered with jax.tree_util.register_dataclass without a second registration (issue 23
    # item 3): the data fields as children, the meta fields in the node's aux data.
    @functools.partial(jax.tree_util.register_dataclass, data_fields=["a", "c"],
                       meta_fields=["op"])
    @dataclass
    class UnregisteredCustomNode:
        op: str
        a: Any
        c: int

    tree = {"dataclass": UnregisteredCustomNode("tanh", jax.random.normal(jax.random.key(0), (7,)), 5),
            "a": 1}
    jtree.save(tree, path)
    out = jtree.load(path)
    assert type(out["dataclass"]) is UnregisteredCustomNode and out["a"] == 1
    assert out["dataclass"].op == "tanh" and out["dataclass"].c == 5
    np.testing.assert_array_equal(out["dataclass"].a, np.asarray(tree["dataclass"].a))
    assert type(jtree.load_pytreedef(path)["dataclass"]) is UnregisteredCustomNode


def test_cell_incremental_writing(path):
    # Including the None -> array step, where the proposal raised AttributeError, and the
    # assertion it had to comment out.
    incremental_tree = [None, None, None]
    jtree.save(incremental_tree, path)
    incremental_tree[0] = 1
    jtree.save(incremental_tree, path, partial_write=True)
    ret = jtree.load(path)
    assert ret[0] == 1 and ret[1] is None and ret[2] is None
    incremental_tree[0] = None
    incremental_tree[1] = 4
    jtree.save(incremental_tree, path, partial_write=True)
    ret = jtree.load(path)
    assert ret[0] == 1 and ret[1] == 4 and ret[2] is None
    incremental_tree[0], incremental_tree[2] = None, jnp.ones(4)
    jtree.save(incremental_tree, path, partial_write=True)
    ret = jtree.load(path)
    assert ret[0] == 1 and ret[1] == 4
    np.testing.assert_allclose(ret[2], jnp.ones(4))
    assert jtree.open(path).info()["generation"] == 3


def test_cell_incremental_writing_with_literal_trees(path):
    jtree.save([None, None, None], path)
    assert jtree.load(path) == [None, None, None]
    jtree.save([1, None, None], path, partial_write=True)
    assert jtree.load(path) == [1, None, None]
    jtree.save([None, 4, None], path, partial_write=True)
    assert jtree.load(path) == [1, 4, None]
    jtree.save([None, None, jnp.ones(10)], path, partial_write=True)
    out = jtree.load(path)
    assert out[:2] == [1, 4] and np.array_equal(out[2], np.ones(10, np.float32))


def test_cell_dict_key_order_is_kept(path):
    # "Careful! PyTree utils do not preserve key order": jax.tree sorts keys; jtree does not.
    d = {"c": 1, "a": 2}
    d2 = jax.tree.unflatten(jax.tree.structure(d), jax.tree.flatten(d)[0])
    assert list(d2) == ["a", "c"]  # what the proposal ran into
    jtree.save(d, path)
    assert list(jtree.load(path)) == ["c", "a"]


def test_cell_ordered_dict(path):
    d = collections.OrderedDict({"c": 1, "a": 2})
    d2 = jax.tree.unflatten(jax.tree.structure(d), jax.tree.flatten(d)[0])
    assert list(d2) == ["c", "a"]
    jtree.save(d, path)
    out = jtree.load(path)
    assert type(out) is collections.OrderedDict and list(out.items()) == [("c", 1), ("a", 2)]


def test_cell_nonblocking_save_pytree_and_split_loads(path):
    # nonblocking_save of an OrderedDict; fut.pytree; load; load_pytreedef; load the arrays and
    # the other leaves separately and put them back together.
    odict = collections.OrderedDict
    fut = jtree.nonblocking_save(odict({"c": jnp.ones(100), "a": 2, "none": None}), path)
    assert list(fut.pytree) == ["c", "a", "none"]
    assert fut.pytree["c"].shape == (100,) and fut.pytree["a"].kind == "int"
    fut.result()
    assert_same(jtree.load(path), odict({"c": np.ones(100, np.float32), "a": 2, "none": None}))
    pytree_def = jtree.load_pytreedef(path)
    arr_tree = jax.tree.map(lambda x: x if x.is_array else None, pytree_def)
    other_tree = jax.tree.map(lambda x: x if not x.is_array else None, pytree_def)
    arrays = jtree.load(path, pytree=arr_tree)
    others = jtree.load(path, pytree=other_tree)
    assert arrays["a"] is None and others["c"] is None and others["a"] == 2
    together = jax.tree.map(lambda x, y: x if x is not None else y, arrays, others,
                            is_leaf=lambda x: x is None)
    assert_same(together, odict({"c": np.ones(100, np.float32), "a": 2, "none": None}))


def test_cell_nonblocking_load_polling(path):
    jtree.save(collections.OrderedDict(c=jnp.ones(100), a=2, none=None), path)
    ret = jtree.nonblocking_load(path)
    while not ret.done():
        pass
    ret = ret.result()
    assert list(ret) == ["c", "a", "none"] and ret["a"] == 2


def test_cell_extended_safe_modules(path):
    # OrderedDict round trip, and a FrozenDict-like mapping type: JAX-registered, then
    # registered for serialization (no importlib on names read from the file).
    with jax.enable_x64(True):
        jtree.save(collections.OrderedDict(a=1, b=jnp.ones(10)), path)
        restored = jtree.load(path)
    assert restored["a"] == 1 and restored["b"].dtype == np.float64

    class FrozenDict(collections.abc.Mapping):
        def __init__(self, *args, **kw):
            self._d = dict(*args, **kw)

        def __getitem__(self, k):
            return self._d[k]

        def __iter__(self):
            return iter(self._d)

        def __len__(self):
            return len(self._d)

    jax.tree_util.register_pytree_with_keys(
        FrozenDict,
        lambda d: (tuple((jax.tree_util.DictKey(k), v) for k, v in d.items()), tuple(d)),
        lambda keys, values: FrozenDict(zip(keys, values)))
    with pytest.raises(jtree.InvalidArgumentError, match="FrozenDict"):
        jtree.save(FrozenDict(a=1, b=jnp.ones(10)), path)
    jtree.register_pytree_node_serialization(
        FrozenDict, serialized_name="test.FrozenDict",
        serialize_auxdata=lambda keys: json.dumps(list(keys)),
        deserialize_auxdata=lambda b: tuple(json.loads(b)))
    jtree.save(FrozenDict(a=1, b=jnp.ones(10)), path)
    out = jtree.load(path)
    assert isinstance(out, FrozenDict) and out["a"] == 1 and out["b"].shape == (10,)
    with jtree.open(path) as f:
        assert f.keys() == ["a", "b"]  # the children keep the JAX key paths
