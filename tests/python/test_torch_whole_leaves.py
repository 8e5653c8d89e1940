"""Whole leaves loaded as torch tensors without a target (jtree.load(f, framework="torch"),
device="cpu", and device= of the direct device path): the fast path of
jtree._load_torch.as_stored, which skips the general per-leaf planning (a load of 10,000 small
leaves spent half its time there). The same tensors as the general path, for every dtype; the
general path still serves what the fast one cannot (dtypes torch lacks, no memory map, casts,
templates of another dtype). Templates (``out=`` tensors, ``like=`` trees) of the stored dtype and
shape on a device the direct path serves take a fast path too (_load_torch.from_template): the
GPU benchmark's loads into tensors a server allocated."""
import warnings

import numpy as np
import pytest

import jtree
from jtree import _device, _load_torch
from conftest import require


def _tree(torch):
    g = torch.Generator().manual_seed(3)
    return {
        "f32": torch.randn(33, 7, generator=g),                        # through NumPy
        "bf16": torch.randn(5, 9, generator=g).to(torch.bfloat16),      # viewed in torch
        "f8": torch.randn(17, generator=g).to(torch.float8_e4m3fn),
        "c128": torch.randn(4, 3, dtype=torch.complex128, generator=g),
        "bool": torch.randn(6, generator=g) > 0,
        "i8": torch.arange(-3, 4, dtype=torch.int8),                   # 1-D, 1 byte: as its bytes
        "u16": torch.arange(300, dtype=torch.int32).to(torch.uint16),
        "i64": torch.arange(-5, 40, dtype=torch.int64).reshape(5, 9),
        "empty": torch.empty(0, 5),
        "zero_d": torch.tensor(2.5, dtype=torch.float64),
    }


def _same(torch, want, got, key):
    assert isinstance(got, torch.Tensor), key
    assert got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape), key
    if want.numel():
        a, b = want.reshape(-1), got.reshape(-1)
        if want.element_size() == 1 and want.dtype != torch.bool:
            a, b = a.view(torch.uint8), b.view(torch.uint8)
        assert torch.equal(a, b), key


@pytest.fixture
def saved(path):
    torch = require("torch")
    tree = _tree(torch)
    jtree.save(tree, path, compression=None)
    return torch, tree, path


def _counting_general_path(monkeypatch):
    """Counts the leaves the general torch path (_load_torch.tensor) plans."""
    calls = []
    real = _load_torch.tensor

    def counted(loader, fl, *a, **kw):
        calls.append(fl.index)
        return real(loader, fl, *a, **kw)

    monkeypatch.setattr(_load_torch, "tensor", counted)
    return calls


@pytest.mark.parametrize("kw", [dict(framework="torch"), dict(device="cpu"),
                                dict(framework="torch", mmap="r"),
                                # (progress=: not the native plain pass, _load_torch.as_stored)
                                dict(framework="torch", progress=lambda done, total: None)])
def test_whole_leaves_take_the_fast_path_and_match_the_general_one(saved, monkeypatch, kw):
    torch, tree, path = saved
    calls = _counting_general_path(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no "non-writable NumPy array" warning from torch)
        got = jtree.load(path, **kw)
    assert calls == []  # (no leaf planned by the general path)
    # The general path (a target per leaf) gives the same tensors.
    general = jtree.load(path, {k: torch.empty_like(v) for k, v in tree.items()})
    for k, v in tree.items():
        _same(torch, v, got[k], k)
        _same(torch, general[k], got[k], k)
    # Writable, whatever mmap says (torch has no read-only tensors), and a write changes the
    # tensor, never the file.
    got["f32"][0, 0] = 1234.5
    assert jtree.load(path, framework="torch")["f32"][0, 0] == tree["f32"][0, 0]


