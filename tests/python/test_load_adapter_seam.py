"""The adapter seam (jtree._load_adapter): a framework is one Adapter registered in
jtree._load.ADAPTERS. A minimal fake framework, registered here and nowhere else, is loaded
through by every path of the loader (the general walk, as_stored, templates, slices=, the
native plain pass) and by an open file's slices (LazyArray.get), proving the loader reaches
frameworks only through the registry."""
from __future__ import annotations

import numpy as np
import pytest

import jtree
from jtree import _load, _load_numpy
from jtree._load_adapter import Adapter, PlainPass


class Boxed:
    """The fake framework's array: a NumPy array in a box."""

    def __init__(self, a):
        self.a = np.asarray(a)


def _boxed(get):
    return lambda: Boxed(get())


def _fake(calls, plain=False, sliced=False):
    def target(loader, t, where):
        return None  # (no target of its own: the load's framework= places everything)

    def array(loader, fl, p, scalar, path):
        calls.append("array")
        return _boxed(_load_numpy.ADAPTER.array(loader, fl, p, scalar, path))

    def part(loader, fl, box, want, out, path):
        calls.append("part")
        return _boxed(_load_numpy.ADAPTER.part(loader, fl, box, want, out, path))

    def host_pass(o):
        calls.append("plain")
        return PlainPass(_load_numpy.ADAPTER.host_pass(o).dtype_of,
                         lambda a, code: Boxed(a), 0)

    def lazy_slice(lazy, index, placement, options):
        calls.append(("slice", index, placement.framework, options))
        return Boxed(_load_numpy.ADAPTER.slice(lazy, index, placement, options))

    extra = dict(plain_on_host=lambda o: True, host_pass=host_pass) if plain else {}
    if sliced:
        extra["slice"] = lazy_slice
    return Adapter("fake", target=target, settle=lambda *a: None, array=array,
                   block=lambda *a: None, part=part, index=lambda b, post: Boxed(b.a[post]),
                   **extra)


@pytest.fixture
def saved(tmp_path):
    path = str(tmp_path / "f.jtree")
    jtree.save({"w": np.arange(6, dtype=np.float32).reshape(2, 3), "n": 3}, path)
    return path


def test_a_registered_adapter_is_a_framework_of_the_general_loader(saved, monkeypatch):
    calls = []
    monkeypatch.setitem(_load.ADAPTERS, "fake", _fake(calls))
    got = jtree.load(saved, framework="fake")
    assert isinstance(got["w"], Boxed) and got["n"] == 3
    np.testing.assert_array_equal(got["w"].a, np.arange(6, dtype=np.float32).reshape(2, 3))
    assert calls == ["array"]  # (no plain pass, no as_stored: the adapter gave none)


def test_slices_go_through_the_adapters_part_and_index(saved, monkeypatch):
    calls = []
    monkeypatch.setitem(_load.ADAPTERS, "fake", _fake(calls))
    got = jtree.load(saved, framework="fake", slices={"w": (1, slice(0, 2))})
    np.testing.assert_array_equal(got["w"].a, [3, 4])
    assert calls == ["part"]


def test_the_plain_pass_takes_the_adapters_plain_pass(saved, monkeypatch):
    calls = []
    monkeypatch.setitem(_load.ADAPTERS, "fake", _fake(calls, plain=True))
    got = jtree.load(saved, framework="fake")
    assert isinstance(got["w"], Boxed) and calls == ["plain"]
    np.testing.assert_array_equal(got["w"].a, np.arange(6, dtype=np.float32).reshape(2, 3))


def test_an_open_files_slices_go_through_the_adapters_slice_hook(saved, monkeypatch):
    calls = []
    monkeypatch.setitem(_load.ADAPTERS, "fake", _fake(calls, sliced=True))
    with jtree.open(saved, framework="fake") as f:
        got = f["w"][1, 0:2]  # (the File's framework=)
        assert isinstance(got, Boxed)
        np.testing.assert_array_equal(got.a, [3, 4])
        assert calls == [("slice", (1, slice(0, 2)), "fake", None)]
    with jtree.open(saved) as f:
        got = f["w"].get((slice(None), 2), framework="fake")  # (get's framework=)
        np.testing.assert_array_equal(got.a, [2, 5])
        assert f["w"][0, 1] == 1  # (NumPy's own hook for the File's default)
    assert len(calls) == 2 and calls[1][2] == "fake"


def test_an_adapter_without_a_slice_hook_refuses_slices(saved, monkeypatch):
    monkeypatch.setitem(_load.ADAPTERS, "fake", _fake([]))
    with jtree.open(saved, framework="fake") as f:
        with pytest.raises(jtree.NotSupportedError, match="framework 'fake' has no slices"):
            _ = f["w"][0]
        assert isinstance(f["w"].read(framework="fake"), Boxed)  # (its loads still work)


def test_an_unregistered_framework_is_refused(saved):
    with pytest.raises(jtree.InvalidArgumentError, match="framework must be one of"):
        jtree.load(saved, framework="fake")


def test_the_native_pass_checks_the_plain_pass_hooks(saved):
    with jtree.open(saved) as f:
        reader = f._reader
        bad = PlainPass(lambda code: None, None, 0, new_device=lambda *a: None)  # (no fill)
        with pytest.raises(ValueError, match="new_device and fill go together"):
            reader.load_plain(bad, lambda *a: None)
        with pytest.raises(ValueError, match="mmap_mode"):
            reader.load_plain(PlainPass(lambda code: None, None, 7), lambda *a: None)
