"""One process of an MPI job (mpirun -np N python mpi_worker.py SCENARIO PATH), run by
test_mpi.py, not collected by pytest. Prints "rank R: ok" at the end of a scenario that
succeeds; a failed assertion exits non-zero (and mpirun stops the job).

Scenarios:
  save        4 processes: a collective save with an explicit MPICoordinator (raw), then a
              second one into PATH-zstd with the coordinator detected; rank 0 checks both.
  load        N processes: each reads only its blocks of a new, even split (GlobalArray
              targets), checked against the data and against the bytes the reader fetched.
  die         4 processes: rank 2 dies instead of writing its segment (after the others wrote
              theirs); the job fails and no target appears.
  no_commit   4 processes: every segment is written, then rank 0 dies instead of committing
              (JTREE_MH_BIG=1: with 24 MiB more per process).
  foreign     4 processes save over PATH, which is not a jtree file: refused in every process
              (JTREE_MH_FORCE=1: with overwrite_foreign=True, which replaces it).
  uneven      4 processes: np.array_split blocks (workload.uneven_*), dealt round-robin; rank
              0 checks the file whole and by slices (test_mpi.py compares chunk count and size
              with a single-process save).
"""
import os
import sys
import time

import numpy as np
import torch
from mpi4py import MPI

import jtree
import workload

scenario, path = sys.argv[1], sys.argv[2]
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
g = workload.global_arrays()


def zstd_path(p: str) -> str:
    return p.replace(".jtree", "-zstd.jtree")


def check_whole(out) -> None:
    for k in ("rows", "cols", "grid", "half"):
        np.testing.assert_array_equal(out["params"][k], g[k])
        assert out["params"][k].dtype == g[k].dtype, (k, out["params"][k].dtype)
    np.testing.assert_array_equal(out["repl"], g["repl"])
    np.testing.assert_array_equal(out["plain"], g["plain"])
    assert out["step"] == 1234 and out["name"] == "multi-host run"
    assert out["config"] == {"lr": 3e-4, "layers": [4, 8], "bf16": True}


def save_scenario() -> None:
    tree = workload.tree_for(rank, size, jtree, torch)
    stats = jtree.save(tree, path, coordinator=jtree.MPICoordinator(), compression=None,
                       chunk_bytes=1 << 20)
    # The whole file's statistics, the same in every process.
    everyone = comm.allgather(tuple(stats))
    assert all(s == everyone[0] for s in everyone), everyone
    assert stats.raw_bytes == workload.chunked_bytes(), (stats, workload.chunked_bytes())
    assert stats.file_size == jtree.open(path).info()["file_size"]
    segs = [jtree._jtree.segment_path(path, k, size) for k in range(size)]
    assert not any(os.path.exists(s) for s in segs), "segments left behind"
    if rank == 0:
        with jtree.open(path) as f:
            check_whole(jtree.load(f))
            assert f.verify()["ok"] and f.info()["segments"] == size, f.info()
            # Every byte written once: the replicated array and the unsharded one included.
            assert f.info()["raw_bytes"] == workload.chunked_bytes(), f.info()
    comm.Barrier()
    # Again with the coordinator detected (mpi4py is imported and the job has 4 processes),
    # zstd-compressed this time, into a second file.
    tree["step"] = 1235
    jtree.save(tree, zstd_path(path))
    if rank == 0:
        out = jtree.load(zstd_path(path))
        assert out["step"] == 1235
        np.testing.assert_array_equal(out["params"]["grid"], g["grid"])


