"""Every entry point that loads (jtree.load, nonblocking_load, File.load, Node.load,
LazyArray.read) takes the same options, checks them the same way with the same messages, and
builds one LoadOptions per load (jtree._load_call)."""
import numpy as np
import pytest

import jtree
from jtree import _load


@pytest.fixture
def path(tmp_path):
    p = str(tmp_path / "o.jtree")
    jtree.save({"n": {"w": np.arange(6.0).reshape(2, 3)}, "s": 1}, p, compression=None)
    return p


def _entry_points(path, f):
    """name -> a function loading ``path`` (or a part of it) with the options given."""
    return {
        "jtree.load(path)": lambda **kw: jtree.load(path, **kw),
        "jtree.load(File)": lambda **kw: jtree.load(f, **kw),
        "nonblocking_load": lambda **kw: jtree.nonblocking_load(path, **kw).result(),
        "File.load": lambda **kw: f.load(**kw),
        "Node.load": lambda **kw: f["n"].load(**kw),
        "LazyArray.read": lambda **kw: f["n"]["w"].read(**kw),
    }


BAD_VALUES = [
    (dict(framework="tensorflow"), "framework must be one of"),
    (dict(mmap="x"), "mmap must be True"),
    (dict(keys=5), "keys must be a key-path pattern"),
    (dict(progress=3), "progress must be True, False or a function"),
    (dict(device_options=3), "device_options must be a jtree.DeviceOptions"),
    (dict(shardings=3), "shardings must be a jax.sharding.Sharding"),
    (dict(slices=3), "slices must be"),
    (dict(out={"n": None}, pytree={"n": None}), "give pytree= or out=, not both"),
]


@pytest.mark.parametrize("options, message", BAD_VALUES)
def test_a_bad_option_value_is_the_same_error_at_every_entry_point(path, options, message):
    with jtree.open(path) as f:
        errors = {}
        for name, load in _entry_points(path, f).items():
            with pytest.raises(jtree.InvalidArgumentError, match=message) as e:
                load(**options)
            errors[name] = str(e.value)
    assert len(set(errors.values())) == 1, errors


def test_an_unknown_option_is_a_type_error_at_every_entry_point(path):
    with jtree.open(path) as f:
        for name, load in _entry_points(path, f).items():
            for option in ("bogus", "fill_out"):  # (fill_out is out='s, never given by name)
                with pytest.raises(TypeError, match=option):
                    load(**{option: True})


def test_nonblocking_load_checks_its_options_before_returning(path):
    with pytest.raises(jtree.InvalidArgumentError, match="framework must be one of"):
        jtree.nonblocking_load(path, framework="tensorflow")  # (no future: raised here)
    with pytest.raises(TypeError, match=r"nonblocking_load\(\) got unexpected options \['x'\]"):
        jtree.nonblocking_load(path, x=1)


def test_node_load_and_lazy_array_read_take_every_option_file_load_takes(path):
    with jtree.open(path) as f:
        assert f["n"].load(allow_full_download=True)["w"].tolist() == [[0, 1, 2], [3, 4, 5]]
        into = np.zeros((2, 3))
        assert f["n"]["w"].read(out=into, allow_full_download=True) is into
        assert into.tolist() == [[0, 1, 2], [3, 4, 5]]
        node_out = {"w": np.zeros((2, 3))}
        got = f["n"].load(out=node_out)
        assert got["w"] is node_out["w"] and got["w"][1, 2] == 5


def test_the_file_settings_a_load_leaves_out_are_the_files(tmp_path):
    p = str(tmp_path / "big.jtree")
    jtree.save({"n": {"w": np.arange(100_000.0)}}, p, compression=None)  # (mapped: raw chunks)
    with jtree.open(p, mmap="r") as f:
        assert not f["n"]["w"].read().flags.writeable  # (a read-only view of the map)
        assert f["n"]["w"].read(mmap=True).flags.writeable
        assert not f["n"].load()["w"].flags.writeable
        assert not jtree.load(f)["n"]["w"].flags.writeable
    assert jtree.load(p)["n"]["w"].flags.writeable  # (jtree.load's default: True)


def test_one_load_options_per_load(path, monkeypatch):
    built = []
    init = _load.LoadOptions.__init__

    def counting(self, **kw):
        built.append(kw)
        init(self, **kw)

    monkeypatch.setattr(_load.LoadOptions, "__init__", counting)
    with jtree.open(path) as f:
        for name, load in _entry_points(path, f).items():
            built.clear()
            load(keys="**")
            assert len(built) == 1, name
