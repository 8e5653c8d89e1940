"""JAX arrays on a CPU: ``jtree.load(f, framework="jax")`` where the process's one JAX device is
a CPU is the native plain pass (jtree._load_plain: the NumPy load, each array then imported
into JAX through DLPack, jtree._device_jax.to_cpu_device), and the general loader imports its
whole arrays for that device the same way. It must give what ``jax.device_put`` of the NumPy
load gives: the same values, dtypes (64-bit types made 32-bit without jax_enable_x64), shapes
and device, tied leaves as one array; and decline where it does not do the same.

The suite runs JAX with 8 CPU devices (the sharding tests need them), where a load without
shardings= is jax.device_put's (uncommitted arrays, free to move): those tests stand one
device in through ``_placement.only_jax_device``; a subprocess checks a real one-device process."""
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import jtree
from jtree import _device_jax, _load_jax, _load_plain, _load_plan, _placement


@pytest.fixture
def one_cpu(jax, monkeypatch):
    """The process as if JAX's first CPU were its only device (only_jax_device's answer)."""
    dev = jax.devices("cpu")[0]
    monkeypatch.setattr(_placement, "only_jax_device", lambda: (dev, ""))
    return dev


class Spy:
    """Counts the native plain loads (True: loaded, False: declined) and the leaves the general
    JAX planner planned."""

    def __init__(self, monkeypatch):
        self.plain, self.general = [], 0
        real_load, real_array = _load_plain.load, _load_jax.jax_array

        def load(*args):
            got = real_load(*args)
            self.plain.append(got is not None)
            return got

        def jax_array(*args):
            self.general += 1
            return real_array(*args)

        monkeypatch.setattr(_load_plain, "load", load)
        monkeypatch.setattr(_load_jax, "jax_array", jax_array)


def general_load(monkeypatch, *args, **kw):
    with monkeypatch.context() as m:
        m.setattr(_load_plain, "applies", lambda o: False)
        return jtree.load(*args, **kw)


def tree():
    rng = np.random.default_rng(3)
    tied = rng.standard_normal((64, 33)).astype(np.float32)
    return {
        "big": rng.standard_normal((300, 200)).astype(np.float32),  # chunked
        "small": np.arange(4, dtype=np.int16),                      # inline in the header
        "bf16": rng.standard_normal(1000).astype(ml_dtypes.bfloat16),
        "f16": np.linspace(-1, 1, 7, dtype=np.float16),
        "i64": np.arange(5, dtype=np.int64) - 2,    # int32 in JAX without jax_enable_x64
        "f64": np.linspace(0, 1, 9),
        "c64": (np.arange(6) + 1j).astype(np.complex64).reshape(2, 3),
        "u8": np.arange(200, dtype=np.uint8),
        "bool": np.array([True, False, True]),
        "empty": np.zeros((0, 5), np.float32),
        "scalar_np": np.float32(2.5),               # a 0-d JAX array
        "tied_a": tied, "tied_b": tied,
        "py": [1, 2.5, "s", b"b", None, (True,)],
    }


