"""`jtree convert` for orbax checkpoint directories, JAX pytree_serialization directories and
flax msgpack files (python/jtree/convert/_from_orbax.py, _from_flax.py).

Inputs are written by the peers' own libraries; the .jtree file must hold the same structure
and the same arrays bit for bit (dtype, shape, bytes; bfloat16 and float8 included) as the
peers' own restore gives. Damaged inputs give a clear error naming the input and leave no
output.
"""
import os
import shutil

import numpy as np
import pytest

import jtree
from conftest import require

ml_dtypes = require("ml_dtypes")


def _same_array(a, b, where):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype, f"{where}: {a.dtype} != {b.dtype}"
    assert a.shape == b.shape, f"{where}: {a.shape} != {b.shape}"
    assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes(), where


def _same_tree(got, want, where="root"):
    """``got`` (jtree.load) equals ``want`` (the peer's restore): containers, arrays bit for
    bit, other leaves by value."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want), where
        for k in want:
            _same_tree(got[k], want[k], f"{where}/{k}")
    elif isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            _same_tree(g, w, f"{where}/{i}")
    elif hasattr(want, "dtype") and hasattr(want, "shape"):
        _same_array(got, want, where)
    else:
        assert got == want and type(got) is type(want), f"{where}: {got!r} != {want!r}"


def _arrays(rng):
    return {
        "kernel": rng.standard_normal((33, 7)).astype(np.float32),
        "bias": rng.standard_normal(7).astype(ml_dtypes.bfloat16),
        "half": rng.standard_normal((2, 3)).astype(np.float16),
        "f8": rng.standard_normal(5).astype(ml_dtypes.float8_e4m3fn),
        "i8": rng.integers(-128, 127, 9).astype(np.int8),
        "u64": np.array([0, 2 ** 64 - 1], np.uint64),
        "c64": (rng.standard_normal(3) + 1j).astype(np.complex64),
        "flags": np.array([True, False]),
        "nan": np.array([np.nan, -0.0, np.inf], np.float32),
        "empty": np.zeros((0, 3), np.float32),
    }


def _no_output(tmp_path, names):
    assert sorted(os.listdir(tmp_path)) == sorted(names)


# ---- flax msgpack -------------------------------------------------------------------------------

@pytest.fixture
def flax_ser():
    require("flax")
    from flax import serialization
    return serialization


def test_flax_msgpack_bit_exact(flax_ser, tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    # Small chunks: flax splits arrays larger than MAX_CHUNK_SIZE; the reader must join them.
    monkeypatch.setattr(flax_ser, "MAX_CHUNK_SIZE", 256)
    state = {"params": {"dense": _arrays(rng), "layers": [{"w": np.ones((40, 4))}]},
             "step": np.int64(12), "lr": 0.5, "name": "run", "count": 3, "none": None,
             "z": complex(1, 2)}
    src = tmp_path / "state.msgpack"
    src.write_bytes(flax_ser.to_bytes(state))
    want = flax_ser.msgpack_restore(src.read_bytes())
    dst = str(tmp_path / "state.jtree")
    st = jtree.convert(str(src), dst, verify=True)
    assert (st.src_format, st.verified) == ("flax", True)
    got = jtree.load(dst)
    # NumPy scalars come back as 0-d arrays of their dtype.
    want["step"] = np.asarray(want["step"])
    _same_tree(got, want)
    assert got["params"]["dense"]["bias"].dtype == ml_dtypes.bfloat16
    assert got["params"]["layers"]["0"]["w"].shape == (40, 4)  # flax: lists -> '0', '1'


def test_flax_detection(flax_ser, tmp_path):
    from jtree.convert import _from_flax
    data = flax_ser.msgpack_serialize({"w": np.arange(3)})
    a, b = tmp_path / "p.msgpack", tmp_path / "p.bin"
    a.write_bytes(data)
    b.write_bytes(data)
    assert _from_flax.sniff(str(a))
    assert not _from_flax.sniff(str(b))  # content sniffed only for .msgpack
    c = tmp_path / "c.msgpack"
    c.write_bytes(b"\x01\x02")
    assert not _from_flax.sniff(str(c))
    jtree.convert(str(b), str(tmp_path / "b.jtree"), from_format="flax")
    _same_array(jtree.load(str(tmp_path / "b.jtree"))["w"], np.arange(3), "w")


def _flax_bad(tmp_path, data, match, cls=jtree.CorruptionError):
    d = tmp_path / "bad"
    d.mkdir(exist_ok=True)
    src = d / "bad.msgpack"
    src.write_bytes(data)
    with pytest.raises(cls, match=match) as e:
        jtree.convert(str(src), str(d / "out.jtree"), from_format="flax")
    assert str(src) in str(e.value)
    _no_output(d, ["bad.msgpack"])


def test_flax_corrupt(flax_ser, tmp_path):
    import msgpack
    good = flax_ser.msgpack_serialize({"a": np.arange(100, dtype=np.float32), "b": {"c": 1}})
    for n in (1, 5, len(good) // 2, len(good) - 1):
        _flax_bad(tmp_path, good[:n], "not a valid flax msgpack")
    _flax_bad(tmp_path, b"", "empty")
    _flax_bad(tmp_path, b"\xc1" * 10, "not a valid flax msgpack")
    # An extension flax does not know.
    _flax_bad(tmp_path, msgpack.packb({"x": msgpack.ExtType(99, b"zz")}), "extension")
    # An ndarray whose buffer does not match its shape; an object dtype.
    bad_arr = msgpack.packb(((5, 5), "float32", b"\0" * 8))
    _flax_bad(tmp_path, msgpack.packb({"x": msgpack.ExtType(1, bad_arr)}),
              "not a valid flax msgpack")
    obj = msgpack.packb(((1,), "O", b"\0" * 8))
    _flax_bad(tmp_path, msgpack.packb({"x": msgpack.ExtType(1, obj)}),
              "not a valid flax msgpack")
    # A huge declared length (msgpack bounds it by the input size: no allocation).
    _flax_bad(tmp_path, b"\x81\xa1x\xc6\xff\xff\xff\xff", "not a valid flax msgpack")
    _flax_bad(tmp_path, b"\x91" * 100000 + b"\x00", "not a valid flax msgpack|nested")
    # Keys that are not strings; a top level that is not a container.
    _flax_bad(tmp_path, msgpack.packb({1: 2}), "not a string", jtree.NotSupportedError)
    _flax_bad(tmp_path, msgpack.packb(5), "holds a dict or list", jtree.InvalidArgumentError)


# ---- orbax --------------------------------------------------------------------------------------

@pytest.fixture
def ocp():
    require("jax")
    return require("orbax.checkpoint")


def _orbax_state(rng):
    import jax.numpy as jnp
    a = _arrays(rng)
    del a["empty"]  # orbax refuses to save zero-size arrays
    return {"params": {"dense": a, "jax_w": jnp.asarray(rng.standard_normal((4, 4)),
                                                         dtype=jnp.bfloat16)},
            "opt": [np.zeros(2, np.int8), {"mu": np.full(3, 0.5, np.float32)}],
            "step": 7}


def _restore_numpy(ocp, path):
    """The peer's own restore, every array as NumPy (its metadata's structure)."""
    import jax
    from orbax.checkpoint import metadata as om
    ck = ocp.PyTreeCheckpointer()
    meta = ck.metadata(path).item_metadata.tree
    args = jax.tree.map(lambda m: ocp.RestoreArgs(restore_type=np.ndarray)
                        if isinstance(m, om.ArrayMetadata) else ocp.RestoreArgs(), meta,
                        is_leaf=lambda x: x is None)
    return ck.restore(path, args=ocp.args.PyTreeRestore(restore_args=args))


@pytest.mark.parametrize("which", ["standard", "pytree"])
def test_orbax_bit_exact(ocp, tmp_path, which):
    rng = np.random.default_rng(1)
    state = _orbax_state(rng)
    ck_dir = str(tmp_path / "ckpt")
    if which == "standard":
        ck = ocp.StandardCheckpointer()
        ck.save(ck_dir, state)
        ck.wait_until_finished()
    else:
        state["name"] = "run-1"
        ocp.PyTreeCheckpointer().save(ck_dir, state)
    from jtree.convert import _from_orbax
    assert _from_orbax.sniff(ck_dir)
    # Arrays are restored when the writer reaches them (one at a time), when Deferred exists.
    from jtree.convert import _common
    src = _from_orbax.open_source(ck_dir)
    kernel = src.tree["params"]["dense"]["kernel"]
    if _common.deferred_class() is not None:
        assert isinstance(kernel, _common.deferred_class())
    dst = str(tmp_path / "ckpt.jtree")
    st = jtree.convert(ck_dir, dst, verify=True)
    assert (st.src_format, st.verified) == ("orbax", True)
    got = jtree.load(dst)
    want = _restore_numpy(ocp, ck_dir)
    want["step"] = want["step"].item() if hasattr(want["step"], "item") else want["step"]
    _same_tree(got, want)
    # ...and the original values, bit for bit.
    for k, v in state["params"]["dense"].items():
        _same_array(got["params"]["dense"][k], v, k)
    _same_array(got["params"]["jax_w"], np.asarray(state["params"]["jax_w"]), "jax_w")
    assert got["params"]["jax_w"].dtype == ml_dtypes.bfloat16
    assert got["step"] == 7
    if which == "pytree":
        assert got["name"] == "run-1"


def test_orbax_checkpoint_manager_step(ocp, tmp_path):
    rng = np.random.default_rng(2)
    mgr = ocp.CheckpointManager(str(tmp_path / "run"))
    params = {"w": rng.standard_normal((5, 3)).astype(np.float32)}
    opt = {"m": np.arange(4, dtype=np.int32)}
    mgr.save(3, args=ocp.args.Composite(params=ocp.args.StandardSave(params),
                                        opt=ocp.args.StandardSave(opt)))
    mgr.wait_until_finished()
    step = str(tmp_path / "run" / "3")
    dst = str(tmp_path / "s.jtree")
    jtree.convert(step, dst, verify=True)
    got = jtree.load(dst)
    assert sorted(got) == ["opt", "params"]
    _same_array(got["params"]["w"], params["w"], "w")
    _same_array(got["opt"]["m"], opt["m"], "m")


def test_jax_pytree_serialization(tmp_path):
    jax = require("jax")
    require("flatbuffers")
    import jax.numpy as jnp
    from jax.experimental.array_serialization import pytree_serialization as ps
    rng = np.random.default_rng(3)
    tree = {"params": {"w": jnp.asarray(rng.standard_normal((6, 5)), jnp.bfloat16),
                       "b": jnp.arange(5, dtype=jnp.int32)},
            "stats": [jnp.float32(2.5), None], "pair": (jnp.ones(2), jnp.zeros((0,)))}
    d = str(tmp_path / "ps")
    ps.save(tree, d)
    dst = str(tmp_path / "ps.jtree")
    st = jtree.convert(d, dst, verify=True)
    assert st.src_format == "orbax"
    got = jtree.load(dst)
    want = ps.load(d, jax.sharding.SingleDeviceSharding(jax.devices("cpu")[0]))
    want = jax.tree.map(np.asarray, want)
    _same_tree(got, want)
    assert isinstance(got["pair"], tuple) and got["stats"][1] is None
    assert got["params"]["w"].dtype == ml_dtypes.bfloat16


def _orbax_bad(tmp_path, ck_dir, match):
    out = tmp_path / "out.jtree"
    with pytest.raises(jtree.Error, match=match) as e:
        jtree.convert(ck_dir, str(out), from_format="orbax")
    assert ck_dir in str(e.value)
    assert not out.exists()


def test_orbax_damaged(ocp, tmp_path):
    rng = np.random.default_rng(4)
    state = {"w": rng.standard_normal((64, 64)).astype(np.float32), "s": 3}
    good = str(tmp_path / "good")
    ocp.PyTreeCheckpointer().save(good, state)
    # Damaged metadata.
    bad = str(tmp_path / "bad1")
    shutil.copytree(good, bad)
    with open(os.path.join(bad, "_METADATA"), "w") as f:
        f.write("{not json")
    _orbax_bad(tmp_path, bad, "cannot read this checkpoint")
    # Array data gone: every data file of the OCDBT store truncated to nothing.
    bad = str(tmp_path / "bad2")
    shutil.copytree(good, bad)
    n = 0
    for root, _, files in os.walk(bad):
        for name in files:
            if os.sep + "d" in root or name.startswith("manifest"):
                open(os.path.join(root, name), "wb").close()
                n += 1
    assert n > 0
    _orbax_bad(tmp_path, bad, "cannot read this checkpoint")
    # Not a checkpoint at all.
    empty = tmp_path / "empty"
    empty.mkdir()
    _orbax_bad(tmp_path, str(empty), "not an orbax checkpoint")
    from jtree.convert import _from_orbax
    assert not _from_orbax.sniff(str(empty))
    assert not _from_orbax.sniff(str(tmp_path / "missing"))


def test_flax_fuzz_mutations(flax_ser, tmp_path):
    """Mutated flax files (bytes replaced, lengths set to extremes, cuts): the reader either
    succeeds or raises a jtree.Error naming the file; nothing else escapes, nothing hangs."""
    import random
    import struct
    import time

    from jtree.convert import _from_flax
    rng = np.random.default_rng(5)
    good = bytearray(flax_ser.to_bytes({"p": {"w": rng.standard_normal((8, 4)).astype(
        np.float32), "b": np.arange(3, dtype=np.int8)}, "s": 3, "t": "x"}))
    r = random.Random(99)
    p = str(tmp_path / "f.msgpack")
    n_ok = n_err = 0
    for i in range(int(os.environ.get("JTREE_FLAX_FUZZ_N", "400"))):
        d = bytearray(good)
        for _ in range(r.randint(1, 3)):
            pos = r.randrange(len(d)) if d else 0
            op = r.random()
            if not d:
                break
            if op < 0.5:
                d[pos] = r.randrange(256)
            elif op < 0.8:
                d[pos:pos + 4] = struct.pack(">I", r.choice([0, 1, 2 ** 31, 2 ** 32 - 1]))
            else:
                d = d[:r.randrange(len(d))]
        with open(p, "wb") as f:
            f.write(d)
        t0 = time.monotonic()
        try:
            src = _from_flax.open_source(p)
            jtree.save(src.tree, str(tmp_path / "f.jtree"))
            n_ok += 1
        except jtree.Error as e:
            assert p in str(e) or "f.jtree" in str(e), str(e)
            n_err += 1
        assert time.monotonic() - t0 < 5, f"mutation {i} took too long"
    assert n_ok > 0 and n_err > 0


def test_orbax_batches_restore_few_times():
    """Arrays are restored in batches (one orbax restore costs in proportion to the whole
    tree): few restores for many small leaves, a batch per large leaf, each array handed out
    once, a second fetch (a verify's) restores again."""
    from jtree.convert import _from_orbax
    calls = []

    def restore(batch):
        calls.append(list(batch))
        return [np.full(1, i) for i in batch]

    idx = list(range(1200))
    b = _from_orbax._Batches(idx, lambda i: 1000, restore)
    for i in idx:
        assert b.fetch(i)[0] == i
    assert len(calls) == 3 and all(len(c) <= _from_orbax.BATCH_LEAVES for c in calls)
    assert not b.ready  # nothing left behind
    assert b.fetch(5)[0] == 5 and len(calls) == 4
    calls.clear()
    big = _from_orbax._Batches([0, 1, 2], lambda i: _from_orbax.BATCH_BYTES, restore)
    for i in (2, 0, 1):  # any order
        assert big.fetch(i)[0] == i
    assert sorted(map(tuple, calls)) == [(0,), (1,), (2,)]


def test_orbax_many_leaves(ocp, tmp_path):
    import time
    state = {f"layer{i}": {"w": np.full((4, 4), i, np.float32)} for i in range(300)}
    d = str(tmp_path / "many")
    ocp.PyTreeCheckpointer().save(d, state)
    t0 = time.monotonic()
    jtree.convert(d, str(tmp_path / "many.jtree"), verify=True)
    elapsed = time.monotonic() - t0
    got = jtree.load(str(tmp_path / "many.jtree"))
    for i in range(300):
        _same_array(got[f"layer{i}"]["w"], state[f"layer{i}"]["w"], str(i))
    assert elapsed < 20, elapsed  # batched: under 1 s here (one restore per leaf: ~10 s)


def test_orbax_sharded_jax_arrays(ocp, tmp_path):
    """Arrays sharded over a 4x2 mesh of the 8 CPU devices are restored whole, bit-exact."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P
    if len(jax.devices()) < 8:
        pytest.fail("needs 8 devices: XLA_FLAGS=--xla_force_host_platform_device_count=8")
    mesh = jax.make_mesh((4, 2), ("x", "y"))
    x = jax.device_put(jnp.arange(64 * 16, dtype=jnp.bfloat16).reshape(64, 16),
                       NamedSharding(mesh, P("x", "y")))
    y = jax.device_put(jnp.linspace(0, 1, 8, dtype=jnp.float32), NamedSharding(mesh, P()))
    d = str(tmp_path / "sharded")
    ck = ocp.StandardCheckpointer()
    ck.save(d, {"x": x, "y": y})
    ck.wait_until_finished()
    jtree.convert(d, str(tmp_path / "s.jtree"), verify=True)
    got = jtree.load(str(tmp_path / "s.jtree"))
    _same_array(got["x"], np.asarray(x), "x")
    _same_array(got["y"], np.asarray(y), "y")
