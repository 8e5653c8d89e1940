"""Loads straight into device memory (issue 22, jtree._device and Reader.read_to_device).

Without a GPU, the direct path runs through jtree's host-memory stand-in copy engine
(jtree._device.host_stand_in_for_tests: loads to device="cpu" take the direct path, with host
tensors for destinations), so the Python planning, the native binding and the C++ staging
pipeline run end to end: bit-exact leaves, boxes, out= tensors filled in place, one native call
per load, bounded pinned memory, errors. The tests that need a CUDA GPU skip loudly without one.
"""
import os
import re
import shutil
import tempfile

import numpy as np
import pytest

import jtree
from jtree import _device, _placement

from conftest import require
from page_cache import evict


def _tree(torch):
    g = np.random.default_rng(7)
    return {
        "w": torch.from_numpy(g.standard_normal((300, 70)).astype(np.float32)),
        "bf": torch.from_numpy(g.standard_normal((40, 33)).astype(np.float32)).to(torch.bfloat16),
        "i8": torch.from_numpy(g.integers(-128, 127, (1000,), dtype=np.int8)),
        "f64": torch.from_numpy(g.standard_normal((17, 5, 3))),
        "flags": torch.from_numpy(g.integers(0, 2, (257,)).astype(bool)),
        "c64": torch.from_numpy((g.standard_normal(50) + 1j * g.standard_normal(50))
                                .astype(np.complex64)),
        "scalar": torch.tensor(3.5),
        "empty": torch.zeros((0, 4)),
        "step": 12,
    }


def _same(a, b, where="root"):
    torch = require("torch")
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _same(a[k], b[k], f"{where}/{k}")
    elif isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor), where
        assert a.dtype == b.dtype and a.shape == b.shape and a.device == b.device, where
        assert torch.equal(a.view(-1).view(torch.uint8) if a.numel() else a,
                           b.view(-1).view(torch.uint8) if b.numel() else b), where
    else:
        assert a == b, where


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_whole_load_through_the_stand_in_is_bit_exact_in_one_call(torch, path, compression):
    tree = _tree(torch)
    # Small chunks: many chunks per leaf, several pieces per staging buffer.
    jtree.save(tree, path, compression=compression, chunk_bytes=4096)
    with _device.host_stand_in_for_tests() as stats:
        got = jtree.load(path, device="cpu")
    _same(tree, got)
    # One native load for all the leaves: every array's bytes went through its copies.
    arrays = [t for t in tree.values() if isinstance(t, torch.Tensor) and t.numel()]
    assert stats["bytes_copied"] >= sum(t.numel() * t.element_size() for t in arrays)
    assert stats["copies"] >= len(arrays)
    assert stats["allocations"] == stats["frees"] and stats["pinned_bytes"] == 0
    assert stats["misuses"] == 0
    # Outside the hook, loads to the CPU are host loads again (the stand-in is off).
    assert not _placement.torch_direct(torch.device("cpu"))
    _same(tree, jtree.load(path, device="cpu"))


def test_cast_and_keys_on_the_direct_path(torch, path):
    tree = _tree(torch)
    jtree.save(tree, path, chunk_bytes=2048)
    with _device.host_stand_in_for_tests() as stats:
        got = jtree.load(path, device="cpu", cast=torch.float16, keys=["w", "bf"])
    assert stats["copies"] > 0
    assert got["w"].dtype == torch.float16 and torch.equal(got["w"], tree["w"].half())
    assert got["bf"].dtype == torch.float16 and torch.equal(got["bf"], tree["bf"].half())
    assert got["i8"] is None


def test_out_tensors_are_filled_in_place(torch, path):
    tree = _tree(torch)
    jtree.save(tree, path, chunk_bytes=4096)
    out = {"w": torch.empty(300, 70), "bf": torch.empty(40, 33, dtype=torch.bfloat16),
           "f64": torch.empty(17, 5, 3, dtype=torch.float64)}
    ptrs = {k: v.data_ptr() for k, v in out.items()}
    with _device.host_stand_in_for_tests() as stats:
        got = jtree.load(path, out=out)
    assert stats["copies"] > 0
    for k in out:
        assert got[k] is out[k] and out[k].data_ptr() == ptrs[k], k
        assert torch.equal(out[k], tree[k]), k


def test_lazy_slices_read_their_box_through_the_stand_in(torch, path):
    a = torch.arange(200 * 30, dtype=torch.int32).reshape(200, 30)
    jtree.save({"a": a}, path, compression="zstd", chunk_bytes=1024)
    ref = a.numpy()
    with _device.host_stand_in_for_tests() as stats:
        with jtree.open(path) as f:
            lazy = f["a"]
            for index in [(slice(3, 150, 7), 5), (Ellipsis, slice(2, 9)), (17,),
                          (slice(None), None, slice(0, 30, 4)), (slice(5, 5),), (-1, -1)]:
                stats.clear()
                got = lazy.get(index, device="cpu")
                want = torch.from_numpy(np.array(ref[index]))
                assert got.shape == want.shape and torch.equal(got, want), index
                if want.numel():
                    # Only the box was copied, never the whole leaf.
                    assert 0 < stats["bytes_copied"] < a.numel() * 4, index
            # A negative step (which torch cannot index) is read on the host instead.
            assert torch.equal(lazy.get((slice(None, None, -3), 2), device="cpu"),
                               torch.from_numpy(np.ascontiguousarray(ref[::-3, 2])))
    with jtree.open(path, device="cpu") as f:  # the File's device= for its slices
        with _device.host_stand_in_for_tests() as stats:
            assert torch.equal(f["a"][10:20], a[10:20])
            assert stats["copies"] > 0
    # The File's device_options= for its slices (the settings LazyArray.get takes).
    opts = jtree.DeviceOptions(staging_bytes=1 << 20)
    with jtree.open(path, device="cpu", device_options=opts) as f:
        assert f.device_options is opts
        with _device.host_stand_in_for_tests():
            assert torch.equal(f["a"][10:20], a[10:20])
        st = opts.last_stats
        assert st.direct_bytes + st.buffered_bytes == a[10:20].numel() * a.element_size()
    with pytest.raises(jtree.InvalidArgumentError, match="no device= was given"):
        jtree.open(path, device_options=opts)
    with pytest.raises(jtree.InvalidArgumentError, match="must be a jtree.DeviceOptions"):
        jtree.open(path, device="cpu", device_options={"staging_bytes": 1})


def test_jax_shardings_read_each_device_slice_through_the_stand_in(torch, jax, path):
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    devices = jax.devices()
    if len(devices) < 8:
        pytest.skip("needs 8 JAX devices (XLA_FLAGS=--xla_force_host_platform_device_count=8)")
    x = np.arange(64 * 12, dtype=np.float32).reshape(64, 12)
    jtree.save({"x": x, "i": x.astype(np.int16)}, path, compression="zstd", chunk_bytes=512)
    mesh = Mesh(np.array(devices[:8]).reshape(4, 2), ("a", "b"))
    sharding = NamedSharding(mesh, PartitionSpec("a", "b"))
    replicated = NamedSharding(mesh, PartitionSpec("a", None))  # each row block on 2 devices
    with _device.host_stand_in_for_tests() as stats:
        got = jtree.load(path, shardings=lambda k, s: sharding if k == "x" else replicated,
                         cast={"int16": "float32"})
    assert stats["copies"] > 0
    assert got["x"].sharding == sharding and np.array_equal(np.asarray(got["x"]), x)
    assert got["i"].dtype == np.float32 and np.array_equal(np.asarray(got["i"]), x)
    for shard in got["x"].addressable_shards:
        assert np.array_equal(np.asarray(shard.data), x[shard.index])
    # Every device's slice was read for it: 8 blocks of x, 8 (replicated) blocks of i.
    assert stats["bytes_copied"] >= x.nbytes + 2 * x.size * 2


def _four_device_load(jax, path):
    """A file whose leaf x, sharded by rows over 4 JAX devices, is 4 native loads."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    devices = jax.devices()
    if len(devices) < 4:
        _skip_loudly("needs 4 JAX devices (XLA_FLAGS=--xla_force_host_platform_device_count=8)")
    x = np.arange(256 * 32, dtype=np.float32).reshape(256, 32)
    jtree.save({"x": x}, path, chunk_bytes=1024)
    return x, NamedSharding(Mesh(np.array(devices[:4]), ("a",)), PartitionSpec("a"))


def test_the_devices_of_a_load_are_loaded_at_once(jax, path, monkeypatch):
    import threading

    x, sharding = _four_device_load(jax, path)
    native = _device._native_load
    barrier = threading.Barrier(4, timeout=60)  # (broken if the loads ran one after another)
    threads = set()

    def at_once(reader, reqs, device, kw):
        threads.add(threading.get_ident())
        barrier.wait()
        return native(reader, reqs, device, kw)

    monkeypatch.setattr(_device, "_native_load", at_once)
    seen = []
    with _device.host_stand_in_for_tests() as stats:
        got = jtree.load(path, shardings=sharding, progress=lambda d, t: seen.append((d, t)))
    assert len(threads) == 4 and np.array_equal(np.asarray(got["x"]), x)
    assert stats["bytes_copied"] == x.nbytes  # (the four loads' counters, summed)
    assert seen and seen[-1][0] == seen[-1][1] and all(a[0] <= b[0] for a, b in zip(seen, seen[1:]))


def test_one_failing_device_fails_the_load_with_its_own_error(jax, path, monkeypatch):
    import threading

    x, sharding = _four_device_load(jax, path)
    native = _device._native_load
    lock = threading.Lock()
    calls = []

    def first_fails(reader, reqs, device, kw):
        with lock:
            calls.append(1)
            first = len(calls) == 1
        if first:
            raise jtree.StorageError("device 0 broke")
        return native(reader, reqs, device, kw)

    monkeypatch.setattr(_device, "_native_load", first_fails)
    with _device.host_stand_in_for_tests():
        with pytest.raises(jtree.StorageError, match="device 0 broke"):
            jtree.load(path, shardings=sharding)
        # Cancelled from progress: every device's load stops, one AbortedError.
        monkeypatch.setattr(_device, "_native_load", native)
        with pytest.raises(jtree.AbortedError):
            jtree.load(path, shardings=sharding, progress=lambda d, t: d == 0 or d >= t)


# The JAX direct path without torch: one allocation of JAX's own per device, leaves as DLPack
# views of it (jtree._device_jax), in a fresh process that never imports torch.
_JAX_WITHOUT_TORCH = r"""
import gc, sys
import numpy as np, ml_dtypes, jax
import jtree
from jtree import _device
from jax.sharding import Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding

