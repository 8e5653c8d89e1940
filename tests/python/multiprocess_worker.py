"""One process of a two-process JAX job (run by test_multiprocess.py, not collected by pytest):
4 CPU devices here, 8 in the job. Saves sharded arrays collectively, then loads them back into
shardings, each process reading only its slices."""
import os
import sys

process_id, port, path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"

import jax  # noqa: E402
import numpy as np  # noqa: E402

jax.distributed.initialize(f"localhost:{port}", num_processes=2, process_id=process_id)

import jtree  # noqa: E402

P = jax.sharding.PartitionSpec
assert jax.process_count() == 2 and len(jax.devices()) == 8 and len(jax.local_devices()) == 4
mesh = jax.sharding.Mesh(np.array(jax.devices()).reshape(4, 2), ("x", "y"))


def global_array(a, spec):
    s = jax.sharding.NamedSharding(mesh, spec)
    return jax.make_array_from_callback(a.shape, s, lambda idx: a[idx])


rng = np.random.default_rng(0)  # the same data in both processes: each keeps its part
a = rng.standard_normal((64, 48)).astype(np.float32)
b = np.arange(32 * 16, dtype=np.int32).reshape(32, 16)
c = rng.standard_normal((16, 8)).astype(np.float32)
tree = {
    "a": global_array(a, P("x", "y")),       # split over both processes
    "b": global_array(b, P("x")),            # replicated over 'y': replica 0 written once
    "c": global_array(c, P()),               # fully replicated: written by one process only
    "step": 7, "name": "run", "local": np.arange(5),
}
assert not tree["a"].is_fully_addressable
stats = jtree.save(tree, path, chunk_bytes=1024, compression=None)
# The whole file's statistics, in every process.
assert stats.raw_bytes == a.nbytes + b.nbytes + c.nbytes and stats.leaves == 6, stats
assert stats.generation == 0 and stats.file_size == os.path.getsize(path)
segments = [jtree._jtree.segment_path(path, i, 2) for i in range(2)]
assert not any(os.path.exists(s) for s in segments), "segments left behind"

out = jtree.load(path)  # as NumPy, whole
np.testing.assert_array_equal(out["a"], a)
np.testing.assert_array_equal(out["b"], b)
np.testing.assert_array_equal(out["c"], c)
assert out["step"] == 7 and out["name"] == "run" and out["local"].tolist() == [0, 1, 2, 3, 4]
with jtree.open(path) as f:
    assert f.verify()["ok"]
    # Each array stored once (replicas and the fully replicated one too); small leaves inline.
    assert f.info()["raw_bytes"] == a.nbytes + b.nbytes + c.nbytes, f.info()
    assert f.info()["segments"] == 2
    before = f.io_stats()["bytes_read"]
    y = jtree.load(f, {"a": jax.ShapeDtypeStruct(a.shape, a.dtype,
                                                 sharding=jax.sharding.NamedSharding(mesh, P("x"))),
                       "b": None, "c": None, "step": None, "name": None, "local": None})["a"]
    read = f.io_stats()["bytes_read"] - before
assert not y.is_fully_addressable and y.sharding.spec == P("x")
for s in y.addressable_shards:
    np.testing.assert_array_equal(np.asarray(s.data), a[s.index])
# Rows split in 4 blocks over the devices, 2 blocks per process: half the array read here (and
# at most the small leaves stored between its chunks, which coalesced reads may take along),
# never the other process's half.
assert a.nbytes // 2 <= read <= a.nbytes // 2 + b.nbytes + c.nbytes, (read, a.nbytes)

# A non-blocking save of the same kind completes before it returns; partial writes refuse.
fut = jtree.nonblocking_save({"a": tree["a"], "step": 8}, path)
assert fut.done() and fut.result().generation == 0
assert jtree.load(path, keys="step")["step"] == 8
try:
    jtree.save({"a": tree["a"]}, path, partial_write=True)
except jtree.NotSupportedError as e:
    assert "several processes" in str(e)
else:
    raise SystemExit("partial_write of a multi-process array was accepted")
# A failed commit (process 0 may not replace the file) fails in every process, and leaves
# the file as it was and no segments behind.
try:
    jtree.save({"a": tree["a"], "step": 9}, path, overwrite=False)
except jtree.AlreadyExistsError:
    assert process_id == 0
except jtree.AbortedError as e:
    assert process_id == 1 and "process 0" in str(e), e
else:
    raise SystemExit("overwrite=False was ignored")
assert jtree.load(path, keys="step")["step"] == 8
assert not any(os.path.exists(s) for s in segments), "segments left behind"
print(f"process {process_id}: ok", flush=True)