def same_jax(jax, a, b, path="root"):
    """a and b: the same tree of JAX arrays (type, dtype, shape, bits, devices) and values."""
    assert type(a) is type(b), path
    if isinstance(a, jax.Array):
        assert a.dtype == b.dtype and a.shape == b.shape, path
        assert a.devices() == b.devices(), path
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes(), path
    elif isinstance(a, dict):
        assert list(a) == list(b), path
        for k in a:
            same_jax(jax, a[k], b[k], f"{path}/{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            same_jax(jax, x, y, f"{path}/{i}")
    else:
        assert a == b, path


@pytest.mark.parametrize("compression", ["zstd", None])
@pytest.mark.parametrize("mmap", [True, "r", False])
def test_the_plain_jax_load_equals_device_put_of_the_numpy_load(jax, one_cpu, monkeypatch,
                                                                 path, compression, mmap):
    t = tree()
    jtree.save(t, path, compression=compression)
    spy = Spy(monkeypatch)
    got = jtree.load(path, framework="jax", mmap=mmap)
    assert spy.plain == [True] and spy.general == 0  # the native pass loaded it
    want = {k: jax.device_put(v) if isinstance(v, (np.ndarray, np.generic)) else v
            for k, v in jtree.load(path, mmap=mmap).items()}
    want["tied_b"] = want["tied_a"]
    same_jax(jax, got, want)
    # The general loader's per-leaf planning (a target, say) imports its arrays the same way.
    same_jax(jax, slow_load(monkeypatch, path, framework="jax", mmap=mmap), got)
    assert spy.general == len([k for k in t if k != "py"]) - 1  # (tied: one array)
    assert got["i64"].dtype == np.int32 and got["bf16"].dtype == ml_dtypes.bfloat16
    assert got["tied_a"] is got["tied_b"]
    assert got["big"].devices() == {one_cpu} and got["big"].committed
    assert got["scalar_np"].shape == () and float(got["scalar_np"]) == 2.5


def test_selections_and_parts_take_the_plain_jax_load(jax, one_cpu, monkeypatch, path):
    t = tree()
    jtree.save(t, path)
    spy = Spy(monkeypatch)
    got = jtree.load(path, framework="jax", keys=["big", "**/bf16"], prune=True)
    assert sorted(got) == ["bf16", "big"]
    np.testing.assert_array_equal(np.asarray(got["big"]), t["big"])
    with jtree.open(path) as f:
        part = jtree.load(f["py"], framework="jax")
    assert part == [1, 2.5, "s", b"b", None, (True,)]
    assert spy.plain == [True, True] and spy.general == 0


def test_a_dtype_dlpack_does_not_carry_is_declined_to_the_general_loader(jax, one_cpu,
                                                                        monkeypatch, path):
    x = np.linspace(-2, 2, 17).astype(ml_dtypes.float8_e4m3fn)
    jtree.save({"f8": x, "w": np.ones(3, np.float32)}, path)
    spy = Spy(monkeypatch)
    got = jtree.load(path, framework="jax")
    # (Declined before reading; then float8 planned generally, the float32 one as stored.)
    assert spy.plain == [False] and spy.general == 1
    assert got["f8"].dtype == ml_dtypes.float8_e4m3fn
    assert np.asarray(got["f8"]).tobytes() == x.tobytes()


def test_donating_a_mapped_array_leaves_the_file_unchanged(jax, one_cpu, path):
    # XLA keeps an aligned leaf's bytes where they are (the file's map, copy-on-write even for
    # mmap="r"): a computation that donates the array must not change the file or later loads.
    w = np.arange(100_000, dtype=np.float32)
    jtree.save({"w": w}, path, compression=None)
    for mmap in (True, "r"):
        got = jtree.load(path, framework="jax", mmap=mmap)
        out = jax.jit(lambda a: a * 0 - 1, donate_argnums=0)(got["w"])
        assert float(out[0]) == -1.0
        np.testing.assert_array_equal(jtree.load(path)["w"], w)


def test_several_devices_keep_device_put_and_uncommitted_arrays(jax, monkeypatch, path):
    if len(jax.devices()) < 2:
        pytest.skip("!!! SKIPPED: needs 2 JAX devices (XLA_FLAGS=...device_count=8)")
    jtree.save({"w": np.ones(10, np.float32)}, path)
    spy = Spy(monkeypatch)
    got = jtree.load(path, framework="jax")
    assert spy.plain == [] and spy.general == 1
    assert not got["w"].committed  # (free to move to where a computation runs)


def test_to_cpu_device_serves_only_what_it_imports_as_device_put_would(jax):
    first, d1 = jax.devices("cpu")[0], jax.devices("cpu")[-1]
    bf = np.arange(12, dtype=np.float32).astype(ml_dtypes.bfloat16).reshape(3, 4)
    got = _device_jax.to_cpu_device(bf, first)
    assert got.dtype == ml_dtypes.bfloat16 and got.devices() == {first}
    assert np.asarray(got).tobytes() == bf.tobytes()
    assert _device_jax.to_cpu_device(np.zeros((0, 3), np.float32), first) is None  # empty
    assert _device_jax.to_cpu_device(np.ones((4, 4), np.float32)[:, 1], first) is None
    assert _device_jax.to_cpu_device(np.ones(3, ml_dtypes.float8_e5m2), first) is None
    if not jax.config.jax_enable_x64:
        assert _device_jax.to_cpu_device(np.arange(3), first) is None  # (made int32 there)
    # Any of the process's CPU devices (a sharded array's shards), committed there.
    got = _device_jax.to_cpu_device(np.ones(3, np.float32), d1)
    assert got.devices() == {d1} and got.committed
    np.testing.assert_array_equal(np.asarray(got), np.ones(3, np.float32))


def test_an_import_that_lands_elsewhere_is_not_used_for_that_device(jax, monkeypatch):
    # jaxlib is given the device to import into; where a version placed the tensor on its own
    # device instead (the DLPack tensor says "CPU 0"), the probe of _cpu_importer sees it once
    # and that device keeps jax.device_put.
    cpus = jax.devices("cpu")
    if len(cpus) < 2:
        _need_devices()
    real = _device_jax._import_target

    def ignores_the_device(dl_type, ordinal):
        dev, stream, to_buffer = real(dl_type, ordinal)
        first = real(dl_type, 0)[0]
        return dev, stream, lambda capsule, d, st: to_buffer(capsule, first, st)

    monkeypatch.setattr(_device_jax, "_import_target", ignores_the_device)
    monkeypatch.setattr(_device_jax, "_cpu_importers", {})
    assert _device_jax.to_cpu_device(np.ones(3, np.float32), cpus[1]) is None
    assert _device_jax._cpu_importers == {cpus[1]: None}  # (asked once)
    assert _device_jax.to_cpu_device(np.ones(3, np.float32), cpus[0]).devices() == {cpus[0]}


def _need_devices():
    pytest.skip("!!! SKIPPED: needs 8 JAX CPU devices (XLA_FLAGS=...device_count=8)")


@pytest.mark.parametrize("small", [True, False])
def test_shardings_over_cpu_devices_put_or_import_every_shard(jax, monkeypatch, path, small):
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    from jtree import _dtypes

    cpus = jax.devices("cpu")
    if len(cpus) < 8:
        _need_devices()
    # small: these leaves read whole, once, and placed by one jax.device_put with their
    # sharding (_load_jax.SMALL_LEAF_BYTES); else a read per slice (replicas once), each
    # shard imported through DLPack, each replica its own copy.
    puts = []
    real_put = _dtypes.jax_device_put

    def spy_put(x, device=None, *rest):
        puts.append(device)
        return real_put(x, device, *rest)
    monkeypatch.setattr(_dtypes, "jax_device_put", spy_put)
    reads = []
    real_box = _load_plan.Loader.host_box

    def spy_box(self, fl, box, p, dst=None):
        reads.append(box)
        return real_box(self, fl, box, p, dst)
    monkeypatch.setattr(_load_plan.Loader, "host_box", spy_box)
    if not small:
        monkeypatch.setattr(_load_jax, "SMALL_LEAF_BYTES", -1)
    imported = []
    real = _device_jax.to_cpu_device

    def spy(a, d):
        got = real(a, d)
        if got is not None:  # (imported, not left to jax.device_put)
            imported.append(d)
        return got
    monkeypatch.setattr(_device_jax, "to_cpu_device", spy)
    r = np.random.default_rng(5)
    tree = {"w": r.standard_normal((64, 6), dtype=np.float32),
            "b": r.standard_normal((8, 3)).astype(ml_dtypes.bfloat16),
            "i": np.arange(40, dtype=np.int32).reshape(8, 5)}
    jtree.save(tree, path, compression=None)
    mesh = Mesh(np.array(cpus[:8]).reshape(4, 2), ("x", "y"))
    for spec in (PartitionSpec(), PartitionSpec("x"), PartitionSpec("x", "y"),
                 PartitionSpec(None, "y")):
        sharding = NamedSharding(mesh, spec)
        imported.clear()
        reads.clear()
        puts.clear()
        target = {k: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=sharding)
                  for k, v in tree.items() if v.shape[-1] % 2 == 0 or "y" not in spec}
        got = jtree.load(path, dict(target, **{k: None for k in tree if k not in target}))
        boxes = len({tuple((i.start, i.stop) for i in index)
                     for index in sharding.addressable_devices_indices_map((8, 2)).values()})
        assert len(reads) == len(target) * (1 if small or boxes == 1 else boxes), spec
        for k in target:
            a = got[k]
            assert a.sharding == sharding and a.dtype == tree[k].dtype, (k, spec)
            np.testing.assert_array_equal(np.asarray(a), tree[k])
            for shard in a.addressable_shards:
                np.testing.assert_array_equal(np.asarray(shard.data), tree[k][shard.index])
            if not small:
                # Imported replicas do not share memory (an import may keep the host bytes as
                # they are): a computation donating the array may write each shard in place.
                pointers = [s.data.unsafe_buffer_pointer() for s in a.addressable_shards]
                assert len(set(pointers)) == len(pointers), (k, spec)
        if small:  # (one jax.device_put per leaf, with its sharding; no import)
            assert puts == [sharding] * len(target) and imported == [], spec
        else:
            assert len(imported) == 8 * len(target) and puts == []  # (every shard imported)
    # Donated, each replica computes from its own bytes, over and over (jax.device_put's
    # replicas may share the host bytes: XLA must not write into them).
    sharding = NamedSharding(mesh, PartitionSpec())
    for k in ("w", "i"):
        got = jtree.load(path, {n: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=sharding)
                                if n == k else None for n, v in tree.items()})
        out = got[k]
        for _ in range(3):
            out = jax.jit(lambda a: a + 1, donate_argnums=0)(out)
        want = tree[k] + tree[k].dtype.type(1)
        want = want + want.dtype.type(1)
        want = want + want.dtype.type(1)  # (three roundings, as the three computations)
        for shard in out.addressable_shards:
            np.testing.assert_array_equal(np.asarray(shard.data), want)


