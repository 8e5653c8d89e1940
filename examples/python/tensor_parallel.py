"""A tensor-parallel rank's shard of a model, loaded in one pass, and checked.

    python examples/python/tensor_parallel.py [MODEL.jtree] [--world N] [--device cuda:0]

Without MODEL.jtree it saves a small Llama-like state dict first (flat names as a torch
state_dict or a safetensors file has them). Then each rank r of N loads its shard with

    jtree.load(path, slices=jtree.TensorParallel(r, N), framework="torch", device=...)

(column-parallel q/k/v and gate/up by rows, row-parallel o and down by columns, embeddings and
lm_head by vocabulary rows, norms whole: one native read of every box, only the chunks the
boxes overlap), and runs its part of one MLP block as a tensor-parallel server does: each rank
multiplies by its gate/up rows and its down columns, and the ranks' partial outputs are summed
(the all-reduce). The sum matches the whole model's output, which is what the example checks.
A server runs one rank per process (torch.distributed's rank and world size); here the ranks
run one after the other.
"""
import argparse
import os
import sys
import tempfile

import numpy as np
import torch

import jtree

HIDDEN, INTER, VOCAB = 64, 256, 100


def save_demo_model(path: str, world: int) -> None:
    g = torch.Generator().manual_seed(0)
    sd = {"model.embed_tokens.weight": torch.randn(VOCAB, HIDDEN, generator=g),
          "lm_head.weight": torch.randn(VOCAB, HIDDEN, generator=g),
          "model.norm.weight": torch.ones(HIDDEN)}
    for i in range(2):
        p = f"model.layers.{i}."
        sd[p + "mlp.gate_proj.weight"] = torch.randn(INTER, HIDDEN, generator=g) / 8
        sd[p + "mlp.up_proj.weight"] = torch.randn(INTER, HIDDEN, generator=g) / 8
        sd[p + "mlp.down_proj.weight"] = torch.randn(HIDDEN, INTER, generator=g) / 16
        sd[p + "post_attention_layernorm.weight"] = torch.ones(HIDDEN)
    # Laid out for `world` ranks: each rank's slices are whole chunks of the file (any world
    # dividing it loads as well; others read parts of chunks).
    jtree.save(sd, path, chunk_bytes=16 << 10, shard_layout=world)


def mlp(x: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, down: torch.Tensor) -> torch.Tensor:
    """A Llama MLP block: down(silu(gate(x)) * up(x))."""
    return torch.nn.functional.silu(x @ gate.T) * (x @ up.T) @ down.T


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", help="a .jtree of a Llama-like state dict")
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.model or os.path.join(tmp, "model.jtree")
        if args.model is None:
            save_demo_model(path, args.world)
        layer = "model.layers.0.mlp."
        whole = jtree.load(path, keys=f"{layer}*", framework="torch", device=args.device,
                           prune=True)
        x = torch.randn(3, whole[layer + "gate_proj.weight"].shape[1], device=args.device,
                        dtype=whole[layer + "gate_proj.weight"].dtype)
        want = mlp(x, *(whole[layer + n + "_proj.weight"] for n in ("gate", "up", "down")))
        total = torch.zeros_like(want)
        for rank in range(args.world):
            shard = jtree.load(path, slices=jtree.TensorParallel(rank, args.world),
                               framework="torch", device=args.device)
            gate, up, down = (shard[layer + n + "_proj.weight"] for n in ("gate", "up", "down"))
            print(f"rank {rank}: gate {tuple(gate.shape)}, down {tuple(down.shape)}, "
                  f"embed_tokens {tuple(shard['model.embed_tokens.weight'].shape)}")
            total += mlp(x, gate, up, down)  # this rank's partial sum (the all-reduce adds them)
        err = (total - want).abs().max().item()
        print(f"{args.world} ranks: max |sum of partial outputs - whole output| = {err:.2e}")
        return 0 if np.isclose(err, 0, atol=1e-3 * want.abs().max().item()) else 1


if __name__ == "__main__":
    sys.exit(main())
