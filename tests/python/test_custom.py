"""Custom nodes and leaves, with and without JAX; namedtuples restored without imports."""
import collections
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jtree
from conftest import assert_same


class Pair:
    def __init__(self, left, right, tag):
        self.left, self.right, self.tag = left, right, tag


class Bag:
    def __init__(self, *items):
        self.items = list(items)


jtree.register_pytree_node_serialization(
    Pair, serialized_name="test.Pair",
    serialize_auxdata=lambda tag: tag.encode(), deserialize_auxdata=lambda b: b.decode(),
    flatten_func=lambda p: ({"left": p.left, "right": p.right}, p.tag),
    unflatten_func=lambda tag, ch: Pair(ch["left"], ch["right"], tag))
jtree.register_pytree_node_serialization(
    Bag, serialized_name="test.Bag", serialize_auxdata=lambda aux: b"",
    deserialize_auxdata=lambda b: None,
    flatten_func=lambda b: (b.items, None), unflatten_func=lambda aux, ch: Bag(*ch))


def test_custom_nodes_without_jax(path):
    tree = {"p": Pair(np.arange(3), Bag(1, "two", Pair(None, 3.5, "in")), "out")}
    jtree.save(tree, path)
    out = jtree.load(path)["p"]
    assert isinstance(out, Pair) and out.tag == "out"
    np.testing.assert_array_equal(out.left, np.arange(3))
    assert isinstance(out.right, Bag) and out.right.items[:2] == [1, "two"]
    inner = out.right.items[2]
    assert isinstance(inner, Pair) and inner.left is None and inner.right == 3.5
    with jtree.open(path) as f:
        assert f["p"].kind == "custom" and f["p"].type_name == "test.Pair"
        assert f["p"].keys() == ["left", "right"]  # keyed children
        assert f.at("p/right/2/right") == 3.5      # unkeyed children by position
    # A target tree may use the custom type itself.
    part = jtree.load(path, {"p": Pair(True, None, "x")})
    assert isinstance(part["p"], Pair) and part["p"].right is None


def test_errors_inside_custom_nodes_name_the_key_path(path):
    with pytest.raises(jtree.InvalidArgumentError) as e:
        jtree.save({"p": Pair(1, Bag(0, object()), "t")}, path)
    assert e.value.key_path == "p/right/1"


def test_serializers_must_return_bytes_or_str(path):
    class Odd:
        pass

    jtree.register_pytree_leaf_serialization(Odd, serialized_name="test.Odd",
                                             serialize_leaf=lambda o: 42,
                                             deserialize_leaf=lambda b: Odd())
    with pytest.raises(jtree.InvalidArgumentError, match="serialize_leaf returned int"):
        jtree.save([Odd()], path)


def test_registering_a_name_again_replaces_it(path):
    class V1:
        pass

    class V2:
        pass

    jtree.register_pytree_leaf_serialization(V1, serialized_name="test.V", serialize_leaf=lambda o: b"1",
                                             deserialize_leaf=lambda b: ("v1", b))
    jtree.save(V1(), path)
    jtree.register_pytree_leaf_serialization(V2, serialized_name="test.V", serialize_leaf=lambda o: b"2",
                                             deserialize_leaf=lambda b: ("v2", b))
    assert jtree.load(path) == ("v2", b"1")
    with pytest.raises(jtree.InvalidArgumentError, match="V1"):
        jtree.save(V1(), path)  # V1 is no longer registered


def test_decorator_forms(path):
    @jtree.register_pytree_leaf_serialization(serialized_name="test.Point",
                                              serialize_leaf=lambda p: json.dumps([p.x, p.y]),
                                              deserialize_leaf=lambda b: Point(*json.loads(b)))
    class Point:
        def __init__(self, x, y):
            self.x, self.y = x, y

    jtree.save([Point(1, 2)], path)
    p = jtree.load(path)[0]
    assert isinstance(p, Point) and (p.x, p.y) == (1, 2)


