"""mpirun -np 4 python bench/multihost_uneven.py OUT_DIR (bench/multihost.md, section 3): the issue-19 case (uint16[100003] and
float32[50257, 64] split by np.array_split over 4 processes, the table over 4 in each
dimension), zstd (the default); rank 0 prints chunk counts and sizes of the multi-process and
single-process saves."""
import os
import sys

import numpy as np
from mpi4py import MPI

import jtree

out = sys.argv[1]
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
rng = np.random.default_rng(19)
arrays = {"v": rng.integers(0, 65535, 100003, dtype=np.uint16),
          "t": rng.standard_normal((50257, 64)).astype(np.float32)}


def split(n, parts):
    e = np.cumsum([0] + [len(p) for p in np.array_split(np.arange(n), parts)])
    return [slice(int(a), int(b)) for a, b in zip(e[:-1], e[1:])]


blocks = {"v": [(s,) for s in split(100003, 4)],
          "t": [(r, c) for r in split(50257, 4) for c in split(64, 4)]}
tree = {}
for k, a in arrays.items():
    mine = [ix for j, ix in enumerate(blocks[k]) if j % size == rank]
    tree[k] = jtree.GlobalArray([a[ix] for ix in mine], mine, a.shape)
multi = os.path.join(out, "multi.jtree")
jtree.save(tree, multi, coordinator=jtree.MPICoordinator())
comm.Barrier()
if rank == 0:
    single = os.path.join(out, "single.jtree")
    jtree.save(arrays, single, coordinator=None)
    for name in (multi, single):
        i = jtree.open(name).info()
        print(f"{os.path.basename(name)}: {i['num_chunks']} chunks, {i['file_size']} bytes, "
              f"min_read_version {i['min_read_version']}", flush=True)
