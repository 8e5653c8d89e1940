"""Dataclasses registered with JAX (jax.tree_util.register_dataclass, flax.struct.dataclass)
save and load without a jtree registration: the same class comes back, static fields too."""
import dataclasses
import subprocess
import sys

import numpy as np
import pytest

import jtree
from conftest import assert_same, require  # noqa: F401


@pytest.fixture
def classes():
    """Module-level dataclasses (a load finds them by module and name), made once JAX and
    flax are known to be there."""
    jax = require("jax")
    flax_struct = require("flax.struct")
    g = globals()
    if "Params" not in g:
        @dataclasses.dataclass
        class Params:
            w: object
            b: object
            units: int = dataclasses.field(default=4, metadata={"static": True})
            act: str = dataclasses.field(default="relu", metadata={"static": True})

        jax.tree_util.register_dataclass(Params)

        @flax_struct.dataclass
        class TrainState:
            step: object
            params: object
            opt: object
            name: str = flax_struct.field(pytree_node=False, default="state")

        @dataclasses.dataclass
        class Pair:
            a: object
            b: object

        # A dataclass JAX flattens with its own functions (not by field): not ours to take.
        jax.tree_util.register_pytree_node(Pair, lambda p: ((p.a, p.b), None),
                                           lambda _aux, ch: Pair(*ch))
        for cls in (Params, TrainState, Pair):
            cls.__qualname__ = cls.__name__
            cls.__module__ = __name__
            g[cls.__name__] = cls
    return g["Params"], g["TrainState"], g["Pair"]


def _forget(*classes):
    """Drops jtree's registrations of these classes, as in a fresh process."""
    from jtree import _registry  # noqa: PLC0415

    for cls in classes:
        entry = _registry._nodes_by_type.pop(cls, None)
        if entry is not None:
            _registry._nodes_by_name.pop(entry.name, None)


def _state(classes):
    import jax.numpy as jnp  # noqa: PLC0415

    Params, TrainState, _ = classes
    layer = Params(jnp.arange(6.0).reshape(2, 3), np.ones(3, np.float32), units=3, act="gelu")
    return TrainState(step=jnp.int32(12), params={"dense": layer, "layers": [layer, Params(
        jnp.zeros((1, 1)), jnp.ones(1))]}, opt=(np.zeros(2), None), name="run-1")


def _check(back, state, classes):
    Params, TrainState, _ = classes
    assert type(back) is TrainState and back.name == "run-1"
    assert type(back.params["dense"]) is Params
    assert back.params["dense"].units == 3 and back.params["dense"].act == "gelu"
    assert type(back.params["layers"][1]) is Params and back.params["layers"][1].units == 4
    np.testing.assert_array_equal(np.asarray(back.params["dense"].w),
                                  np.asarray(state.params["dense"].w))
    assert int(back.step) == 12
    assert back.opt[1] is None


def test_register_dataclass_and_flax_struct_round_trip(classes, path):
    state = _state(classes)
    jtree.save(state, path)
    _check(jtree.load(path), state, classes)
    back = jtree.load(path, framework="jax")
    _check(back, state, classes)
    import jax  # noqa: PLC0415

    assert isinstance(back.params["dense"].w, jax.Array)
    # The same tree structure as JAX sees it.
    assert jax.tree.structure(back) == jax.tree.structure(state)


def test_the_plain_jax_load_rebuilds_the_dataclasses(classes, path, monkeypatch):
    # Where the process's one JAX device is a CPU, the load is the native plain pass (its
    # containers rebuilt by the same callback): the same classes, as the general loader's.
    import jax  # noqa: PLC0415

    from jtree import _load_plain, _placement  # noqa: PLC0415

    state = _state(classes)
    jtree.save(state, path)
    dev = jax.devices("cpu")[0]
    monkeypatch.setattr(_placement, "only_jax_device", lambda: (dev, ""))
    plain = []
    real = _load_plain.load
    monkeypatch.setattr(_load_plain, "load", lambda *a: plain.append(1) or real(*a))
    back = jtree.load(path, framework="jax")
    assert plain == [1]
    _check(back, state, classes)
    assert isinstance(back.params["dense"].w, jax.Array)
    assert jax.tree.structure(back) == jax.tree.structure(state)