def load_scenario() -> None:
    b = workload.blocks(rank, size, save=False)
    want = {"params": {k: jtree.GlobalArray(None, b[k]) for k in ("rows", "cols", "grid")},
            "repl": None, "plain": None, "step": True, "name": None, "config": None}
    with jtree.open(path) as f:
        before = f.io_stats()["bytes_read"]
        out = jtree.load(f, want)
        read = f.io_stats()["bytes_read"] - before
        info = f.info()
    share = 0
    for k in ("rows", "cols", "grid"):
        got = out["params"][k]
        assert isinstance(got, jtree.GlobalArray) and got.shape == g[k].shape
        np.testing.assert_array_equal(got.data, g[k][b[k]])
        share += got.data.nbytes
    assert out["step"] == 1234
    # Only this process's part (chunks of 1 MiB at most cross the new block edges: at most
    # two per array are read beyond the part), never the file. (The arrays are only a few
    # chunks each: since the save's grid is cut at its uneven row edges into chunks near the
    # 1 MiB target, not into the 600-row gcd, the middle one of 3 readers reads ~80% of it.)
    assert share <= read <= share + 6 * (1 << 20), (read, share)
    assert read < info["file_size"] * 0.85, (read, info["file_size"])
    # torch tensors, for torch users.
    half = jtree.load(path, {"params": {"half": jtree.GlobalArray(None, [b["half"]])}},
                      framework="torch")["params"]["half"]
    assert isinstance(half.data[0], torch.Tensor) and half.data[0].dtype == torch.float16
    np.testing.assert_array_equal(half.data[0].numpy(), g["half"][b["half"]])


def die_scenario() -> None:
    tree = workload.tree_for(rank, size, jtree, torch)
    if rank == 2:
        def die_instead(*args, **kw):
            # Wait until the others have written theirs, so the outcome is deterministic.
            others = [jtree._jtree.segment_path(path, k, size) for k in (0, 1, 3)]
            deadline = time.monotonic() + 60
            while not all(os.path.exists(s) for s in others) and time.monotonic() < deadline:
                time.sleep(0.05)
            os._exit(3)

        jtree._jtree.save_segment = die_instead
    jtree.save(tree, path, coordinator=jtree.MPICoordinator(), compression=None)
    raise SystemExit("the save went on without process 2")


def no_commit_scenario() -> None:
    tree = workload.tree_for(rank, size, jtree, torch)
    if os.environ.get("JTREE_MH_BIG") == "1":
        tree = workload.with_big(tree, rank, size, jtree)
    if rank == 0:
        def die_instead(*args, **kw):
            os._exit(5)

        jtree._jtree.commit_segments = die_instead
    jtree.save(tree, path, coordinator=jtree.MPICoordinator(), compression=None,
               chunk_bytes=1 << 20)
    raise SystemExit("the save returned without a commit")


def foreign_scenario() -> None:
    tree = workload.tree_for(rank, size, jtree, torch)
    force = os.environ.get("JTREE_MH_FORCE") == "1"
    try:
        jtree.save(tree, path, coordinator=jtree.MPICoordinator(), compression=None,
                   overwrite_foreign=force)
    except jtree.Error as e:
        assert not force and "is not a jtree file" in str(e), str(e)
        return
    assert force, "a file that is not a jtree file was replaced"
    if rank == 0:
        check_whole(jtree.load(path))


def uneven_scenario() -> None:
    arrays = workload.uneven_arrays()
    tree = {}
    for k, a in arrays.items():
        blocks = workload.uneven_blocks(k)
        mine = [ix for j, ix in enumerate(blocks) if j % size == rank]
        replica = 0
        if not mine:  # fewer blocks than processes: hold a copy that another process writes
            mine, replica = [blocks[0]], 1
        tree[k] = jtree.GlobalArray([a[ix] for ix in mine], mine, a.shape, replica_id=replica)
    jtree.save(tree, path, coordinator=jtree.MPICoordinator(), compression=None)
    if rank == 0:
        with jtree.open(path) as f:
            out = jtree.load(f)
            for k, a in arrays.items():
                np.testing.assert_array_equal(out[k], a)
                assert out[k].dtype == a.dtype
            assert f.verify()["ok"]
        # Slices across block and chunk edges.
        t = jtree.load(path, {"t": jtree.GlobalArray(None, (slice(12000, 38000), slice(7, 50))),
                              "v": None, "b": None, "c": None})["t"]
        np.testing.assert_array_equal(t.data, arrays["t"][12000:38000, 7:50])


{"save": save_scenario, "load": load_scenario, "die": die_scenario,
 "no_commit": no_commit_scenario, "foreign": foreign_scenario,
 "uneven": uneven_scenario}[scenario]()
print(f"rank {rank}: ok", flush=True)
