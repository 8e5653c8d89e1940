"""What the data allows: for a cached workload, the order-0 entropy bound of its arrays and the
sizes that plain zstd-1, byte-shuffle + zstd-1 and exponent-split + zstd-1 reach on the same
bytes (no timing; sizes only).

The bound, as issue 6 defines it for bf16 weights: split each float into its exponent byte and
the rest (sign moved next to the mantissa), and count each byte plane at its order-0 entropy
(per 4 MiB piece of the array, as a chunked coder sees it). Sign and mantissa bits of trained
weights are close to random, so what an entropy coder can save is essentially the exponent's
redundancy: for normal(0, 0.02) bf16 that is (8 + 2.58) / 16 = 0.661 of the raw size.
Integer arrays are counted by plain byte planes. It is the limit of a per-chunk, order-0,
byte-plane coder -- not a proof that nothing can do better, but what the issue's target refers
to.

    python analyze.py CACHE_DIR        prints one JSON object
"""
from __future__ import annotations

import json
import os
import sys
from typing import Dict

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workloads as W  # noqa: E402

PIECE = 4 << 20


def planes(a: np.ndarray, how: str):
    """The byte planes of a 1-d array: 'shuffle' (byte k of every element together) or
    'split' (exponent byte first, sign moved to the top mantissa byte)."""
    if a.dtype == W.BF16 and how == "split":
        u = a.view(np.uint16)
        return [((u >> 7) & 0xFF).astype(np.uint8),
                (((u >> 8) & 0x80) | (u & 0x7F)).astype(np.uint8)]
    if a.dtype == np.float32 and how == "split":
        u = a.view(np.uint32)
        return [((u >> 23) & 0xFF).astype(np.uint8),
                (((u >> 24) & 0x80) | ((u >> 16) & 0x7F)).astype(np.uint8),
                ((u >> 8) & 0xFF).astype(np.uint8), (u & 0xFF).astype(np.uint8)]
    b = a.view(np.uint8).reshape(-1, a.itemsize)
    return [np.ascontiguousarray(b[:, k]) for k in range(a.itemsize)]


def entropy_bytes(p: np.ndarray) -> float:
    if p.size == 0:
        return 0.0
    c = np.bincount(p, minlength=256).astype(np.float64)
    c = c[c > 0] / p.size
    return float(-(c * np.log2(c)).sum() * p.size / 8)


def main() -> None:
    import zstandard
    d = sys.argv[1]
    z = zstandard.ZstdCompressor(level=1)
    tree = W.load_tree(d)
    tot: Dict[str, Dict[str, float]] = {}
    for _path, a in W.iter_leaves(tree):
        if not isinstance(a, np.ndarray):
            continue
        flat = a.reshape(-1)
        per = max(1, PIECE // a.itemsize)
        acc = tot.setdefault(a.dtype.name, {"raw": 0, "bound": 0.0, "zstd1": 0, "shuffle_zstd1": 0,
                                            "split_zstd1": 0})
        for o in range(0, flat.size, per):
            piece = flat[o:o + per]
            acc["raw"] += piece.nbytes
            sp = planes(piece, "split")
            acc["bound"] += sum(entropy_bytes(p) for p in sp)
            acc["zstd1"] += len(z.compress(piece.view(np.uint8).data))
            acc["shuffle_zstd1"] += len(z.compress(np.concatenate(planes(piece, "shuffle")).data))
            acc["split_zstd1"] += len(z.compress(np.concatenate(sp).data))
    all_ = {k: sum(v[k] for v in tot.values()) for k in ("raw", "bound", "zstd1", "shuffle_zstd1", "split_zstd1")}
    out = {"by_dtype": tot, "all": all_}
    for v in list(tot.values()) + [all_]:
        for k in ("bound", "zstd1", "shuffle_zstd1", "split_zstd1"):
            v[k + "_ratio"] = v[k] / v["raw"] if v["raw"] else 1.0
    print(json.dumps(out))


if __name__ == "__main__":
    main()