path = sys.argv[1]
g = np.random.default_rng(3)
tree = {
    "w": g.standard_normal((64, 12)).astype(np.float32),
    "bf": g.standard_normal((40, 6)).astype(ml_dtypes.bfloat16),
    "f8": (g.standard_normal((32, 5)) * 4).astype(ml_dtypes.float8_e4m3fn),
    "i64": g.integers(-1 << 40, 1 << 40, (9,)),
    "flags": g.integers(0, 2, (33,)).astype(bool),
    "c": (g.standard_normal(7) + 1j * g.standard_normal(7)).astype(np.complex128),
    "d": g.standard_normal((5, 4)),
    "s": np.float32(2.5),
    "e": np.zeros((0, 3), np.float32),
}
jtree.save(tree, path, compression="zstd", chunk_bytes=256)
devices = jax.devices()
rows = NamedSharding(Mesh(np.array(devices[:4]), ("a",)), PartitionSpec("a"))
one = SingleDeviceSharding(devices[5])
pick = lambda k, s: rows if k in ("w", "f8") else one
with _device.host_stand_in_for_tests() as stats:
    got = jtree.load(path, shardings=pick, cast={"float64": "float32"})
assert "torch" not in sys.modules, "the JAX direct path imported torch"
assert stats["copies"] > 0 and stats["misuses"] == 0, stats
# What the host path makes of each leaf (outside the test hook JAX's CPU devices are host
# memory): the same dtypes (JAX without x64 holds int64 as int32), the same bytes.
host = jtree.load(path, shardings=pick, cast={"float64": "float32"})
for k, v in tree.items():
    a, h = got[k], host[k]
    assert isinstance(a, jax.Array) and a.sharding == pick(k, None), k
    assert a.shape == v.shape and a.dtype == h.dtype, (k, a.dtype, h.dtype)
    raw = lambda x: np.asarray(x).reshape(-1).view(np.uint8)
    assert np.array_equal(raw(a), raw(h)), k
    if v.dtype.itemsize == a.dtype.itemsize:
        assert np.array_equal(raw(a), raw(v)), k
assert got["d"].dtype == np.float32
assert np.array_equal(np.asarray(got["d"]), tree["d"].astype(np.float32))
for shard in got["w"].addressable_shards:
    assert np.array_equal(np.asarray(shard.data), tree["w"][shard.index])
