"""jtree._placement: one resolved placement per call (framework, device, direct path or not and
why), one reading of the direct path's switch, one message for device= with JAX."""
import types

import numpy as np
import pytest

import jtree
from jtree import _device, _load_call, _load_plain, _placement

torch = pytest.importorskip("torch")


@pytest.fixture
def path(tmp_path):
    p = str(tmp_path / "t.jtree")
    jtree.save({"a": np.arange(12, dtype=np.float32).reshape(3, 4)}, p)
    return p


def _options(**options):
    return _load_call.call_options(None, None, options)[1]


def test_device_implies_torch_and_is_resolved_once_per_call():
    p = _options(device="cpu").placement
    assert (p.framework, p.device, p.direct) == ("torch", torch.device("cpu"), False)
    assert "CUDA devices, not 'cpu'" in p.why_not_direct
    with _device.host_stand_in_for_tests():
        p = _options(map_location="cpu").placement
        assert (p.framework, p.direct, p.why_not_direct) == ("torch", True, "")
    assert _options().placement == _placement.LoadPlacement("numpy")


def test_device_with_jax_is_one_rule_with_one_message(path):
    calls = [lambda: jtree.load(path, framework="jax", device="cpu"),
             lambda: jtree.open(path, framework="jax", device="cpu"),
             lambda: jtree.open(path)["a"].get(0, framework="jax", device="cpu")]
    for call in calls:
        with pytest.raises(jtree.InvalidArgumentError) as e:
            call()
        assert _placement.DEVICE_IS_TORCH in str(e.value)


def test_the_switch_is_read_in_one_place_for_torch_and_jax(monkeypatch):
    monkeypatch.setattr(_device, "cuda_built", lambda: True)
    monkeypatch.setattr(_device, "cuda_device_count", lambda: 1)
    gpu = types.SimpleNamespace(platform="gpu",
                                client=types.SimpleNamespace(platform_version="cuda 12.4"))
    monkeypatch.setenv(_placement.SWITCH, "0")
    said = "JTREE_DIRECT_DEVICE_LOAD=0 turns the direct path off"
    assert _placement.why_not_torch_direct(torch.device("cuda:0")) == said
    assert _placement.why_not_jax_direct(gpu, "float32") == said
    monkeypatch.setenv(_placement.SWITCH, "1")
    assert _placement.why_not_jax_direct(gpu, "float32") is None
    monkeypatch.setattr(_placement, "switched_off", lambda: True)
    assert _placement.why_not_torch_direct(torch.device("cuda:0")) == said
    assert _placement.why_not_jax_direct(gpu, "float32") == said


def test_torch_lacks_names_the_dtype():
    assert _placement.torch_lacks("int4") == "torch has no int4"
    assert _placement.torch_lacks("bfloat16") == ""


def test_a_lazy_slice_of_a_dtype_torch_lacks_says_why_it_is_not_direct(tmp_path):
    p = str(tmp_path / "i4.jtree")
    jtree.save({"q": np.zeros(8, dtype=_dtype("int4"))}, p)
    # (The direct path declines, saying why; the host path then refuses the torch tensor.)
    with _device.host_stand_in_for_tests():
        with pytest.warns(RuntimeWarning, match="torch has no int4"), \
                pytest.raises(jtree.NotSupportedError, match="PyTorch has no dtype for int4"):
            jtree.open(p)["q"].get(slice(0, 4), device="cpu",
                                   device_options=jtree.DeviceOptions())


def _dtype(name):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    return getattr(ml_dtypes, name)


@pytest.mark.parametrize("plain", [True, False], ids=["plain pass", "general loader"])
def test_a_load_asks_whether_its_device_is_direct_once(path, monkeypatch, plain):
    asked = []
    real = _placement.why_not_torch_direct
    monkeypatch.setattr(_placement, "why_not_torch_direct", lambda d: asked.append(d) or real(d))
    passes = []
    real_plain = _load_plain.load
    monkeypatch.setattr(_load_plain, "load", lambda *a: passes.append(1) or real_plain(*a))
    many = {f"w{i}": np.ones(4, np.float32) for i in range(5)}
    jtree.save(many, path)
    with _device.host_stand_in_for_tests():
        # (With cast= the general loader plans the load, leaf by leaf.)
        got = jtree.load(path, device="cpu", cast=None if plain else "float32")
    assert sorted(got) == sorted(many) and all(isinstance(t, torch.Tensor) for t in got.values())
    assert asked == [torch.device("cpu")] and bool(passes) == plain