def test_the_general_path_serves_what_the_fast_one_cannot(saved, monkeypatch):
    torch, tree, path = saved
    calls = _counting_general_path(monkeypatch)
    got = jtree.load(path, framework="torch", mmap=False)  # (copies: no memory map)
    assert len(calls) == len(tree)
    for k, v in tree.items():
        _same(torch, v, got[k], k)
    calls.clear()
    jtree.load(path, framework="torch", cast="float32")  # (a cast: planned per leaf)
    assert len(calls) == len(tree)
    # Under the test hook the CPU stands for a GPU: device="cpu" takes the direct device path,
    # planned by the fast path too (a new tensor per leaf, filled by the staging pipeline).
    calls.clear()
    with _device.host_stand_in_for_tests() as engine:
        got = jtree.load(path, device="cpu")
    assert calls == []
    assert engine["bytes_copied"] == sum(v.numel() * v.element_size() for v in tree.values())
    for k, v in tree.items():
        _same(torch, v, got[k], k)
    # ... and by the general path where the leaves' templates ask for another dtype: the same
    # values, cast (the float64 leaf's template is of its stored dtype: the fast path's).
    with _device.host_stand_in_for_tests() as engine:
        templated = jtree.load(path, {k: torch.empty(v.shape, dtype=torch.float64)
                                      for k, v in tree.items() if k != "c128"}, device="cpu")
    assert len(calls) == len(tree) - 2
    for k, v in tree.items():
        if k != "c128":
            _same(torch, v.to(torch.float64), templated[k], k)
    # A dtype torch lacks: the general path's clear error, as before.
    ml_dtypes = require("ml_dtypes")
    jtree.save({"i4": np.arange(-8, 8, dtype=ml_dtypes.int4)}, path)
    calls.clear()
    with pytest.raises(jtree.NotSupportedError, match="i4.*PyTorch has no dtype for int4"):
        jtree.load(path, framework="torch")
    assert len(calls) == 1


def _stand_in_templates(torch, tree):
    return {k: torch.empty_like(v) for k, v in tree.items()}


def test_templates_of_the_stored_dtype_on_a_direct_device_take_the_fast_path(saved, monkeypatch):
    torch, tree, path = saved
    calls = _counting_general_path(monkeypatch)
    nbytes = sum(v.numel() * v.element_size() for v in tree.values())
    # out=: each of the caller's tensors filled in place, straight by the staging pipeline.
    out = _stand_in_templates(torch, tree)
    with _device.host_stand_in_for_tests() as engine:
        got = jtree.load(path, out=out)
    assert calls == [] and engine["bytes_copied"] == nbytes
    for k, v in tree.items():
        assert got[k] is out[k], k
        _same(torch, v, out[k], k)
    # like=: new tensors on the templates' device, the templates untouched.
    like = _stand_in_templates(torch, tree)
    for t in like.values():
        t.zero_()
    with _device.host_stand_in_for_tests() as engine:
        got = jtree.load(path, like)
    assert calls == [] and engine["bytes_copied"] == nbytes
    for k, v in tree.items():
        assert got[k] is not like[k], k
        _same(torch, v, got[k], k)
        assert not like[k].any(), k


def test_templates_the_fast_path_cannot_serve_take_the_general_one(saved, monkeypatch):
    torch, tree, path = saved
    calls = _counting_general_path(monkeypatch)
    f32 = tree["f32"]
    cases = {
        "another dtype": dict(out={"f32": torch.empty(f32.shape, dtype=torch.float64)}),
        "not contiguous": dict(out={"f32": torch.empty(tuple(reversed(f32.shape))).t()}),
        "another shape": dict(out={"f32": torch.empty(40, 7)}, pad_truncate=True),
        "meta device": dict(pytree={"f32": torch.empty(f32.shape, device="meta")}),
    }
    for why, kw in cases.items():
        calls.clear()
        with _device.host_stand_in_for_tests():
            got = jtree.load(path, **kw)
        assert len(calls) == 1, why
        want = f32
        if why == "another dtype":
            want = f32.to(torch.float64)
        elif why == "another shape":
            want = torch.cat([f32, torch.zeros(7, 7)])
        _same(torch, want, got["f32"], why)
        if "out" in kw:
            assert got["f32"] is kw["out"]["f32"], why
    # Without the direct path (no test hook: the CPU is the CPU), templates are the general
    # path's, filled through host memory.
    calls.clear()
    out = _stand_in_templates(torch, tree)
    got = jtree.load(path, out=out)
    assert len(calls) == len(tree)
    for k, v in tree.items():
        assert got[k] is out[k], k
        _same(torch, v, got[k], k)


def test_tied_leaves_through_templates_give_one_tensor(path, monkeypatch):
    torch = require("torch")
    w = torch.randn(8, 4)
    jtree.save({"a": w, "b": w, "c": w.clone()}, path, compression=None)
    calls = _counting_general_path(monkeypatch)
    like = {k: torch.empty(8, 4) for k in "abc"}
    with _device.host_stand_in_for_tests():
        got = jtree.load(path, like)
    assert calls == []
    assert got["a"] is got["b"] and got["c"] is not got["a"]  # (as the file ties them)
    for k in "abc":
        assert torch.equal(got[k], w), k
    out = {k: torch.empty(8, 4) for k in "abc"}
    with _device.host_stand_in_for_tests():
        got = jtree.load(path, out=out)
    for k in "abc":  # (out=: each tensor the caller gave is filled)
        assert got[k] is out[k] and torch.equal(out[k], w), k
