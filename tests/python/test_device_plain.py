"""Loads to a device of whole files, parts of files and keys= selections (no cast, target,
out= or progress) are planned in the native pass (Reader.load_plain with new_device:
jtree._load_plain._load_to_device): the device tensors allocated there, then filled by one
jtree._device.read. Through the host stand-in (the CPU stands for the device), each is compared
with the general loader's plan of the same load (_load_torch.as_stored), and what the native
pass does not do declines to it: dtypes torch lacks, the memory limits, out of device memory,
device_options on a load without arrays, JTREE_DEVICE_OVERLAP=reads."""
import random

import numpy as np
import pytest

import jtree
from jtree import _device, _load_plain
from test_selection import _Holder as Box
from test_selection_native import FIXED, _random_patterns, rich_tree


def canon(x, torch, device=True):
    """A comparable form of a loaded tree: classes, keys in order, tensors' dtype, shape,
    device (unless ``device`` is False) and bytes."""
    if isinstance(x, torch.Tensor):
        return ("tensor", str(x.dtype), tuple(x.shape), str(x.device) if device else "",
                x.contiguous().view(-1).view(torch.uint8).tolist() if x.numel() else [])
    if isinstance(x, tuple) and hasattr(type(x), "_fields"):
        return ("namedtuple", type(x).__name__, x._fields, [canon(v, torch, device) for v in x])
    if isinstance(x, Box):
        return ("box", canon(x.a, torch, device), canon(x.b, torch, device))
    if isinstance(x, dict):
        return (type(x).__name__, [(k, canon(v, torch, device)) for k, v in x.items()])
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [canon(v, torch, device) for v in x])
    return (type(x).__name__, x)


def general(monkeypatch, *args, **kw):
    with monkeypatch.context() as m:
        m.setattr(_load_plain, "applies", lambda o: False)
        return jtree.load(*args, **kw)


def native(monkeypatch, *args, declined=False, **kw):
    """jtree.load(*args, **kw), checking that the native device pass was asked and that it
    loaded the tree (``declined``: that it left it to the general loader)."""
    results = []
    real = _load_plain._load_to_device
    with monkeypatch.context() as m:
        m.setattr(_load_plain, "_load_to_device",
                  lambda *a: results.append(real(*a)) or results[-1])
        got = jtree.load(*args, **kw)
    assert results, "the native device pass was not asked"
    assert (results[-1] is None) == declined, results[-1]
    return got


def both_ways(monkeypatch, source, form, **kw):
    """jtree.load(source, **kw) by the general loader and by the native pass: the same tree
    (``form``: canon or jax_canon of each) or the same NotFoundError; the native one, or
    None for a NotFoundError."""
    try:
        want = general(monkeypatch, source, **kw)
    except jtree.NotFoundError as e:
        with pytest.raises(jtree.NotFoundError) as got_error:
            native(monkeypatch, source, **kw)
        assert str(got_error.value) == str(e), kw
        return None
    got = native(monkeypatch, source, **kw)
    assert form(got) == form(want), kw
    return got


def selections(seed, fixed=FIXED, random_ones=60):
    """None (no keys=) and keys= patterns: the fixed ones, then random ones."""
    return [None] + fixed + _random_patterns(random.Random(seed), random_ones)


def selection_kw(keys, prune, **kw):
    """The load's keyword arguments for ``keys`` (None: none) and ``prune``; None where the
    combination is not a load to make (prune without keys)."""
    if keys is None:
        return None if prune else kw
    return dict(kw, keys=keys, prune=prune)


@pytest.mark.parametrize("prune", [False, True])
def test_device_selections_in_the_native_pass_are_the_general_loaders(torch, path, prune,
                                                                       monkeypatch):
    jtree.save(rich_tree(), path, chunk_bytes=4096)
    with _device.host_stand_in_for_tests() as stats:
        for keys in selections(11 + prune):
            kw = selection_kw(keys, prune, device="cpu")
            got = kw and both_ways(monkeypatch, path, lambda t: canon(t, torch), **kw)
            if isinstance(got, dict) and got.get("tied_a") is not None:
                if got.get("tied_b") is not None:
                    assert got["tied_a"] is got["tied_b"]  # (tied: one tensor, as there)
    assert stats["misuses"] == 0


