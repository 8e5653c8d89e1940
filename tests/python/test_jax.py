"""JAX: sharded arrays over 8 CPU devices saved shard by shard (replica 0 only, a chunk grid
aligned with the shards, the global array never assembled) and loaded into shardings."""
import tracemalloc

import numpy as np
import pytest

import jtree
from jtree import _load_jax
from conftest import require

jax = require("jax")
jnp = jax.numpy
P = jax.sharding.PartitionSpec
NamedSharding = jax.sharding.NamedSharding


@pytest.fixture(scope="module")
def mesh():
    devices = jax.devices()
    if len(devices) < 8:
        msg = (f"!!! these tests need 8 JAX CPU devices (XLA_FLAGS="
               f"--xla_force_host_platform_device_count=8 before JAX starts); found {len(devices)}")
        pytest.fail(msg)
    return jax.sharding.Mesh(np.array(devices[:8]).reshape(4, 2), ("x", "y"))


SPECS = [P("x", "y"), P("x"), P(None, "y"), P(("x", "y")), P(), P("y", "x")]


@pytest.mark.parametrize("spec", SPECS, ids=str)
def test_sharded_round_trip(path, mesh, spec):
    a = np.random.default_rng(0).standard_normal((64, 48)).astype(np.float32)
    x = jax.device_put(a, NamedSharding(mesh, spec))
    jtree.save({"x": x}, path, chunk_bytes=1 << 20)
    with jtree.open(path) as f:
        leaf = f["x"]
        shard = x.sharding.shard_shape(x.shape)
        # Every chunk lies in one shard: the chunk extents divide the shard's.
        assert all(s % c == 0 for s, c in zip(shard, leaf.chunk_shape)), (shard, leaf.chunk_shape)
        np.testing.assert_array_equal(leaf[10:30, 5:7], a[10:30, 5:7])
    np.testing.assert_array_equal(jtree.load(path)["x"], a)
    # Into the same sharding, and into another one.
    for target in (x.sharding, NamedSharding(mesh, P("y", None)), NamedSharding(mesh, P())):
        y = jtree.load(path, {"x": jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=target)})["x"]
        assert isinstance(y, jax.Array) and y.sharding == target
        np.testing.assert_array_equal(np.asarray(y), a)


def test_only_replica_zero_is_written(path, mesh):
    # Replicated over 'y': each element has two copies on devices; it is stored once.
    a = np.arange(64 * 32, dtype=np.int32).reshape(64, 32)
    x = jax.device_put(a, NamedSharding(mesh, P("x")))
    assert len(x.addressable_shards) == 8
    stats = jtree.save({"x": x}, path, compression=None)
    assert stats.raw_bytes == a.nbytes
    np.testing.assert_array_equal(jtree.load(path)["x"], a)


def test_small_chunks_subdivide_shards(path, mesh):
    a = np.random.default_rng(1).standard_normal((256, 64)).astype(np.float32)
    x = jax.device_put(a, NamedSharding(mesh, P("x", "y")))  # shards of 64 x 32 float32 = 8 KiB
    jtree.save({"x": x}, path, chunk_bytes=4096)
    with jtree.open(path) as f:
        assert f["x"].chunk_shape == (32, 32)
    np.testing.assert_array_equal(jtree.load(path)["x"], a)


def test_the_global_array_is_never_assembled(path, mesh):
    a = np.random.default_rng(2).standard_normal((2048, 2048)).astype(np.float32)  # 16 MiB
    x = jax.device_put(a, NamedSharding(mesh, P("x", "y")))
    del a
    tracemalloc.start()
    try:
        jtree.save({"x": x}, path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, peak  # NumPy allocations traced: no 16 MiB gather
    with jtree.open(path) as f:
        assert f["x"].chunk_shape == (512, 1024)  # one chunk per shard (4 MiB target)
    np.testing.assert_array_equal(jtree.load(path)["x"], np.asarray(x))


def test_load_with_a_sharding_reads_each_slice_once(path, mesh):
    # (2 MiB: leaves up to _load_jax.SMALL_LEAF_BYTES are read whole, once, and cut.)
    a = np.random.default_rng(3).standard_normal((2048, 256)).astype(np.float32)
    assert a.nbytes > _load_jax.SMALL_LEAF_BYTES
    jtree.save({"x": a}, path, compression=None, chunk_bytes=64 << 10)
    sharding = NamedSharding(mesh, P("x"))  # 4 row blocks, each on 2 devices
    with jtree.open(path) as f:
        before = f.io_stats()["bytes_read"]
        y = jtree.load(f, shardings=sharding, framework="jax")["x"]
        read = f.io_stats()["bytes_read"] - before
    assert y.sharding == sharding
    np.testing.assert_array_equal(np.asarray(y), a)
    assert read == a.nbytes  # replicas read once, nothing twice


def test_shardings_option_forms(path, mesh):
    tree = {"w": np.ones((16, 8), np.float32), "b": np.zeros(8, np.float32), "n": 3}
    jtree.save(tree, path)
    s_rows = NamedSharding(mesh, P("x"))
    s_rep = NamedSharding(mesh, P())
    out = jtree.load(path, framework="jax",
                     shardings=lambda key_path, spec: s_rows if spec.ndim == 2 else s_rep)
    assert out["w"].sharding == s_rows and out["b"].sharding == s_rep and out["n"] == 3
    # pad/truncate with a sharding
    y = jtree.load(path, {"w": jax.ShapeDtypeStruct((32, 8), jnp.float32, sharding=s_rows),
                          "b": None, "n": None}, pad_truncate=True)["w"]
    expect = np.zeros((32, 8), np.float32)
    expect[:16] = 1
    np.testing.assert_array_equal(np.asarray(y), expect)
    # A concrete jax.Array target gives dtype and sharding.
    t = jax.device_put(jnp.zeros((16, 8), jnp.bfloat16), s_rows)
    z = jtree.load(path, {"w": t, "b": None, "n": None})["w"]
    assert z.dtype == jnp.bfloat16 and z.sharding == s_rows


def test_nonblocking_save_of_sharded_arrays(path, mesh):
    a = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    x = jax.device_put(a, NamedSharding(mesh, P("x", "y")))
    fut = jtree.nonblocking_save({"x": x, "step": 1}, path)
    assert fut.pytree["x"].shape == (64, 64)
    fut.result()
    np.testing.assert_array_equal(jtree.load(path)["x"], a)


def test_shardings_imply_jax_and_bad_values_are_clear_errors(path, mesh):
    tree = {"w": np.ones((16, 8), np.float32), "n": 3}
    jtree.save(tree, path)
    s_rows = NamedSharding(mesh, P("x"))
    out = jtree.load(path, shardings=s_rows)  # no framework= needed
    assert isinstance(out["w"], jax.Array) and out["w"].sharding == s_rows and out["n"] == 3
    with pytest.raises(jtree.InvalidArgumentError, match="shardings must be a jax.sharding"):
        jtree.load(path, shardings="rows")
    with pytest.raises(jtree.InvalidArgumentError, match="framework='torch'"):
        jtree.load(path, shardings=s_rows, framework="torch")
    with pytest.raises(jtree.InvalidArgumentError,
                       match=r"at 'w': the shardings function returned a str, not a "
                             r"jax.sharding.Sharding"):
        jtree.load(path, shardings=lambda key_path, spec: "rows")
