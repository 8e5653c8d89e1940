"""One process of a torch.distributed job (gloo, over localhost), run by
test_torch_distributed.py: torch tensors saved as GlobalArray blocks with the coordinator
detected from torch.distributed, then read back on a different split as torch tensors.

    torch_worker.py RANK WORLD_SIZE PORT PATH
"""
import os
import sys

import numpy as np
import torch
import torch.distributed as dist

rank, world, port, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                        world_size=world)

import jtree  # noqa: E402

SHAPE = (1000, 96)
full = torch.from_numpy(np.random.default_rng(3).standard_normal(SHAPE).astype(np.float32))
emb = full.to(torch.bfloat16)
edges = [SHAPE[0] * k // world for k in range(world + 1)]
mine = (slice(edges[rank], edges[rank + 1]),)
tree = {
    # Sharded along rows, and along columns in bf16.
    "w": jtree.GlobalArray(full[mine], mine, SHAPE),
    "emb": jtree.GlobalArray(emb[:, rank * 24:(rank + 1) * 24].contiguous(),
                             (slice(None), slice(rank * 24, (rank + 1) * 24)), SHAPE),
    "bias": jtree.GlobalArray(torch.arange(8.0), (), (8,), replica_id=rank),  # replicated
    "step": 42,
}
assert world == 4
coord = jtree._coordinator.detect()
assert isinstance(coord, jtree.TorchCoordinator) and coord.process_count == world, coord
stats = jtree.save(tree, path, compression=None)
assert stats.raw_bytes == full.numel() * 4 + emb.numel() * 2 + 8 * 4, stats

# Read back on 2 blocks per process along the other axis, as torch tensors.
cols = [(slice(None), slice(rank * 24, rank * 24 + 12)),
        (slice(None), slice(rank * 24 + 12, (rank + 1) * 24))]
out = jtree.load(path, {"w": jtree.GlobalArray(None, cols), "emb": None, "bias": True,
                        "step": True}, framework="torch")
for (ix, block) in zip(cols, out["w"].data):
    assert isinstance(block, torch.Tensor) and block.dtype == torch.float32
    assert torch.equal(block, full[ix])
assert torch.equal(out["bias"], torch.arange(8.0)) and out["step"] == 42
# Rows across two of the save's chunks (250 rows, 96 KB each): those two chunks are read (and
# at most a coalescing gap, 64 KiB, of what lies between them), not the leaf nor the file.
rows = (slice(rank * 250 + 125, min(rank * 250 + 375, SHAPE[0])),)
with jtree.open(path) as f:
    before = f.io_stats()["bytes_read"]
    got = jtree.load(f, {"w": jtree.GlobalArray(None, rows), "emb": None, "bias": None,
                         "step": None}, framework="torch")["w"].data
    read = f.io_stats()["bytes_read"] - before
assert torch.equal(got, full[rows])
chunk = 250 * 96 * 4
assert got.numel() * 4 <= read <= 2 * chunk + 64 * 1024, read
e = jtree.load(path, {"emb": jtree.GlobalArray(None, (slice(0, 10),)), "w": None,
                      "bias": None, "step": None}, framework="torch")["emb"]
assert e.data.dtype == torch.bfloat16 and torch.equal(e.data, emb[:10])
dist.barrier()
dist.destroy_process_group()
print(f"rank {rank}: ok", flush=True)
if rank == 0:
    assert sorted(os.listdir(os.path.dirname(path))) == [os.path.basename(path)]