def test_the_whole_file_goes_through_the_staged_copies_in_one_load(torch, path, monkeypatch):
    tree = rich_tree()
    jtree.save(tree, path, chunk_bytes=4096)
    with _device.host_stand_in_for_tests() as stats:
        got = native(monkeypatch, path, device="cpu")
    # Every array a tensor of its stored dtype, filled through the stand-in's copies.
    assert isinstance(got["big"], torch.Tensor) and got["big"].dtype == torch.float32
    assert np.array_equal(got["big"].numpy(), tree["big"])
    assert got["params"]["dense"]["kernel"].dtype == torch.float64
    assert got["opt"][3][0].shape == () and int(got["opt"][3][0]) == 4  # (a saved scalar)
    assert got["box"].b["z"] == "text" and got[7] == "an int key" and got["step"] == 12
    assert got["tied_a"] is got["tied_b"]
    assert stats["bytes_copied"] >= tree["big"].nbytes + tree["tied_a"].nbytes
    assert stats["allocations"] == stats["frees"] and stats["misuses"] == 0


@pytest.mark.parametrize("prune", [False, True])
def test_parts_of_a_file_to_a_device_in_the_native_pass(torch, path, prune, monkeypatch):
    jtree.save(rich_tree(), path)
    parts = [("params",), ("params", "layers", 1), ("opt",), ("nt",), ("box",), ("big",),
             ("tied_b",)]
    with _device.host_stand_in_for_tests(), jtree.open(path) as f:
        for part in parts:
            node = f
            for k in part:
                node = node[k]
            for keys in [None, "**/w", "params/layers/1", "box/b/*", "zz", "**"]:
                kw = selection_kw(keys, prune, device="cpu")
                if kw:
                    both_ways(monkeypatch, node, lambda t: canon(t, torch), **kw)


def test_a_dtype_torch_lacks_declines_to_the_general_loader(torch, path, monkeypatch):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    tree = {"f8": np.arange(6, dtype=np.float32).astype(ml_dtypes.float8_e4m3), "w": np.ones(3)}
    jtree.save(tree, path)
    with _device.host_stand_in_for_tests():
        with pytest.raises(jtree.NotSupportedError) as want:
            general(monkeypatch, path, device="cpu")
        with pytest.raises(jtree.NotSupportedError) as got:
            native(monkeypatch, path, device="cpu", declined=True)
        # (keys= without it: the native pass loads the rest.)
        rest = native(monkeypatch, path, device="cpu", keys="w")
    assert str(got.value) == str(want.value) and "'f8'" in str(got.value)
    assert rest["f8"] is None and torch.equal(rest["w"], torch.ones(3, dtype=torch.float64))


def test_over_the_limits_the_general_loaders_error_names_the_leaf(torch, path, monkeypatch):
    jtree.save({"a": np.ones(100, np.float32), "b": np.ones(1000, np.float32)}, path)
    with _device.host_stand_in_for_tests(), \
            jtree.open(path, limits={"max_total_bytes": 3000}) as f:
        with pytest.raises(jtree.ResourceExhaustedError) as want:
            general(monkeypatch, f, device="cpu")
        with pytest.raises(jtree.ResourceExhaustedError) as got:
            native(monkeypatch, f, device="cpu", declined=True)
    assert str(got.value) == str(want.value) and "'b'" in str(got.value), got.value