def test_jax_nodes_with_key_paths(path, jax):
    from dataclasses import dataclass
    from typing import Any

    @jtree.register_pytree_node_serialization(serialized_name="test.Layer",
                                              serialize_auxdata=lambda aux: json.dumps(list(aux)),
                                              deserialize_auxdata=lambda b: tuple(json.loads(b)))
    @jax.tree_util.register_dataclass
    @dataclass
    class Layer:
        kernel: Any
        bias: Any
        name: str = dataclasses_field_static("dense")

    class Seq:  # registered without keys: children by position
        def __init__(self, *layers):
            self.layers = layers

    jax.tree_util.register_pytree_node(Seq, lambda s: (s.layers, None), lambda aux, ch: Seq(*ch))
    jtree.register_pytree_node_serialization(Seq, serialized_name="test.Seq",
                                             serialize_auxdata=lambda a: b"",
                                             deserialize_auxdata=lambda b: None)
    model = Seq(Layer(np.ones((2, 3)), np.zeros(3), "a"), Layer(np.ones((3, 1)), None, "b"))
    jtree.save({"model": model}, path)
    with jtree.open(path) as f:
        assert f.at("model/0/kernel").shape == (2, 3)
        assert f["model"][1].keys() == ["kernel", "bias"]
    out = jtree.load(path)["model"]
    assert isinstance(out, Seq) and [l.name for l in out.layers] == ["a", "b"]
    assert out.layers[1].bias is None
    assert jax.tree.structure(out) == jax.tree.structure(model)
    part = jtree.load(path, keys="model/*/kernel")
    assert part["model"].layers[0].bias is None and part["model"].layers[0].kernel.shape == (2, 3)
    with pytest.raises(jtree.InvalidArgumentError) as e:
        jtree.save({"model": Seq(Layer(np.ones(1), {1, 2}, "c"))}, path)
    assert e.value.key_path == "model/0/bias"


def dataclasses_field_static(default):
    import dataclasses
    return dataclasses.field(default=default, metadata={"static": True})


def test_namedtuples_restore_without_importing_their_module(path):
    NT = collections.namedtuple("Config", ["lr", "layers"])
    NT.__module__ = "a_module_that_does_not_exist.sub"
    tree = {"cfg": NT(0.1, [NT(1, 2)])}
    jtree.save(tree, path)
    script = textwrap.dedent(f"""
        import sys, jtree
        out = jtree.load({path!r})
        assert "a_module_that_does_not_exist" not in sys.modules
        cfg = out["cfg"]
        assert type(cfg).__name__ == "Config" and cfg._fields == ("lr", "layers")
        assert cfg.lr == 0.1 and cfg.layers[0].layers == 2
        assert type(cfg) is type(cfg.layers[0])  # one class per name and fields
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr
    # With a target, the caller's class is used.
    out = jtree.load(path, {"cfg": NT(True, [NT(True, True)])})
    assert type(out["cfg"]) is NT and type(out["cfg"].layers[0]) is NT
    assert jtree.load_pytreedef(path)["cfg"].lr.kind == "float"


def test_odd_namedtuple_names_and_fields_from_a_file(path):
    # Field names that are not identifiers (a foreign or hostile file): refused, never renamed
    # (issue 20: renaming made t._1 silently hold another field) and never exec'd; a type name
    # that is not an identifier only names the class NamedTuple.
    from jtree import _structure
    with pytest.raises(ValueError, match="'not valid' is not a Python identifier"):
        _structure.namedtuple_type("x.Odd", ("ok", "not valid", "def"))
    with pytest.raises(ValueError, match="'def' is not a Python identifier"):
        _structure.namedtuple_type("x.Odd", ("ok", "def"))
    cls = _structure.namedtuple_type("x.class", ("ok", "fine"))
    assert cls.__name__ == "NamedTuple" and cls._fields == ("ok", "fine")
    assert _structure.namedtuple_type("m.Good", ("a",)).__name__ == "Good"