_ONE_DEVICE = r"""
import sys
import numpy as np, jax, ml_dtypes
import jtree
from jtree import _load_plain

path = sys.argv[1]
assert len(jax.devices()) == 1, jax.devices()
seen = []
real = _load_plain.load
_load_plain.load = lambda *a: seen.append(1) or real(*a)
x = np.arange(3000, dtype=np.float32).reshape(60, 50)
jtree.save({"x": x, "b": x.astype(ml_dtypes.bfloat16), "n": 4}, path)
got = jtree.load(path, framework="jax")
assert seen == [1] and got["n"] == 4
assert np.array_equal(np.asarray(got["x"]), x) and got["b"].dtype == ml_dtypes.bfloat16
assert got["x"].devices() == {jax.devices()[0]} and got["x"].committed
print("ok")
"""


def test_a_process_with_one_cpu_device_takes_the_plain_jax_load(jax, path):
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=1")
    r = subprocess.run([sys.executable, "-c", _ONE_DEVICE, path], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.split() == ["ok"], r.stdout + r.stderr


# ---- the general loader's fast paths: a target of the stored shape and dtype ----

def slow_load(monkeypatch, *args, **kw):
    """jtree.load with every fast path of the general loader off (and no plain pass)."""
    with monkeypatch.context() as m:
        m.setattr(_load_plain, "applies", lambda o: False)
        m.setattr(_load_jax.ADAPTER, "from_template", lambda *a: None)
        m.setattr(_load_jax.ADAPTER, "as_stored", lambda *a: None)
        m.setattr(_load_plan.Loader, "spec_as_stored", lambda *a: None)
        m.setattr(_load_plan.Loader, "own_structure", lambda *a: False)
        return jtree.load(*args, **kw)


def arrays_of(t):
    return {k: v for k, v in t.items() if k != "py"}


@pytest.mark.parametrize("framework", ["numpy", "jax", "torch"])
def test_load_pytreedef_as_the_target_is_the_leaves_as_stored(jax, one_cpu, monkeypatch, path,
                                                              framework, request):
    if framework == "torch":
        request.getfixturevalue("torch")
    t = tree()
    jtree.save(t, path)
    spec = jtree.load_pytreedef(path)
    spy = Spy(monkeypatch)
    got = jtree.load(path, spec, framework=framework)
    planned_generally = spy.general
    want = slow_load(monkeypatch, path, spec, framework=framework)
    if framework == "jax":
        assert planned_generally == 0
        same_jax(jax, got, want)
    else:
        from conftest import assert_same  # noqa: PLC0415
        if framework == "torch":
            import torch  # noqa: PLC0415
            for k in got:
                if isinstance(got[k], torch.Tensor):
                    assert got[k].dtype == want[k].dtype and torch.equal(got[k], want[k]), k
                else:
                    assert type(got[k]) is type(want[k]), k
        else:
            assert_same(got, want)
    assert got["tied_a"] is got["tied_b"]


def test_shape_dtype_structs_without_sharding_are_the_leaves_as_stored(jax, one_cpu,
                                                                       monkeypatch, path):
    t = arrays_of(tree())
    jtree.save(t, path)
    sds = {k: jax.ShapeDtypeStruct(np.shape(v), np.asarray(v).dtype) for k, v in t.items()}
    spy = Spy(monkeypatch)
    got = jtree.load(path, sds)
    assert spy.general == 0
    want = slow_load(monkeypatch, path, sds)
    assert spy.general > 0  # (the slow load planned its leaves generally)
    same_jax(jax, got, want)
    # Another dtype (a cast), another shape (pad_truncate) or a sharding: the general path.
    spy.general = 0
    other = dict(sds, big=jax.ShapeDtypeStruct((300, 200), np.float16),
                 small=jax.ShapeDtypeStruct((6,), np.int16),
                 u8=jax.ShapeDtypeStruct((200,), np.uint8,
                                         sharding=jax.sharding.SingleDeviceSharding(one_cpu)))
    got = jtree.load(path, other, pad_truncate=True)
    assert spy.general == 3
    assert got["big"].dtype == np.float16 and got["small"].shape == (6,)
    np.testing.assert_array_equal(np.asarray(got["u8"]), t["u8"])


def test_jax_loads_the_plain_pass_does_not_serve_import_too(jax, one_cpu, monkeypatch, path):
    # prune=True alone, progress=, shardings=SingleDeviceSharding: the general loader, whose
    # whole arrays for the one CPU take the same import (as_stored's CPU case).
    t = tree()
    jtree.save(t, path)
    calls = []
    real = _device_jax.to_cpu_device
    monkeypatch.setattr(_device_jax, "to_cpu_device", lambda *a: calls.append(1) or real(*a))
    for kw in (dict(prune=True), dict(progress=lambda done, total: None),
               dict(shardings=jax.sharding.SingleDeviceSharding(one_cpu))):
        calls.clear()
        got = jtree.load(path, framework="jax", **kw)
        want = slow_load(monkeypatch, path, framework="jax", **kw)
        same_jax(jax, got, want)
        assert len(calls) >= 10, kw  # (the arrays DLPack carries went through it)
        assert got["big"].committed


def test_leaf_spec_dtypes_given_as_types_or_names_are_the_stored_dtype(monkeypatch, path):
    # A LeafSpec's dtype written by hand: a NumPy type (np.float16), a dtype or a name.
    import dataclasses  # noqa: PLC0415

    t = {"a": np.arange(6, dtype=np.float16), "b": np.arange(3, dtype=np.int32),
         "c": np.ones(2, np.uint8)}
    jtree.save(t, path)
    spec = jtree.load_pytreedef(path)
    spec = {"a": dataclasses.replace(spec["a"], dtype=np.float16),
            "b": dataclasses.replace(spec["b"], dtype="int32"),
            "c": dataclasses.replace(spec["c"], dtype=np.dtype(np.float32))}  # (a cast)
    got = jtree.load(path, spec)
    want = slow_load(monkeypatch, path, spec)
    for k in t:
        assert got[k].dtype == want[k].dtype and np.array_equal(got[k], want[k]), k
    assert got["c"].dtype == np.float32


@pytest.mark.parametrize("framework", ["numpy", "jax"])
def test_the_files_own_structure_as_the_target_is_the_plain_load(jax, one_cpu, monkeypatch,
                                                                  tmp_path, framework):
    # load(path, pytree=load_pytreedef(path)), the JAX proposal's restore: every leaf as
    # stored, so the plain pass; namedtuples, OrderedDicts, int keys, None and values too.
    from test_plain_load import mixed_tree  # noqa: PLC0415

    t = mixed_tree()
    del t["f8"], t["i4"]  # (dtypes DLPack does not carry: the plain JAX pass declines them)
    path = str(tmp_path / "m.jtree")
    jtree.save(t, path)
    spec = jtree.load_pytreedef(path)
    spy = Spy(monkeypatch)
    got = jtree.load(path, spec, framework=framework)
    assert spy.plain == [True]
    want = slow_load(monkeypatch, path, spec, framework=framework)
    from conftest import assert_same  # noqa: PLC0415

    def host(x):  # (JAX arrays as NumPy, containers kept: int and str keys side by side)
        if isinstance(x, jax.Array):
            return np.asarray(x)
        if isinstance(x, dict):
            return type(x)((k, host(v)) for k, v in x.items())
        if isinstance(x, tuple) and hasattr(x, "_fields"):
            return type(x)(*[host(v) for v in x])
        if isinstance(x, (list, tuple)):
            return type(x)(host(v) for v in x)
        return x

    if framework == "jax":
        assert isinstance(got["big"], jax.Array) and isinstance(want["big"], jax.Array)
    assert_same(host(got), host(want))
    # Edited (a leaf skipped), or holding an array: the general loader, no error.
    spy.plain.clear()
    edited = dict(spec, small=None)
    assert jtree.load(path, edited, framework=framework)["small"] is None
    with_array = dict(spec, small=np.zeros(4, np.int16))
    assert jtree.load(path, with_array, framework=framework)["small"].shape == (4,)
    assert spy.plain == []


def test_a_structure_this_process_cannot_build_leaves_the_target_to_the_general_path(
        monkeypatch, path):
    # (A custom node whose class is not importable here: load_pytreedef's tree cannot be built,
    # which is no error for a target that skips that node.)
    jtree.save({"a": np.arange(3), "b": np.ones(2)}, path)
    spec = jtree.load_pytreedef(path)

    def cannot(*_a, **_k):
        raise jtree.NotSupportedError("the file holds a custom node this process lacks")

    monkeypatch.setattr(_load_plan, "spec_tree", cannot)
    got = jtree.load(path, dict(spec, b=None))
    np.testing.assert_array_equal(got["a"], np.arange(3))
    assert got["b"] is None


def test_a_dtype_jaxlib_refuses_to_import_falls_back_to_device_put(jax, monkeypatch):
    # (An older jaxlib may refuse a dtype over DLPack, or the call's arguments.)
    dev = jax.devices("cpu")[0]
    x = np.array([True, False, True])
    monkeypatch.setattr(_device_jax, "_cpu_codes", {})
    monkeypatch.setattr(_device_jax, "_cpu_importers", {})

    def refuses(a, code):
        raise RuntimeError("UNIMPLEMENTED: this dtype over DLPack")

    monkeypatch.setattr(_device_jax, "_cpu_importer", lambda device: refuses)
    assert _device_jax.to_cpu_device(x, dev) is None  # (the caller's jax.device_put)
    assert _device_jax.to_cpu_device(x, dev) is None  # (not asked again)
    assert list(_device_jax._cpu_codes.values()) == [None]