def test_out_of_device_memory_names_the_leaf_and_the_file(torch, path, monkeypatch):
    jtree.save({"small": np.ones(10, np.float32), "huge": np.ones((64, 64), np.float32)}, path)
    real = torch.empty

    def empty(*shape, **kw):  # (the device cannot hold 16 KiB in one piece: the huge leaf,
        # or the load's grouped allocation, which then falls back to one per tensor)
        t = real(*shape, **{**kw, "device": "meta"})
        if kw.get("device") is not None and t.numel() * t.element_size() >= 64 * 64 * 4:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 16.00 KiB")
        return real(*shape, **kw)
    monkeypatch.setattr(torch, "empty", empty)
    with _device.host_stand_in_for_tests():
        with pytest.raises(jtree.ResourceExhaustedError, match="huge") as e:
            native(monkeypatch, path, device="cpu", declined=True)
    assert path in str(e.value) and "16384 bytes" in str(e.value)


def test_device_options_on_a_load_without_arrays_are_not_ignored(torch, path, monkeypatch):
    jtree.save({"step": 3, "name": "run"}, path)
    with _device.host_stand_in_for_tests():
        with pytest.raises(jtree.Error) as want:
            general(monkeypatch, path, device="cpu", device_options=jtree.DeviceOptions())
        with pytest.raises(type(want.value)) as got:
            native(monkeypatch, path, device="cpu", device_options=jtree.DeviceOptions(),
                   declined=True)
    assert str(got.value) == str(want.value)


def test_device_options_apply_to_the_native_pass(torch, path, monkeypatch):
    jtree.save({"w": np.ones((300, 70), np.float32)}, path, chunk_bytes=4096)
    opts = jtree.DeviceOptions(staging_bytes=1 << 16, staging_buffers=2)
    with _device.host_stand_in_for_tests() as stats:
        got = native(monkeypatch, path, device="cpu", device_options=opts)
    assert torch.equal(got["w"], torch.ones((300, 70)))
    st = opts.last_stats
    assert st is not None and st.direct_bytes + st.buffered_bytes >= 300 * 70 * 4
    assert stats["peak_pinned_bytes"] <= 1 << 16


def test_reading_while_planning_is_the_general_loaders(torch, path, monkeypatch):
    jtree.save({"w": np.ones(10, np.float32)}, path)
    asked = []
    monkeypatch.setattr(_load_plain, "_load_to_device", lambda *a: asked.append(a))
    monkeypatch.setenv("JTREE_DEVICE_OVERLAP", "reads")
    with _device.host_stand_in_for_tests():
        got = jtree.load(path, device="cpu")
    assert asked == [] and torch.equal(got["w"], torch.ones(10))
    monkeypatch.setenv("JTREE_DEVICE_OVERLAP", "pin")
    with _device.host_stand_in_for_tests():
        jtree.load(path, device="cpu")
    assert len(asked) == 1


def jax_canon(x, jax):
    """canon() for JAX results: arrays by dtype, shape, devices and bytes."""
    if isinstance(x, jax.Array):
        return ("jax", str(x.dtype), tuple(x.shape), sorted(str(d) for d in x.devices()),
                np.asarray(x).tobytes())
    if isinstance(x, tuple) and hasattr(type(x), "_fields"):
        return ("namedtuple", type(x).__name__, x._fields, [jax_canon(v, jax) for v in x])
    if isinstance(x, Box):
        return ("box", jax_canon(x.a, jax), jax_canon(x.b, jax))
    if isinstance(x, dict):
        return (type(x).__name__, [(k, jax_canon(v, jax)) for k, v in x.items()])
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [jax_canon(v, jax) for v in x])
    return (type(x).__name__, x)


@pytest.mark.parametrize("prune", [False, True])
def test_jax_to_one_device_in_the_native_pass_is_the_general_loaders(jax, path, prune,
                                                                      monkeypatch):
    from jax.sharding import SingleDeviceSharding

    device = jax.devices()[-1]  # (not the default one: the arrays must land there)
    sharding = SingleDeviceSharding(device)
    jtree.save(rich_tree(), path, chunk_bytes=4096)
    with _device.host_stand_in_for_tests() as stats:
        for keys in selections(5 + prune, FIXED[:18], 30):
            kw = selection_kw(keys, prune, shardings=sharding)
            got = kw and both_ways(monkeypatch, path, lambda t: jax_canon(t, jax), **kw)
            if isinstance(got, dict) and got.get("big") is not None:
                assert got["big"].devices() == {device}
            if isinstance(got, dict) and got.get("tied_a") is not None:
                if got.get("tied_b") is not None:
                    assert got["tied_a"] is got["tied_b"]
    assert stats["misuses"] == 0 and stats["copies"] > 0