def test_found_again_by_name_without_a_registration(classes, path):
    """A new process has no jtree registration: the load finds the classes by the names in
    the file among the imported modules."""
    state = _state(classes)
    jtree.save(state, path)
    _forget(*classes)
    _check(jtree.load(path), state, classes)
    _forget(*classes)
    spec = jtree.load_pytreedef(path)
    assert type(spec) is classes[1] and spec.params["dense"].w.shape == (2, 3)
    # A target of the class (its instances, before any save in this process).
    _forget(*classes)
    part = jtree.load(path, dataclasses.replace(state, opt=None))
    assert type(part) is classes[1] and part.opt is None
    np.testing.assert_array_equal(np.asarray(part.params["dense"].b), np.ones(3))


def test_a_module_not_imported_is_never_imported(classes, path):
    state = _state(classes)
    jtree.save(state, path)
    code = ("import sys, jtree\n"
            "try:\n"
            f"    jtree.load({path!r})\n"
            "except jtree.NotSupportedError as e:\n"
            "    msg = str(e)\n"
            "    assert 'import that module' in msg and \"'test_jax_dataclass'\" in msg, e\n"
            "else:\n"
            "    raise SystemExit('loaded without the module')\n"
            f"t = jtree.load({path!r}, strict=False)\n"
            "assert t['name'] == 'run-1' and t['params']['dense']['act'] == 'gelu', t\n"
            "assert 'test_jax_dataclass' not in sys.modules\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_name_that_is_not_a_jax_dataclass_is_refused(classes, path):
    Params = classes[0]
    jtree.save({"p": Params(np.ones(2), np.zeros(2))}, path)
    _forget(Params)

    @dataclasses.dataclass
    class Plain:  # a dataclass of the same name, not registered with JAX
        w: object
        b: object
        units: int = 0
        act: str = ""

    globals()["Params"] = Plain
    try:
        with pytest.raises(jtree.NotSupportedError, match="dataclass 'Params'"):
            jtree.load(path)
    finally:
        globals()["Params"] = Params
    assert type(jtree.load(path)["p"]) is Params


def test_a_class_whose_fields_changed_is_a_clear_error(classes, path):
    import jax  # noqa: PLC0415

    Params = classes[0]
    jtree.save({"p": Params(np.ones(2), np.zeros(2))}, path)
    _forget(Params)

    @dataclasses.dataclass
    class Changed:  # renamed a field since the file was written
        weight: object
        b: object
        units: int = 0
        act: str = ""

    jax.tree_util.register_dataclass(Changed, data_fields=["weight", "b"],
                                     meta_fields=["units", "act"])
    Changed.__qualname__ = "Params"
    Changed.__module__ = __name__
    globals()["Params"] = Changed
    try:
        with pytest.raises(jtree.InvalidArgumentError, match="at 'p': .*no field 'w'"):
            jtree.load(path)
    finally:
        globals()["Params"] = Params
        _forget(Changed)


def test_custom_flatten_is_still_refused(classes, path):
    Pair = classes[2]
    with pytest.raises(jtree.InvalidArgumentError,
                       match="JAX pytree node whose serialization is not registered"):
        jtree.save({"x": Pair(np.ones(2), 3)}, path)


def test_static_field_that_cannot_be_saved_names_its_key_path(classes, path):
    Params = classes[0]
    with pytest.raises(jtree.InvalidArgumentError, match=r"p/act.*function"):
        jtree.save({"p": Params(np.ones(2), np.ones(2), act=len)}, path)


def test_an_explicit_registration_wins(classes, path):
    Params = classes[0]
    _forget(Params)
    jtree.register_pytree_node_serialization(
        Params, serialized_name="my.Params", serialize_auxdata=lambda aux: repr(aux),
        deserialize_auxdata=lambda b: eval(b.decode()))  # noqa: S307  (the test's own bytes)
    try:
        jtree.save(Params(np.ones(2), np.ones(2), units=9), path)
        with jtree.open(path) as f:
            assert f.root.type_name == "my.Params"
        back = jtree.load(path)
        assert type(back) is Params and back.units == 9
    finally:
        _forget(Params)