# The leaves share one allocation per device: one kept alone still holds its bytes.
keep = got["bf"]
del got, host, a, h, shard
gc.collect()
jax.numpy.zeros((1 << 16,), np.uint8).block_until_ready()  # (reuse freed memory, if any)
assert np.array_equal(raw(keep), raw(tree["bf"]))
print("ok")
"""


def test_jax_loads_leave_room_on_the_gpu_beside_their_own_memory(monkeypatch):
    # (No GPU needed: _jtree.device_memory is replaced by a spy that behaves as the native
    # one does, refusing what would not leave keep_free bytes free; the C++ refusal itself
    # is test_device_cuda's, on a GPU.)
    from jtree import _device_jax, _jtree
    from jtree._errors import ResourceExhaustedError

    class Gpu:
        def __init__(self, ordinal):
            self.local_hardware_id = ordinal

    free = {0: 10 << 30, 1: 3 << 30}
    calls = []

    def device_memory(device, size, keep_free=0):
        calls.append((device, size, keep_free))
        if free[device] - size < keep_free:
            raise ResourceExhaustedError(f"cuda:{device}: it would leave less than {keep_free}")
        return ("memory", device, size)

    monkeypatch.setattr(_device, "_stand_in", None)  # (the GPU branch)
    monkeypatch.setattr(_jtree, "device_memory", device_memory)
    a, b = Gpu(0), Gpu(1)
    got = _device_jax._native_arenas({a: 1 << 30})
    assert got == {a: ("memory", 0, 1 << 30)}
    assert calls == [(0, 1 << 30, _device_jax.NATIVE_HEADROOM)]
    # A device where the load would not leave the headroom free: JAX's allocation instead.
    assert _device_jax.NATIVE_HEADROOM == 2 << 30
    assert _device_jax._native_arenas({a: 1 << 30, b: 2 << 30}) is None
    assert calls[-1] == (1, 2 << 30, 2 << 30)


@pytest.mark.parametrize("native", ["1", "0"])
def test_jax_device_loads_free_their_memory_with_their_arrays(jax, path, native, monkeypatch):
    import gc
    import weakref

    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    from jtree import _device_jax

    # jtree's own allocations (native "1", the default) or JAX's ("0").
    monkeypatch.setenv("JTREE_JAX_NATIVE_ALLOCATION", native)
    made = []
    real = _device_jax._native_arenas

    def spy(sizes):
        got = real(sizes)
        made.extend(weakref.ref(m) for m in (got or {}).values())
        return got
    monkeypatch.setattr(_device_jax, "_native_arenas", spy)

    devices = jax.devices()
    if len(devices) < 2:
        _skip_loudly("needs 2 JAX devices (XLA_FLAGS=--xla_force_host_platform_device_count=8)")
    x = np.arange(64 * 1024, dtype=np.float32).reshape(256, 256)
    jtree.save({"x": x, "y": x[:8]}, path)
    sharding = NamedSharding(Mesh(np.array(devices[:2]), ("a",)), PartitionSpec("a"))
    gc.collect()
    before = {id(a) for a in jax.live_arrays()}
    for _ in range(3):
        with _device.host_stand_in_for_tests() as stats:
            got = jtree.load(path, shardings=sharding)
        assert stats["copies"] > 0 and np.array_equal(np.asarray(got["x"]), x)
        del got
        gc.collect()
    # The blocks the loads allocated (jtree's or JAX arrays, owned by the leaves' DLPack
    # views) are gone with the leaves: nothing a reloading server would accumulate.
    left = [a for a in jax.live_arrays() if id(a) not in before]
    assert not left, [(a.shape, a.dtype) for a in left]
    assert len(made) == (6 if native == "1" else 0)  # (3 loads x 2 devices)
    assert all(m() is None for m in made)


def test_jax_device_memory_exhausted_is_resource_exhausted(jax, path, monkeypatch):
    from jax.sharding import SingleDeviceSharding

    from jtree import _device_jax

    jtree.save({"x": np.arange(1000, dtype=np.float32)}, path)

    def full(devices, size):  # (what XLA raises when the device is full)
        raise RuntimeError(f"RESOURCE_EXHAUSTED: Out of memory while trying to allocate {size} "
                           f"bytes.")

    def native_full(size):  # (jtree's own allocation finds no room either)
        raise jtree.ResourceExhaustedError(f"cuda:0: cudaMalloc of {size} bytes: out of memory")

    monkeypatch.setattr(_device_jax, "allocate", full)
    monkeypatch.setattr(_jtree_module(), "_host_memory_for_tests", native_full)
    with _device.host_stand_in_for_tests():
        with pytest.raises(jtree.ResourceExhaustedError, match=re.escape(path) + ": JAX cannot "
                                                               "allocate .* bytes on each of .*cpu"):
            jtree.load(path, shardings=SingleDeviceSharding(jax.devices()[0]))


def _jtree_module():
    from jtree import _jtree
    return _jtree


def test_jax_loads_allocate_their_own_memory_else_jax_s(jax, path, monkeypatch):
    from jax.sharding import SingleDeviceSharding

    from jtree import _device_jax

    x = np.arange(5000, dtype=np.float32).reshape(50, 100)
    jtree.save({"x": x, "b": x[0].astype(np.int8)}, path, chunk_bytes=4096)
    jax_allocations = []
    real = _device_jax.allocate
    monkeypatch.setattr(_device_jax, "allocate",
                        lambda devices, size: jax_allocations.append(size) or real(devices, size))
    sharding = SingleDeviceSharding(jax.devices()[0])

    def load():
        with _device.host_stand_in_for_tests() as stats:
            got = jtree.load(path, shardings=sharding)
        assert stats["copies"] > 0
        assert np.array_equal(np.asarray(got["x"]), x)
        assert np.array_equal(np.asarray(got["b"]), x[0].astype(np.int8))

    load()  # jtree's own memory (cudaMalloc on a GPU; here the stand-in's host memory)
    assert jax_allocations == []
    monkeypatch.setenv("JTREE_JAX_NATIVE_ALLOCATION", "0")  # JAX's (for comparisons)
    load()
    assert len(jax_allocations) == 1
    monkeypatch.delenv("JTREE_JAX_NATIVE_ALLOCATION")

    def native_full(size):  # no room beside what XLA's allocator holds: JAX's allocation
        raise jtree.ResourceExhaustedError(f"cuda:0: cudaMalloc of {size} bytes: out of memory")
    monkeypatch.setattr(_jtree_module(), "_host_memory_for_tests", native_full)
    load()
    assert len(jax_allocations) == 2


def _storages(torch, tree):
    """{leaf name: (the data pointer of its tensor's storage, its own data pointer)} of the
    non-empty tensors of a loaded dict."""
    return {k: (t.untyped_storage().data_ptr(), t.data_ptr()) for k, t in tree.items()
            if isinstance(t, torch.Tensor) and t.numel()}


@pytest.mark.parametrize("how", ["native", "general", "slices"])
def test_a_loads_device_tensors_are_views_of_one_allocation_unless_per_tensor(torch, path,
                                                                               how):
    # (The general loader: a template; slices=: a rank's parts, through the general loader's
    # part(); the native pass: a plain load.)
    src = _tree(torch)
    jtree.save(src, path)
    many = {f"t{i}": torch.full((i + 1,), float(i)) for i in range(300)}  # 300 small tensors
    jtree.save(many, path + "2")

    def load(p, options=None):
        kw = {"device": "cpu", "framework": "torch", "device_options": options}
        if how == "general":
            return jtree.load(p, jtree.load_pytreedef(p), **kw)
        if how == "slices":
            return jtree.load(p, slices=lambda kp, spec: (slice(None),) if spec.shape else None,
                              **kw)
        return jtree.load(p, **kw)

    for p, want in ((path, src), (path + "2", many)):
        with _device.host_stand_in_for_tests():
            grouped = load(p)
            own = load(p, jtree.DeviceOptions(allocation="per_tensor"))
        _same(grouped, want)
        _same(own, want)
        ptrs = _storages(torch, grouped)
        assert len({base for base, _ in ptrs.values()}) == 1, ptrs  # one allocation
        assert all((ptr - base) % 256 == 0 for base, ptr in ptrs.values())  # aligned views
        ptrs = _storages(torch, own)
        assert len({base for base, _ in ptrs.values()}) == len(ptrs)  # one each
    # The memory lives while any of its tensors does.
    with _device.host_stand_in_for_tests():
        one = load(path + "2")["t299"]
    assert one.tolist() == [299.0] * 300


def test_a_grouped_allocation_the_device_cannot_hold_falls_back_to_one_per_tensor(torch, path,
                                                                                 monkeypatch):
    many = {f"t{i}": torch.full((100,), float(i)) for i in range(20)}  # 20 x 400 bytes
    jtree.save(many, path)
    real = torch.empty
    asked = []

    def fragmented(*shape, **kw):  # (the device has room for 4 KiB pieces, not more)
        t = real(*shape, **{**kw, "device": "meta"})
        asked.append(t.numel() * t.element_size())
        if kw.get("device") is not None and asked[-1] > 4096:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 10 KiB")
        return real(*shape, **kw)

    monkeypatch.setattr(torch, "empty", fragmented)
    with _device.host_stand_in_for_tests():
        got = jtree.load(path, device="cpu")
    _same(got, many)
    assert max(asked) > 4096  # (the grouped allocation was asked for first)
    assert len({base for base, _ in _storages(torch, got).values()}) == 20


def test_device_options_allocation_is_checked():
    assert jtree.DeviceOptions().allocation == "grouped"
    assert "allocation='per_tensor'" in repr(jtree.DeviceOptions(allocation="per_tensor"))
    with pytest.raises(jtree.InvalidArgumentError, match="allocation must be one of grouped, "
                       "per_tensor, not 'each'"):
        jtree.DeviceOptions(allocation="each")


def test_torch_device_memory_exhausted_is_resource_exhausted_naming_the_leaf(torch, path,
                                                                               monkeypatch):
    jtree.save({"a": torch.ones(10), "big": torch.ones(300, 70)}, path, compression=None)
    real = torch.empty

    def full(*shape, **kw):  # (what torch raises when the device is full, for the big leaf or
        # a load's grouped allocation, which then falls back to one per tensor)
        t = real(*shape, **{**kw, "device": "meta"})
        if kw.get("device") is not None and t.numel() * t.element_size() >= 300 * 70 * 4:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 82.03 KiB."
                                              "\nGPU 0 has a total capacity of 1 GiB")
        return real(*shape, **kw)

    monkeypatch.setattr(torch, "empty", full)
    want = (re.escape(path) + ": at 'big': out of memory on cpu allocating 84000 bytes for it "
            r"\(torch: CUDA out of memory\. Tried to allocate 82\.03 KiB\.\)$")
    for how in ("load", "like", "slice"):
        with _device.host_stand_in_for_tests():
            with pytest.raises(jtree.ResourceExhaustedError, match=want) as e:
                if how == "load":  # (the fast path: no templates)
                    jtree.load(path, device="cpu")
                elif how == "like":  # (the general path: a template of another dtype)
                    jtree.load(path, {"a": real(10), "big": real(300, 70,
                                                                  dtype=torch.float64)})
                else:
                    jtree.open(path, device="cpu")["big"][:]
        assert isinstance(e.value.__cause__, torch.cuda.OutOfMemoryError), how
        assert e.value.key_path == "big", how


def test_jax_arrays_are_imported_without_from_dlpack_and_fall_back_to_it(jax, ml_dtypes, path,
                                                                          monkeypatch):
    # _device_jax._import calls jaxlib's DLPack import itself (from_dlpack's per-call Python
    # was most of a small leaf's cost); where that function is missing or refuses the
    # arguments, jax.dlpack.from_dlpack serves: the same arrays either way.
    import types

    from jax.sharding import SingleDeviceSharding

    from jtree import _device_jax

    tree = {"f32": np.arange(12, dtype=np.float32).reshape(3, 4),
            "bf16": np.linspace(-2, 2, 10).astype(ml_dtypes.bfloat16),
            "f8": np.linspace(-1, 1, 7).astype(ml_dtypes.float8_e4m3fn),  # (bitcast on device)
            "i64": np.arange(-3, 4, dtype=np.int64),  # (int32 in JAX without x64, as before)
            "u8": np.arange(256, dtype=np.uint8).reshape(16, 16)}
    jtree.save(tree, path, compression=None)
    calls = []
    real = jax.dlpack.from_dlpack
    monkeypatch.setattr(jax.dlpack, "from_dlpack", lambda *a, **k: calls.append(1) or real(*a, **k))
    sharding = SingleDeviceSharding(jax.devices()[1])
    for refuse in (False, True):
        if refuse:  # (a jaxlib without the function; jax's from_dlpack keeps its own)
            bridge, _, version = _device_jax._jax_internals()
            monkeypatch.setattr(_device_jax, "_jax_internals",
                                lambda: (bridge, types.SimpleNamespace(), version))
            monkeypatch.setattr(_device_jax, "_import_unavailable", False)
            monkeypatch.setattr(_device_jax, "_importers", {})  # (what was looked up before)
        with _device.host_stand_in_for_tests() as engine:
            got = jtree.load(path, shardings=sharding)
        assert engine["bytes_copied"] == sum(a.nbytes for a in tree.values())
        assert len(calls) == (len(tree) if refuse else 0), refuse
        assert _device_jax._import_unavailable == refuse
        for k, a in tree.items():
            g = got[k]
            assert g.devices() == {jax.devices()[1]} and g.committed, (k, refuse)
            want = a.astype(np.int32) if k == "i64" and not jax.config.jax_enable_x64 else a
            assert g.dtype == want.dtype and g.shape == want.shape, (k, refuse)
            assert np.array_equal(np.asarray(g).view(np.uint8), want.view(np.uint8)), (k, refuse)


def test_jax_direct_path_needs_no_torch_and_views_one_allocation(jax, ml_dtypes, path):
    import subprocess
    import sys

    if len(jax.devices()) < 6:
        _skip_loudly("needs 6 JAX devices (XLA_FLAGS=--xla_force_host_platform_device_count=8)")
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8")
    r = subprocess.run([sys.executable, "-c", _JAX_WITHOUT_TORCH, path], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr


# Without shardings=, a process with one JAX device gets the direct path too; one with
# several, jax.device_put (which leaves arrays uncommitted, free to move to a computation).
_JAX_ONE_DEVICE = r"""
import sys
import numpy as np, jax
import jtree
from jtree import _device

path, want = sys.argv[1], int(sys.argv[2])
assert len(jax.devices()) == want, jax.devices()
x = np.arange(3000, dtype=np.float32).reshape(60, 50)
jtree.save({"x": x, "n": 4}, path, chunk_bytes=1024)
with _device.host_stand_in_for_tests() as stats:
    got = jtree.load(path, framework="jax")
assert np.array_equal(np.asarray(got["x"]), x) and got["n"] == 4
assert got["x"].devices() == {jax.devices()[0]}
print("direct" if stats else "host", got["x"].committed)
# Lazy slices as JAX arrays: the box of chunks straight to the device, then the index's steps
# and dropped dimensions applied there.
opts = jtree.DeviceOptions()
with jtree.open(path) as f, _device.host_stand_in_for_tests() as stats:
    for index in [(slice(5, 40, 3), 7), (slice(None, None, -2),), (Ellipsis, slice(3, 9)), 17]:
        got = f["x"].get(index, framework="jax", device_options=opts)
        assert np.array_equal(np.asarray(got), x[index]), index
print("direct" if stats and opts.last_stats else "host")
"""


@pytest.mark.parametrize("devices", [1, 8])
def test_jax_without_shardings_is_direct_only_with_one_device(jax, path, devices):
    import subprocess
    import sys

    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}")
    r = subprocess.run([sys.executable, "-c", _JAX_ONE_DEVICE, path, str(devices)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.split() == (["direct", "True", "direct"] if devices == 1 else
                                ["host", "False", "host"])


def test_jax_slices_with_several_devices_say_why_they_go_through_the_host(jax, path):
    if len(jax.devices()) < 2:
        _skip_loudly("needs 2 JAX devices (XLA_FLAGS=--xla_force_host_platform_device_count=8)")
    x = np.arange(600, dtype=np.float32).reshape(30, 20)
    jtree.save({"x": x}, path)
    with jtree.open(path) as f, _device.host_stand_in_for_tests():
        with pytest.warns(RuntimeWarning, match="the process has several devices .give "
                                                "shardings= for the direct path"):
            got = f["x"].get((slice(3, 9),), framework="jax",
                             device_options=jtree.DeviceOptions())
    assert np.array_equal(np.asarray(got), x[3:9])


def test_progress_covers_the_direct_path_and_can_cancel(torch, path):
    w = torch.arange(1 << 16, dtype=torch.float32)
    # Four leaves of one size: four staging buffer loads, each reported.
    tree = {"w": w, "v": w + 1, "u": w + 2, "t": w + 3, "n": 3}
    jtree.save(tree, path, compression="zstd", chunk_bytes=4096)
    seen = []
    with _device.host_stand_in_for_tests():
        got = jtree.load(path, device="cpu", progress=lambda d, t: seen.append((d, t)))
        assert all(torch.equal(got[k], tree[k]) for k in "wvut")
        assert seen and seen[-1][0] == seen[-1][1] >= 4 * w.numel() * 4
        assert all(a[0] <= b[0] for a, b in zip(seen, seen[1:]))  # never backwards
        assert any(d < t for d, t in seen)  # reported during the native load, not only after

        def stop(done, total):
            if done < total:  # (in the middle of the native load: it cancels there)
                raise KeyboardInterrupt("stop")

        with pytest.raises(KeyboardInterrupt, match="stop"):
            jtree.load(path, device="cpu", progress=stop)


def test_staging_memory_is_bounded_by_staging_bytes(torch, path):
    big = torch.arange(1 << 18, dtype=torch.float32)  # 1 MiB
    jtree.save({"big": big}, path, compression=None, chunk_bytes=64 << 10)
    dst = torch.empty_like(big)
    with jtree.open(path) as f:
        st = f._reader._read_staged_host_for_tests(
            [(0, None, dst.data_ptr(), dst.numel() * 4)], staging_bytes=128 << 10,
            staging_buffers=2)
    assert torch.equal(dst, big)
    assert 0 < st["peak_pinned_bytes"] <= 128 << 10
    assert st["bytes_copied"] == big.numel() * 4 and st["frees"] == st["allocations"]


def test_a_wrong_destination_size_is_a_clear_error(torch, path):
    jtree.save({"layer": {"w": torch.ones(10, 10)}}, path)
    dst = torch.empty(100)
    with jtree.open(path) as f:
        r = f._reader
        with pytest.raises(jtree.InvalidArgumentError, match=r"layer/w.*399.*400"):
            r._read_staged_host_for_tests([(0, None, dst.data_ptr(), 399)])
        with pytest.raises(jtree.InvalidArgumentError, match="layer/w"):
            r._read_staged_host_for_tests([(0, None, 0, 400)])  # no address
        with pytest.raises(jtree.InvalidArgumentError, match="layer/w"):  # a box out of range
            r._read_staged_host_for_tests([(0, ([0, 0], [11, 10]), dst.data_ptr(), 440)])
        with pytest.raises(ValueError, match="dst_address, nbytes"):
            r._read_staged_host_for_tests([(0, None, dst.data_ptr())])


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_a_damaged_chunk_is_corruption_naming_the_key_path(torch, path, compression):
    w = torch.arange(64 * 256, dtype=torch.float32).reshape(64, 256)
    jtree.save({"ok": torch.ones(1000), "model": {"w": w}}, path, compression=compression,
               chunk_bytes=16 << 10)
    with jtree.open(path) as f:
        offset, stored, _raw = f._reader.chunks(f["model"]["w"]._leaf.index)[2]
    with open(path, "r+b") as fh:
        fh.seek(offset + stored // 2)
        b = fh.read(1)
        fh.seek(offset + stored // 2)
        fh.write(bytes([b[0] ^ 0x5A]))
    with _device.host_stand_in_for_tests():
        with pytest.raises(jtree.CorruptionError, match="model/w"):
            jtree.load(path, device="cpu")
        with jtree.open(path) as f:
            with pytest.raises(jtree.CorruptionError, match="model/w"):
                f["model"]["w"].get((slice(40, 50),), device="cpu")
            assert torch.equal(f["model"]["w"].get((slice(0, 10),), device="cpu"), w[:10])


def test_without_cuda_device_cuda_is_not_supported_or_falls_back(torch, path):
    jtree.save({"w": torch.ones(4)}, path)
    if _device.cuda_device_count() == 0:
        # jtree's CUDA path is never taken without a device jtree sees...
        assert not _placement.torch_direct(torch.device("cuda:0"))
        with jtree.open(path) as f:
            with pytest.raises(jtree.NotSupportedError, match="CUDA|cuda"):
                f._reader.read_to_device([(0, None, 1 << 20, 16)], device=0)
    if not torch.cuda.is_available():
        # ... and where torch sees none either, device="cuda:0" is NotSupportedError, raised
        # before anything is read (docs: python/README.md, "For PyTorch users").
        with pytest.raises(jtree.NotSupportedError, match="torch.cuda is not available"):
            jtree.load(path, device="cuda:0")
        with jtree.open(path) as f:
            with pytest.raises(jtree.NotSupportedError, match="torch.cuda is not available"):
                f["w"].get(slice(0, 2), device="cuda:0")
    else:
        # torch has a GPU: the load lands there, directly or (jtree without CUDA) through
        # the host.
        got = jtree.load(path, device="cuda:0")
        assert got["w"].device == torch.device("cuda:0") and bool((got["w"] == 1).all())
    assert isinstance(_device.cuda_built(), bool)


# ---- device_options (jtree.DeviceOptions) through the stand-in ----------------------------

def _skip_loudly(msg):
    msg = "!!! SKIPPED: " + msg
    if os.environ.get("JTREE_TEST_REQUIRE_ALL") == "1":
        pytest.fail(msg + " -- and JTREE_TEST_REQUIRE_ALL=1 forbids skipping")
    print(msg)
    pytest.skip(msg)


def _accepts_o_direct(directory):
    probe = os.path.join(directory, "probe")
    with open(probe, "wb") as fh:
        fh.write(b"\0" * 4096)
    try:
        fd = os.open(probe, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
    except OSError:
        return False
    finally:
        os.unlink(probe)
    os.close(fd)
    return True


@pytest.fixture
def disk_path():
    """A .jtree path on a disk file system (/var/tmp: not tmpfs, which refuses O_DIRECT)."""
    d = tempfile.mkdtemp(prefix="jtree-devopts-", dir="/var/tmp")
    try:
        if not hasattr(os, "O_DIRECT") or not _accepts_o_direct(d):
            _skip_loudly(f"{d} does not accept O_DIRECT: the direct reads were not exercised")
        yield os.path.join(d, "t.jtree")
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def tmpfs_path():
    """A .jtree path on tmpfs (/dev/shm): it refuses O_DIRECT before Linux 6.6, accepts it
    since."""
    if not os.path.isdir("/dev/shm") or not os.access("/dev/shm", os.W_OK):
        _skip_loudly("no writable /dev/shm: the tmpfs case was not exercised")
    d = tempfile.mkdtemp(prefix="jtree-devopts-", dir="/dev/shm")
    try:
        yield os.path.join(d, "t.jtree")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _raw_tree(torch):
    # Two 1 MiB leaves of 64 KiB chunks, saved raw: runs of whole raw chunks, O_DIRECT's pieces.
    return {"a": torch.arange(1 << 18, dtype=torch.float32),
            "b": torch.arange(1 << 18, dtype=torch.int32).reshape(512, 512)}


@pytest.mark.parametrize("direct_io", ["auto", "on"])
def test_device_options_raw_file_on_disk_reads_with_o_direct(torch, disk_path, direct_io):
    tree = _raw_tree(torch)
    jtree.save(tree, disk_path, compression=None, chunk_bytes=64 << 10)
    evict(disk_path)  # (auto reads a file in the page cache buffered: see the next test)
    opts = jtree.DeviceOptions(staging_bytes=1 << 20, staging_buffers=2, direct_io=direct_io)
    assert opts.last_stats is None
    with _device.host_stand_in_for_tests() as engine:
        got = jtree.load(disk_path, device="cpu", device_options=opts)
    _same(tree, got)
    st = opts.last_stats
    assert isinstance(st, jtree.DeviceStats)
    total = sum(t.numel() * t.element_size() for t in tree.values())
    assert st.direct_bytes > 0, st
    assert st.direct_bytes + st.buffered_bytes == total, st
    assert st.direct_io_note == "", st
    # The staging settings were the ones given: never more than 1 MiB pinned.
    assert 0 < engine["peak_pinned_bytes"] <= 1 << 20
    assert engine["direct_bytes"] == st.direct_bytes  # (the stand-in's dict has them too)
    # direct_io="off": the same load, all through the page cache, saying why.
    off = jtree.DeviceOptions(staging_bytes=1 << 20, direct_io="off")
    with _device.host_stand_in_for_tests():
        _same(tree, jtree.load(disk_path, device="cpu", device_options=off))
    assert off.last_stats == (0, total, "direct_io is Off", 0, "")


def test_device_options_auto_reads_a_file_in_the_page_cache_buffered(torch, disk_path):
    tree = _raw_tree(torch)
    jtree.save(tree, disk_path, compression=None, chunk_bytes=64 << 10)
    with open(disk_path, "rb") as fh:  # (all of it in the page cache)
        fh.read()
    total = sum(t.numel() * t.element_size() for t in tree.values())
    opts = jtree.DeviceOptions(staging_bytes=1 << 20)
    with _device.host_stand_in_for_tests():
        _same(tree, jtree.load(disk_path, device="cpu", device_options=opts))
    assert opts.last_stats.direct_bytes == 0 and opts.last_stats.buffered_bytes == total
    assert "the file is in the page cache (100% of its pages)" in opts.last_stats.direct_io_note


def test_device_options_on_a_slice_through_the_stand_in(torch, disk_path):
    tree = _raw_tree(torch)
    jtree.save(tree, disk_path, compression=None, chunk_bytes=64 << 10)
    opts = jtree.DeviceOptions(staging_bytes=1 << 20, direct_io="on")
    with _device.host_stand_in_for_tests():
        with jtree.open(disk_path) as f:
            # Rows 128..384 of b: whole 64 KiB chunks (32 rows of 512 int32 each).
            got = f["b"].get((slice(128, 384),), device="cpu", device_options=opts)
    assert torch.equal(got, tree["b"][128:384])
    assert opts.last_stats.direct_bytes > 0
    assert opts.last_stats.direct_bytes + opts.last_stats.buffered_bytes == 256 * 512 * 4


def _check_refused(torch, tree, path):
    """A load of the raw ``tree`` saved at ``path``, where the file system refuses O_DIRECT:
    "auto" reads it all buffered and says why; "on" is NotSupportedError naming the file."""
    auto = jtree.DeviceOptions(staging_bytes=1 << 20)
    with _device.host_stand_in_for_tests():
        _same(tree, jtree.load(path, device="cpu", device_options=auto))
        assert auto.last_stats.direct_bytes == 0
        assert auto.last_stats.buffered_bytes == sum(t.numel() * t.element_size()
                                                     for t in tree.values())
        assert "O_DIRECT" in auto.last_stats.direct_io_note, auto.last_stats
        on = jtree.DeviceOptions(staging_bytes=1 << 20, direct_io="on")
        with pytest.raises(jtree.NotSupportedError,
                           match=re.escape(path) + ".*direct_io is On.*O_DIRECT"):
            jtree.load(path, device="cpu", device_options=on)
        assert on.last_stats is None


def test_device_options_a_file_system_refusing_o_direct(torch, disk_path):
    # (Simulated, as tests/unit/test_device_direct.cc does: tmpfs accepts O_DIRECT since
    # Linux 6.6, and no other such file system is at hand.)
    tree = _raw_tree(torch)
    jtree.save(tree, disk_path, compression=None, chunk_bytes=64 << 10)
    jtree._jtree._refuse_direct_open_for_tests(True)
    try:
        _check_refused(torch, tree, disk_path)
    finally:
        jtree._jtree._refuse_direct_open_for_tests(False)


def test_device_options_on_tmpfs(torch, tmpfs_path):
    tree = _raw_tree(torch)
    jtree.save(tree, tmpfs_path, compression=None, chunk_bytes=64 << 10)
    if not _accepts_o_direct(os.path.dirname(tmpfs_path)):  # (before Linux 6.6)
        _check_refused(torch, tree, tmpfs_path)
        return
    print(f"(tmpfs accepts O_DIRECT on this kernel, {os.uname().release}: the refusal is "
          f"test_device_options_a_file_system_refusing_o_direct's)")
    on = jtree.DeviceOptions(staging_bytes=1 << 20, direct_io="on")
    with _device.host_stand_in_for_tests():
        _same(tree, jtree.load(tmpfs_path, device="cpu", device_options=on))
    assert on.last_stats.direct_bytes > 0 and on.last_stats.direct_io_note == ""


def test_device_options_compressed_file_is_all_buffered(torch, path):
    tree = _raw_tree(torch)
    jtree.save(tree, path, compression="zstd", chunk_bytes=64 << 10)
    opts = jtree.DeviceOptions()
    with _device.host_stand_in_for_tests():
        _same(tree, jtree.load(path, device="cpu", device_options=opts))
    total = sum(t.numel() * t.element_size() for t in tree.values())
    assert opts.last_stats.direct_bytes == 0 and opts.last_stats.buffered_bytes == total
    # nonblocking_load and File.load take them too.
    opts.last_stats = None
    with _device.host_stand_in_for_tests():
        _same(tree, jtree.nonblocking_load(path, device="cpu", device_options=opts).result())
        assert opts.last_stats.buffered_bytes == total
        with jtree.open(path) as f:
            other = jtree.DeviceOptions(staging_buffers=2)
            _same(tree, f.load(device="cpu", device_options=other))
            assert other.last_stats.buffered_bytes == total


@pytest.mark.parametrize("kwargs, words", [
    (dict(staging_buffers=0), "staging_buffers is 0; it must be from 1 to 64"),
    (dict(staging_buffers=65), "staging_buffers is 65; it must be from 1 to 64"),
    (dict(staging_buffers=-3), "staging_buffers is -3"),
    (dict(direct_io="sometimes"), 'direct_io must be "auto", "on" or "off", not "sometimes"'),
    (dict(direct_io="ON"), 'not "ON"'),
    (dict(direct_io=True), "direct_io must be 'auto', 'on' or 'off', not bool"),
    (dict(staging_bytes=-1), "staging_bytes is -1; it must be positive"),
    (dict(staging_bytes=0), "below the minimum of 4096 bytes per buffer"),
    (dict(staging_bytes=1 << 16, staging_buffers=64), "below the minimum"),
    (dict(staging_bytes=1 << 41), "it must be at most"),
    (dict(staging_bytes=1.5e6), "staging_bytes must be an int"),
    (dict(staging_buffers=True), "staging_buffers must be an int"),
    (dict(zero_copy="always"), 'zero_copy must be "auto", "on" or "off", not "always"'),
    (dict(zero_copy=1), "zero_copy must be 'auto', 'on' or 'off', not int"),
    (dict(zero_copy="on", direct_io="on"), "zero_copy and direct_io are both on"),
])
def test_bad_device_options_are_clear_errors(kwargs, words):
    with pytest.raises(jtree.InvalidArgumentError, match=re.escape(words)):
        jtree.DeviceOptions(**kwargs)


def test_zero_copy_through_the_stand_in_copies_from_the_files_pages(torch, path):
    tree = _raw_tree(torch)
    tree["z"] = torch.ones(1000, dtype=torch.float64)  # compressed: staged beside the others
    jtree.save(tree, path, compression=None, chunk_bytes=64 << 10)
    jtree.save({**tree}, path + ".z", chunk_bytes=64 << 10)  # (zstd: no raw chunk at all)
    raw = sum(t.numel() * t.element_size() for k, t in tree.items())
    assert jtree.DeviceOptions().zero_copy == "off"  # (experimental: asked for, never default)
    for mode in ("on", "auto"):  # (the file was just written: in the page cache)
        opts = jtree.DeviceOptions(staging_bytes=1 << 20, staging_buffers=2, zero_copy=mode)
        with _device.host_stand_in_for_tests() as engine:
            got = jtree.load(path, device="cpu", device_options=opts)
        _same(tree, got)
        st = opts.last_stats
        assert st.zero_copy_bytes + st.buffered_bytes == raw, st
        assert st.zero_copy_bytes >= 2 << 20 and st.zero_copy_note == "", st  # (a and b)
        assert "zero copy serves the raw chunks" in st.direct_io_note, st
        # Every registration ended; the copies came from pinned or registered memory only.
        assert engine["registrations"] == engine["unregistrations"] > 1, engine
        assert 0 < engine["peak_registered_bytes"] <= 1 << 20, engine
        assert engine["misuses"] == 0, engine
        assert "zero_copy='" + mode + "'" in repr(opts)
    # A file with no raw chunk: staged, and said.
    opts = jtree.DeviceOptions(zero_copy="on")
    with _device.host_stand_in_for_tests():
        _same(tree, jtree.load(path + ".z", device="cpu", device_options=opts))
    assert opts.last_stats.zero_copy_bytes == 0
    assert "no piece is a run of whole raw chunks" in opts.last_stats.zero_copy_note
    # zero_copy="on" where the arrays cannot take the direct path at all: refused, as
    # direct_io="on" is (pad_truncate reads the leaf through host memory).
    with _device.host_stand_in_for_tests():
        with pytest.raises(jtree.NotSupportedError, match="pad_truncate pads a.*zero_copy='on'"):
            jtree.load(path, {"a": torch.empty(1 << 19)}, pad_truncate=True, keys="a",
                       device_options=jtree.DeviceOptions(zero_copy="on"))


def test_device_options_are_refused_where_nothing_goes_to_a_device(torch, path):
    jtree.save({"w": torch.ones(4, 4), "n": 3}, path)
    opts = jtree.DeviceOptions()
    for kw in (dict(), dict(framework="torch"), dict(device="cpu")):
        with pytest.raises(jtree.InvalidArgumentError,
                           match=re.escape(path) + ".*device_options= applies to loads into "
                                                   "device memory"):
            jtree.load(path, device_options=opts, **kw)
    with pytest.raises(jtree.InvalidArgumentError, match="must be a jtree.DeviceOptions"):
        jtree.load(path, device="cpu", device_options={"staging_buffers": 2})
    with jtree.open(path) as f:
        with pytest.raises(jtree.InvalidArgumentError, match="w.*device_options= applies"):
            f["w"].get(slice(0, 2), device_options=opts)
        with pytest.raises(jtree.InvalidArgumentError, match="device_options= applies"):
            f["w"].get(slice(0, 2), device="cpu", device_options=opts)
    # A load with no array at all has nothing to carry: nothing to refuse.
    assert jtree.load(path, keys="n", device="cpu", device_options=opts)["n"] == 3


def test_device_options_host_path_fallback_warns_or_fails_with_on(torch, path):
    # Under the stand-in, the CPU stands for a GPU. pad_truncate makes the leaf's tensor
    # larger than the stored array: it is read through host memory (then padded), so a load
    # of only such leaves "to the device" cannot use the options.
    w = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    jtree.save({"w": w}, path)
    want = torch.zeros(5, 4)
    want[:3] = w
    with _device.host_stand_in_for_tests():
        auto = jtree.DeviceOptions()
        with pytest.warns(RuntimeWarning, match="device_options not used: pad_truncate pads w"):
            got = jtree.load(path, {"w": torch.empty(5, 4)}, pad_truncate=True,
                             device_options=auto)
        assert torch.equal(got["w"], want)
        assert auto.last_stats is None
        on = jtree.DeviceOptions(direct_io="on")
        with pytest.raises(jtree.NotSupportedError, match="pad_truncate pads w.*direct_io='on'"):
            jtree.load(path, {"w": torch.empty(5, 4)}, pad_truncate=True, device_options=on)
        with jtree.open(path) as f:
            # A negative step: torch cannot index it, the slice is read on the host.
            with pytest.warns(RuntimeWarning, match="negative step"):
                got = f["w"].get((slice(None, None, -1),), device="cpu", device_options=auto)
            assert torch.equal(got, w.flip(0))
        # The warning points at the caller's line, not into jtree.
        with pytest.warns(RuntimeWarning) as rec:
            jtree.load(path, {"w": torch.empty(5, 4)}, pad_truncate=True, device_options=auto)
        assert rec[0].filename == __file__
    # jtree's direct path turned off (JTREE_DIRECT_DEVICE_LOAD=0) is said, by name.
    assert "JTREE_DIRECT_DEVICE_LOAD=0" in _why_off(torch)


def _why_off(torch):
    old = os.environ.get("JTREE_DIRECT_DEVICE_LOAD")
    os.environ["JTREE_DIRECT_DEVICE_LOAD"] = "0"
    try:
        if _device.cuda_built() and _device.cuda_device_count() > 0:
            return _placement.why_not_torch_direct(torch.device("cuda:0"))
        direct = _placement.torch_direct(torch.device("cuda:0"))
        return "JTREE_DIRECT_DEVICE_LOAD=0" if not direct else ""
    finally:
        if old is None:
            del os.environ["JTREE_DIRECT_DEVICE_LOAD"]
        else:
            os.environ["JTREE_DIRECT_DEVICE_LOAD"] = old


def test_device_options_with_jax_shardings_through_the_stand_in(torch, jax, disk_path):
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    devices = jax.devices()
    if len(devices) < 4:
        _skip_loudly("needs 4 JAX devices (XLA_FLAGS=--xla_force_host_platform_device_count=8)")
    x = np.arange(256 * 128, dtype=np.float32).reshape(256, 128)  # 128 KiB
    jtree.save({"x": x}, disk_path, compression=None, chunk_bytes=32 << 10)
    sharding = NamedSharding(Mesh(np.array(devices[:4]), ("a",)), PartitionSpec("a"))
    opts = jtree.DeviceOptions(staging_bytes=1 << 20, direct_io="on")
    with _device.host_stand_in_for_tests():
        got = jtree.load(disk_path, shardings=sharding, device_options=opts)
    assert np.array_equal(np.asarray(got["x"]), x)
    # Four devices, one native load each: the stats are their sum.
    assert opts.last_stats.direct_bytes + opts.last_stats.buffered_bytes == x.nbytes
    assert opts.last_stats.direct_bytes > 0


def test_device_options_jax_leaves_that_cannot_go_direct_warn(jax, ml_dtypes, path):
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    require("torch")
    devices = jax.devices()
    if len(devices) < 2:
        _skip_loudly("needs 2 JAX devices (XLA_FLAGS=--xla_force_host_platform_device_count=8)")
    x = (np.arange(64 * 8, dtype=np.int8).reshape(64, 8) % 8).astype(ml_dtypes.int4)
    jtree.save({"x": x}, path)
    sharding = NamedSharding(Mesh(np.array(devices[:2]), ("a",)), PartitionSpec("a"))
    with _device.host_stand_in_for_tests():
        with pytest.warns(RuntimeWarning, match="int4 JAX arrays are read through host"):
            got = jtree.load(path, shardings=sharding, device_options=jtree.DeviceOptions())
    assert np.array_equal(np.asarray(got["x"]).astype(np.int8), x.astype(np.int8))
    # Without the stand-in, JAX's CPU devices are host memory: the options are refused.
    with pytest.raises(jtree.InvalidArgumentError, match="device_options= applies"):
        jtree.load(path, shardings=sharding, device_options=jtree.DeviceOptions())


def test_release_pinned_memory_frees_only_what_device_loads_kept(torch, path):
    jtree.release_pinned_memory()  # (whatever earlier loads to a GPU kept, if any)
    jtree.save({"w": torch.arange(4096.0)}, path)
    with _device.host_stand_in_for_tests():  # (the stand-in engine keeps no pinned memory)
        jtree.load(path, device="cpu")
    assert jtree.release_pinned_memory() == 0
    assert jtree.release_pinned_memory() == 0


def test_staging_buffers_start_pinning_once_a_load_plans_half_the_staging(torch, path,
                                                                           monkeypatch):
    # (The stand-in engine pins nothing: record the calls instead; the GPU test below runs
    # the native pinning.)
    calls = []
    monkeypatch.setattr(_device, "pin_ahead", lambda dev, opts: calls.append((dev, opts)))
    leaves = {f"w{i}": torch.arange(100_000, dtype=torch.float32) + i for i in range(4)}
    jtree.save(leaves, path, compression=None)  # four leaves of 400,000 bytes
    opts = jtree.DeviceOptions(staging_bytes=1 << 20)  # half: 524,288 bytes
    with _device.host_stand_in_for_tests():
        got = jtree.load(path, device="cpu", device_options=opts)
        assert calls == [(torch.device("cpu"), opts)]  # (once, at the second leaf)
        for k, v in leaves.items():
            assert torch.equal(got[k], v), k
        out = {k: torch.empty_like(v) for k, v in leaves.items()}  # out=: the same rule
        jtree.load(path, out=out, device_options=opts)
        assert len(calls) == 2 and all(torch.equal(out[k], v) for k, v in leaves.items())
        # A load of less than half the staging memory pins only what it needs when it runs.
        jtree.load(path, device="cpu", keys=["w0"], device_options=opts)
        jtree.load(path, device="cpu")  # (the default staging: 128 MiB)
    assert len(calls) == 2


def _early_threads():
    import threading
    return [t for t in threading.enumerate() if t.name.startswith("jtree-early-read")]


def test_overlap_settings_default_and_misspelt(torch, path, monkeypatch):
    loads = []
    native = _device._native_load
    monkeypatch.setattr(_device, "_native_load", lambda reader, reqs, device, kw: loads.append(
        sum(n for _, _, _, n in reqs)) or native(reader, reqs, device, kw))
    leaves = {f"w{i}": torch.arange(100_000, dtype=torch.float32) * (i + 1) for i in range(10)}
    jtree.save(leaves, path, compression=None, chunk_bytes=64 << 10)
    opts = jtree.DeviceOptions(staging_bytes=1 << 20, staging_buffers=4)
    monkeypatch.delenv("JTREE_DEVICE_OVERLAP", raising=False)
    with _device.host_stand_in_for_tests():
        # The default pins ahead but reads after the plan, in one native call (reading while
        # planning measured slower on a GPU host: bench/gpu.md).
        got = jtree.load(path, device="cpu", device_options=opts)
        assert loads == [4_000_000] and all(torch.equal(got[k], v) for k, v in leaves.items())
        assert not _early_threads()
        for bad in ("1", "yes", ""):
            monkeypatch.setenv("JTREE_DEVICE_OVERLAP", bad)
            with pytest.raises(jtree.InvalidArgumentError,
                               match=f"JTREE_DEVICE_OVERLAP='{bad}'.*'pin'.*'reads'.*'0'"):
                jtree.load(path, device="cpu", device_options=opts)
    assert _device.OVERLAP_MODES == ("pin", "reads", "0")


def test_reads_start_while_the_plan_goes_on_in_batches_bit_exact(torch, path, monkeypatch):
    import threading

    monkeypatch.setenv("JTREE_DEVICE_OVERLAP", "reads")

    batches, synced = [], []
    native, sync = _device._native_load, _device.sync_streams

    def spy(reader, reqs, device, kw):
        batches.append(sum(n for _, _, _, n in reqs))
        return native(reader, reqs, device, kw)

    def spy_sync(reqs):
        synced.append(threading.get_ident())
        return sync(reqs)
    monkeypatch.setattr(_device, "_native_load", spy)
    monkeypatch.setattr(_device, "sync_streams", spy_sync)
    leaves = {f"w{i}": torch.arange(100_000, dtype=torch.float32) * (i + 1) for i in range(10)}
    jtree.save(leaves, path, compression=None, chunk_bytes=64 << 10)
    # A staging memory of 1 MiB: a batch each 1 MiB planned (three leaves of 400,000 bytes).
    opts = jtree.DeviceOptions(staging_bytes=1 << 20, staging_buffers=4)
    with _device.host_stand_in_for_tests() as stats:
        got = jtree.load(path, device="cpu", device_options=opts)
        assert batches == [1_200_000, 1_200_000, 1_200_000, 400_000]  # 3 early, the last
        for k, v in leaves.items():
            assert torch.equal(got[k], v), k
        # torch's streams are synchronized once a batch, by the thread that allocated the
        # tensors (torch's current stream is per thread), not by the worker reading them.
        assert synced == [threading.get_ident()] * 4
        # The load's stats and stand-in counters cover every batch.
        assert opts.last_stats.buffered_bytes + opts.last_stats.direct_bytes == 4_000_000
        assert stats["bytes_copied"] == 4_000_000
        # like= templates too (new tensors).
        batches.clear()
        got = jtree.load(path, {k: torch.empty_like(v) for k, v in leaves.items()},
                         device_options=opts)
        assert len(batches) == 4 and all(torch.equal(got[k], v) for k, v in leaves.items())
        # Not into out= tensors (a plan failing later must leave them untouched: below), nor
        # with progress=: one read, after the plan.
        batches.clear()
        out = {k: torch.empty_like(v) for k, v in leaves.items()}
        jtree.load(path, out=out, device_options=opts)
        assert batches == [4_000_000] and all(torch.equal(out[k], v) for k, v in leaves.items())
        nested = path + ".nested"
        jtree.save({"p": leaves, "q": {"x": torch.ones(3)}}, nested, compression=None)
        zeros = {"p": {k: torch.zeros_like(v) for k, v in leaves.items()},
                 "q": {"y": torch.zeros(3)}}  # (not the file's key: the plan fails at "q")
        with pytest.raises(jtree.Error, match="q"):
            jtree.load(nested, out=zeros, device_options=opts)
        assert not any(t.any() for t in zeros["p"].values())
        batches.clear()
        seen = []
        jtree.load(path, device="cpu", device_options=opts,
                   progress=lambda d, t: seen.append((d, t)))
        assert batches == [4_000_000] and seen[-1] == (4_000_000, 4_000_000)
        # The default staging (128 MiB): one read of the whole load, after the plan.
        batches.clear()
        jtree.load(path, device="cpu")
        assert batches == [4_000_000]
        # JTREE_DEVICE_OVERLAP=0: the serial load (for comparisons), one read after the plan.
        batches.clear()
        monkeypatch.setenv("JTREE_DEVICE_OVERLAP", "0")
        got = jtree.load(path, device="cpu", device_options=opts)
        assert batches == [4_000_000] and all(torch.equal(got[k], v) for k, v in leaves.items())
    assert not _early_threads()


def test_an_early_batch_error_is_the_load_error_and_nothing_outlives_the_load(torch, path,
                                                                               monkeypatch):
    monkeypatch.setenv("JTREE_DEVICE_OVERLAP", "reads")
    g = torch.Generator().manual_seed(3)
    leaves = {f"w{i}": torch.randn(100_000, generator=g) for i in range(6)}
    jtree.save(leaves, path, compression=None, chunk_bytes=64 << 10)
    opts = jtree.DeviceOptions(staging_bytes=1 << 20, staging_buffers=4)
    damaged = path + ".bad"
    shutil.copy(path, damaged)
    # Damage the bytes of the first leaves' data (well inside the first early batch).
    data = bytearray(open(damaged, "rb").read())
    at = data.find(leaves["w1"].numpy().tobytes()[:4096])
    assert at > 0
    data[at + 100] ^= 0xFF
    open(damaged, "wb").write(bytes(data))
    with _device.host_stand_in_for_tests():
        with pytest.raises(jtree.CorruptionError, match=r"w1"):
            jtree.load(damaged, device="cpu", device_options=opts)
        assert not _early_threads()
        # A plan that fails after early reads started waits for them before raising.
        with pytest.raises(jtree.NotFoundError, match="nope"):
            jtree.load(path, device="cpu", device_options=opts, keys=["w*", "nope"])
        assert not _early_threads()


def test_jax_loads_read_while_they_plan_each_batch_in_memory_of_its_own(jax, path,
                                                                         monkeypatch):
    import gc
    import weakref

    from jax.sharding import Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding

    from jtree import _device_jax

    devices = jax.devices()
    if len(devices) < 2:
        _skip_loudly("needs 2 JAX devices (XLA_FLAGS=--xla_force_host_platform_device_count=8)")
    batches, arenas, jax_allocations, pinned = [], [], [], []
    native, real_arenas, real_allocate = (_device._native_load, _device_jax._native_arenas,
                                          _device_jax.allocate)

    def spy_load(reader, reqs, device, kw):
        batches.append(sum(n for _, _, _, n in reqs))
        return native(reader, reqs, device, kw)

    def spy_arenas(sizes):
        got = real_arenas(sizes)
        arenas.extend((sizes[d], weakref.ref(m)) for d, m in (got or {}).items())
        return got
    monkeypatch.setattr(_device, "_native_load", spy_load)
    monkeypatch.setattr(_device_jax, "_native_arenas", spy_arenas)
    monkeypatch.setattr(_device_jax, "allocate", lambda devices, size: jax_allocations.append(
        size) or real_allocate(devices, size))
    monkeypatch.setattr(_device, "pin_ahead", lambda dev, opts: pinned.append(dev))
    monkeypatch.setenv("JTREE_DEVICE_OVERLAP", "reads")
    leaves = {f"w{i}": np.arange(100_000, dtype=np.float32) * (i + 1) for i in range(10)}
    jtree.save(leaves, path, compression=None, chunk_bytes=64 << 10)
    # A staging memory of 1 MiB: a batch each 1 MiB planned (three leaves of 400,000 bytes).
    opts = jtree.DeviceOptions(staging_bytes=1 << 20, staging_buffers=4)
    one = SingleDeviceSharding(devices[0])

    def load(sharding, **kw):
        with _device.host_stand_in_for_tests() as stats:
            got = jtree.load(path, shardings=sharding, device_options=opts, **kw)
        for k, v in leaves.items():
            assert np.array_equal(np.asarray(got[k]), v), k
        return got, stats

    got, stats = load(one)
    assert batches == [1_200_000, 1_200_000, 1_200_000, 400_000]  # 3 early, the last
    # Each batch in an allocation of jtree's own (its leaves at multiples of 256 bytes, one
    # alignment's slack), made as it was planned; none of JAX's.
    assert [n for n, _ in arenas] == [3 * 400_128 + 256] * 3 + [400_128 + 256]
    assert jax_allocations == []
    assert stats["bytes_copied"] == 4_000_000
    assert opts.last_stats.buffered_bytes + opts.last_stats.direct_bytes == 4_000_000
    assert pinned == [devices[0]]  # (pinning ahead, for the load's device, once)
    del got
    gc.collect()
    assert all(m() is None for _, m in arenas)  # (freed with the arrays)
    assert not _early_threads()
    # Sharded over two devices: the batches carry both devices' slices.
    batches.clear()
    arenas.clear()
    two = NamedSharding(Mesh(np.array(devices[:2]), ("a",)), PartitionSpec("a"))
    got, _ = load(two)
    # (4 batches, each a native load per device.)
    assert batches == [600_000] * 6 + [200_000] * 2
    assert len(arenas) == 8 and all(n == 3 * 200_192 + 256 for n, _ in arenas[:6])
    for shard in got["w3"].addressable_shards:
        assert np.array_equal(np.asarray(shard.data), leaves["w3"][shard.index])
    # Where jtree cannot allocate the memory itself, nothing is read early and JAX allocates
    # once for the whole load (never a compiled allocation per batch).
    for env in [("JTREE_JAX_NATIVE_ALLOCATION", "0"), None]:
        batches.clear()
        jax_allocations.clear()
        if env:
            monkeypatch.setenv(*env)
        else:
            monkeypatch.delenv("JTREE_JAX_NATIVE_ALLOCATION")

            def native_full(size):
                raise jtree.ResourceExhaustedError(f"cuda:0: cudaMalloc of {size} bytes")
            monkeypatch.setattr(_jtree_module(), "_host_memory_for_tests", native_full)
        load(one)
        assert batches == [4_000_000] and len(jax_allocations) == 1
    monkeypatch.undo()
    # The default (pinning ahead only), progress= and JTREE_DEVICE_OVERLAP=0: one read after
    # the plan.
    monkeypatch.setattr(_device, "_native_load", spy_load)
    monkeypatch.delenv("JTREE_DEVICE_OVERLAP", raising=False)
    batches.clear()
    load(one)
    assert batches == [4_000_000]
    monkeypatch.setenv("JTREE_DEVICE_OVERLAP", "reads")
    batches.clear()
    seen = []
    load(one, progress=lambda d, t: seen.append(d))
    assert batches == [4_000_000] and seen[-1] == 4_000_000
    batches.clear()
    monkeypatch.setenv("JTREE_DEVICE_OVERLAP", "0")
    load(one)
    assert batches == [4_000_000]
    assert not _early_threads()


def test_jax_single_device_loads_skip_the_general_planning(jax, ml_dtypes, path, monkeypatch):
    from jax.sharding import Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding

    from jtree import _load_jax

    devices = jax.devices()
    if len(devices) < 2:
        _skip_loudly("needs 2 JAX devices (XLA_FLAGS=--xla_force_host_platform_device_count=8)")
    general = []
    real = _load_jax.jax_array
    monkeypatch.setattr(_load_jax, "jax_array", lambda loader, fl, *a: general.append(
        fl.dtype) or real(loader, fl, *a))
    g = np.random.default_rng(9)
    x = g.standard_normal((40, 30)).astype(np.float32)
    tree = {"x": x, "tied": x, "bf": x[:5].astype(ml_dtypes.bfloat16),
            "f8": x[:3].astype(ml_dtypes.float8_e4m3fn),
            "i4": np.arange(-8, 8, dtype=ml_dtypes.int4),
            "empty": np.zeros((0, 3), np.float32), "n": 7}
    jtree.save(tree, path, chunk_bytes=1024)

    def load(sharding, **kw):
        general.clear()
        with _device.host_stand_in_for_tests() as stats:
            got = jtree.load(path, shardings=sharding, **kw)
        for k, v in tree.items():
            if k == "n":
                assert got[k] == 7
                continue
            cast = "cast" in kw and v.dtype == np.float32
            want = v.astype(ml_dtypes.bfloat16) if cast else v
            assert got[k].dtype == want.dtype and got[k].shape == want.shape, k
            assert np.array_equal(np.asarray(got[k]).view(np.uint8), want.view(np.uint8)), k
        return got, stats

    one = SingleDeviceSharding(devices[1])
    got, stats = load(one)
    # Straight to the device without the general planner, but int4 (which JAX's DLPack import
    # lacks), read through host memory by the general path as before.
    assert general == ["int4"] and stats["copies"] > 0
    assert got["tied"] is got["x"]  # (tied leaves: one array, as on the general path)
    assert all(got[k].devices() == {devices[1]} for k in ("x", "bf", "f8", "i4", "empty"))
    assert got["x"].sharding == one
    # cast= and a sharding over several devices: the general path for every array (the tied
    # leaf planned once).
    load(one, cast={"float32": "bfloat16"})
    assert len(general) == 5
    load(NamedSharding(Mesh(np.array(devices[:2]), ("a",)), PartitionSpec()))
    assert len(general) == 5


# ---- on a CUDA GPU ------------------------------------------------------------------------

def _need_gpu(torch):
    if not (torch.cuda.is_available() and _device.cuda_device_count() > 0):
        msg = ("!!! SKIPPED: no CUDA GPU on this machine (or jtree built without CUDA: "
               f"cuda_built={_device.cuda_built()}): the direct GPU load was not exercised")
        print(msg)
        pytest.skip(msg)


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_gpu_load_is_bit_exact_and_direct(torch, path, compression):
    _need_gpu(torch)
    tree = _tree(torch)
    jtree.save(tree, path, compression=compression, chunk_bytes=64 << 10)
    assert _placement.torch_direct(torch.device("cuda:0"))
    got = jtree.load(path, device="cuda:0")
    host = jtree.load(path, framework="torch")
    for k, v in host.items():
        if isinstance(v, torch.Tensor):
            assert got[k].device == torch.device("cuda:0"), k
            _same(v, got[k].cpu(), k)
        else:
            assert got[k] == v
    out = {"w": torch.empty(300, 70, device="cuda:0")}
    ptr = out["w"].data_ptr()
    res = jtree.load(path, out=out)
    assert res["w"] is out["w"] and out["w"].data_ptr() == ptr
    assert torch.equal(out["w"].cpu(), tree["w"])
    with jtree.open(path) as f:
        s = f["w"].get((slice(10, 200, 3), slice(5, 60)), device="cuda:0")
        assert s.device.type == "cuda" and torch.equal(s.cpu(), tree["w"][10:200:3, 5:60])


def test_gpu_jax_shardings(jax, ml_dtypes, path, monkeypatch):
    gpus = [d for d in jax.devices() if d.platform == "gpu"]
    if not gpus or _device.cuda_device_count() == 0:
        msg = (f"!!! SKIPPED: JAX sees {len(gpus)} GPUs, jtree's CUDA runtime "
               f"{_device.cuda_device_count()} (cuda_built={_device.cuda_built()}): direct JAX "
               f"loads not exercised")
        print(msg)
        pytest.skip(msg)
    from jax.sharding import Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding

    g = np.random.default_rng(5)
    x = np.arange(len(gpus) * 64 * 16, dtype=np.float32).reshape(len(gpus) * 64, 16)
    tree = {"x": x,
            "bf": g.standard_normal((33, 7)).astype(ml_dtypes.bfloat16),
            "f8": (g.standard_normal((16, 9)) * 4).astype(ml_dtypes.float8_e4m3fn)}
    jtree.save(tree, path, chunk_bytes=4096)
    sharding = NamedSharding(Mesh(np.array(gpus), ("a",)), PartitionSpec("a"))
    one = SingleDeviceSharding(gpus[-1])
    from jtree import _device_jax

    native = []  # what jtree's own allocation gave each load (None: no room, JAX's then)
    real = _device_jax._native_arenas
    monkeypatch.setattr(_device_jax, "_native_arenas",
                        lambda sizes: native.append(real(sizes)) or native[-1])
    # jtree's own memory (cudaMalloc), then JAX's allocation (JTREE_JAX_NATIVE_ALLOCATION=0).
    for own in (True, False):
        if not own:
            monkeypatch.setenv("JTREE_JAX_NATIVE_ALLOCATION", "0")
        native.clear()
        opts = jtree.DeviceOptions()
        before = gpus[-1].memory_stats()["bytes_in_use"]
        got = jtree.load(path, shardings=lambda k, s: sharding if k == "x" else one,
                         device_options=opts)
        assert got["x"].sharding == sharding and np.array_equal(np.asarray(got["x"]), x)
        for k in ("bf", "f8"):
            assert got[k].sharding == one and got[k].dtype == tree[k].dtype, k
            assert np.array_equal(np.asarray(got[k]).view(np.uint8), tree[k].view(np.uint8)), k
        # Straight to the devices (the stats count every byte).
        total = sum(v.nbytes for v in tree.values())
        assert opts.last_stats.direct_bytes + opts.last_stats.buffered_bytes == total
        if own and os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE") == "false":
            # (XLA took no pool ahead: the device has the room for jtree's allocation.)
            assert native and all(m is not None for m in native), native
        if not own:  # in memory JAX's allocator holds
            assert gpus[-1].memory_stats()["bytes_in_use"] - before >= tree["bf"].nbytes
        del got


def test_gpu_zero_copy_from_the_page_cache(torch, path):
    _need_gpu(torch)
    tree = _raw_tree(torch)
    jtree.save(tree, path, compression=None, chunk_bytes=64 << 10)
    total = sum(t.numel() * t.element_size() for t in tree.values())
    jtree.release_pinned_memory()
    opts = jtree.DeviceOptions(zero_copy="on")
    try:
        got = jtree.load(path, device="cuda:0", device_options=opts)
    except jtree.NotSupportedError as e:  # (a device without read-only registration)
        msg = f"!!! zero copy NOT exercised on this GPU: {e}"
        print(msg)
        pytest.skip(msg)
    for k, v in tree.items():
        assert got[k].device == torch.device("cuda:0") and torch.equal(got[k].cpu(), v), k
    assert opts.last_stats.zero_copy_bytes == total, opts.last_stats
    assert jtree.release_pinned_memory() == 0  # (nothing was staged: nothing pinned)


def test_gpu_load_with_device_options_reports_what_it_did(torch, path):
    _need_gpu(torch)
    tree = _raw_tree(torch)
    # (pytest's tmp_path: a disk or tmpfs, whichever; the stats must agree with either.)
    jtree.save(tree, path, compression=None, chunk_bytes=64 << 10)
    total = sum(t.numel() * t.element_size() for t in tree.values())
    opts = jtree.DeviceOptions(staging_bytes=4 << 20, staging_buffers=2, direct_io="auto")
    got = jtree.load(path, device="cuda:0", device_options=opts)
    for k, v in tree.items():
        assert got[k].device == torch.device("cuda:0") and torch.equal(got[k].cpu(), v), k
    st = opts.last_stats
    assert st.direct_bytes + st.buffered_bytes == total, st
    # The staging buffers stay pinned for the next load until released (once).
    assert jtree.release_pinned_memory() > 0
    assert jtree.release_pinned_memory() == 0
    assert st.direct_bytes > 0 or st.direct_io_note, st
    with jtree.open(path) as f:
        s = f["b"].get((slice(64, 128),), device="cuda:0", device_options=opts)
        assert torch.equal(s.cpu(), tree["b"][64:128])
    off = jtree.DeviceOptions(direct_io="off")
    jtree.load(path, device="cuda:0", device_options=off)
    assert off.last_stats == (0, total, "direct_io is Off", 0, "")
    with pytest.raises(jtree.InvalidArgumentError, match="staging_buffers is 65"):
        jtree.DeviceOptions(staging_buffers=65)


def test_gpu_staging_buffers_pinned_ahead_serve_the_load(torch, path):
    _need_gpu(torch)
    jtree.release_pinned_memory()
    leaves = {f"w{i}": torch.arange(1 << 20, dtype=torch.float32) + i for i in range(4)}
    jtree.save(leaves, path, compression=None)  # 16 MiB
    opts = jtree.DeviceOptions(staging_bytes=8 << 20, staging_buffers=4)
    got = jtree.load(path, device="cuda:0", device_options=opts)  # (pins ahead at 4 MiB)
    for k, v in leaves.items():
        assert torch.equal(got[k].cpu(), v), k
    # The four 2 MiB buffers pinned ahead served the load and stayed cached; none twice.
    assert jtree.release_pinned_memory() == 8 << 20


@pytest.mark.parametrize("overlap", ["pin", "reads"])
def test_gpu_early_reads_inside_a_side_stream_wait_for_its_work(torch, path, monkeypatch,
                                                                 overlap):
    _need_gpu(torch)
    monkeypatch.setenv("JTREE_DEVICE_OVERLAP", overlap)  # (the default, and early reads)
    g = torch.Generator().manual_seed(11)
    leaves = {f"w{i}": torch.randn(1 << 20, generator=g) for i in range(8)}  # 32 MiB
    jtree.save(leaves, path, compression=None)
    opts = jtree.DeviceOptions(staging_bytes=8 << 20, staging_buffers=4)  # early batches
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        # Work queued on the side stream into a block freed at once: the load's tensors are
        # carved out of it while that work may still run. The load must wait for it (it
        # synchronizes torch's current stream of the thread that allocated them, s), or the
        # work would overwrite what was read.
        x = torch.ones(8 << 20, device="cuda:0")
        for _ in range(2000):
            x.mul_(1.0001)
        del x
        got = jtree.load(path, device="cuda:0", device_options=opts)
    torch.cuda.synchronize()
    for k, v in leaves.items():
        assert torch.equal(got[k].cpu(), v), k