def test_jax_dtypes_the_direct_path_lacks_decline(jax, path, monkeypatch):
    from jax.sharding import SingleDeviceSharding

    ml_dtypes = pytest.importorskip("ml_dtypes")
    sharding = SingleDeviceSharding(jax.devices()[0])
    # float8 is read as bytes and bitcast on the device: the native pass takes it; int4 is read
    # through host memory: the general loader's.
    f8 = np.arange(6, dtype=np.float32).astype(ml_dtypes.float8_e4m3fn)
    jtree.save({"f8": f8, "w": np.ones(3, np.float32)}, path)
    with _device.host_stand_in_for_tests():
        got = native(monkeypatch, path, shardings=sharding)
    assert got["f8"].dtype == f8.dtype and np.array_equal(np.asarray(got["f8"]), f8)
    i4 = np.arange(-4, 4, dtype=np.int8).astype(ml_dtypes.int4)
    jtree.save({"i4": i4, "w": np.ones(3, np.float32)}, path)
    with _device.host_stand_in_for_tests():
        got = native(monkeypatch, path, shardings=sharding, declined=True)
        want = general(monkeypatch, path, shardings=sharding)
    assert jax_canon(got, jax) == jax_canon(want, jax)


def test_gpu_loads_take_the_native_pass(torch, path, monkeypatch):
    from test_device_load import _need_gpu

    _need_gpu(torch)
    tree = rich_tree()
    jtree.save(tree, path, chunk_bytes=64 << 10)
    got = native(monkeypatch, path, device="cuda:0")
    host = jtree.load(path, framework="torch")
    assert got["big"].device == torch.device("cuda:0")
    assert canon(got, torch, device=False) == canon(host, torch, device=False)
    assert got["tied_a"] is got["tied_b"]
    try:
        import jax
    except ImportError:
        print("!!! JAX not installed: its native device pass was not exercised on the GPU")
        return
    gpus = [d for d in jax.devices() if d.platform == "gpu"]
    if not gpus:
        print("!!! JAX sees no GPU: its native device pass was not exercised on the GPU")
        return
    from jax.sharding import SingleDeviceSharding

    got = native(monkeypatch, path, shardings=SingleDeviceSharding(gpus[0]))
    assert got["big"].devices() == {gpus[0]}
    assert np.array_equal(np.asarray(got["big"]), tree["big"])
    assert got["tied_a"] is got["tied_b"]


_NO_ML_DTYPES = r"""
import sys
import torch
import jtree
from jtree import _device

path = sys.argv[1]
tree = {"bf": torch.arange(6, dtype=torch.bfloat16), "f": torch.ones(3),
        "u16": torch.arange(4).to(torch.uint16), "s": torch.tensor(1.5, dtype=torch.bfloat16)}
jtree.save(tree, path)
host = jtree.load(path, framework="torch")
with _device.host_stand_in_for_tests():
    dev = jtree.load(path, device="cpu")
for got in (host, dev):
    for k, v in tree.items():
        assert got[k].dtype == v.dtype and torch.equal(got[k], v), k
assert "ml_dtypes" not in sys.modules, "a torch load imported ml_dtypes"
print("ok")
"""


def test_torch_loads_of_bfloat16_do_not_import_ml_dtypes(torch, path):
    # (Its import is about 7 ms of a fresh process's first load; torch has bfloat16 itself.)
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-c", _NO_ML_DTYPES, path], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stdout + p.stderr
