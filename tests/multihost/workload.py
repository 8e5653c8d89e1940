"""The tree every multi-process test saves, and how it is cut into blocks.

Every process builds the same global arrays from a fixed seed (the test process too, to check
the result) and keeps only its blocks. The arrays are a few MB each, so that "this process
read only its part" is visible in byte counts; the row split of the save is uneven on purpose
(the chunk grid must follow every block edge).
"""
from typing import Any, Dict, List, Tuple

import ml_dtypes
import numpy as np

ROWS = (4800, 128)   # float32, split along axis 0
COLS = (96, 4800)    # int32, split along axis 1
GRID = (960, 1200)   # bfloat16, 2 x 2 blocks with 4 processes (rows otherwise)
REPL = (50, 70)      # float64, every process holds all of it (replica_id = process)
HALF = (1200, 64)    # float16 torch tensor blocks, split along axis 0
PLAIN = (3, 3)       # a NumPy array nobody shards: process 0 writes it

# The save's uneven row edges for 4 processes (cells of 600 and 1800 rows: a rectilinear grid).
ROW_EDGES_4 = [0, 600, 2400, 3000, 4800]


def global_arrays() -> Dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {
        "rows": rng.standard_normal(ROWS).astype(np.float32),
        "cols": rng.integers(-2**31, 2**31 - 1, COLS, dtype=np.int32),
        "grid": (rng.standard_normal(GRID) * 0.02).astype(ml_dtypes.bfloat16),
        "repl": rng.standard_normal(REPL),
        "half": rng.standard_normal(HALF).astype(np.float16),
        "plain": np.arange(9, dtype=np.int16).reshape(PLAIN),
    }


def even_edges(n: int, parts: int) -> List[int]:
    return [n * k // parts for k in range(parts + 1)]


def blocks(rank: int, count: int, save: bool) -> Dict[str, Tuple[slice, ...]]:
    """Where process ``rank`` of ``count`` sits in each sharded array (the save cuts rows
    unevenly with 4 processes; loads cut everything evenly)."""
    r = ROW_EDGES_4 if save and count == 4 else even_edges(ROWS[0], count)
    c = even_edges(COLS[1], count)
    h = even_edges(HALF[0], count)
    out = {
        "rows": (slice(r[rank], r[rank + 1]),),
        "cols": (slice(None), slice(c[rank], c[rank + 1])),
        "half": (slice(h[rank], h[rank + 1]),),
    }
    if count == 4:
        i, j = divmod(rank, 2)
        out["grid"] = (slice(i * GRID[0] // 2, (i + 1) * GRID[0] // 2),
                       slice(j * GRID[1] // 2, (j + 1) * GRID[1] // 2))
    else:
        g = even_edges(GRID[0], count)
        out["grid"] = (slice(g[rank], g[rank + 1]),)
    return out


def tree_for(rank: int, count: int, jtree: Any, torch: Any) -> Dict[str, Any]:
    """Process ``rank``'s tree for a save: GlobalArray blocks, a replicated array every
    process holds, values nobody shards."""
    g = global_arrays()
    b = blocks(rank, count, save=True)
    return {
        "params": {
            "rows": jtree.GlobalArray(g["rows"][b["rows"]].copy(), b["rows"], ROWS),
            "cols": jtree.GlobalArray(np.ascontiguousarray(g["cols"][b["cols"]]), b["cols"],
                                      COLS),
            "grid": jtree.GlobalArray(np.ascontiguousarray(g["grid"][b["grid"]]), b["grid"],
                                      GRID),
            "half": jtree.GlobalArray(torch.from_numpy(g["half"][b["half"]].copy()), b["half"],
                                      HALF),
        },
        "repl": jtree.GlobalArray(g["repl"].copy(), (), REPL, replica_id=rank),
        "plain": g["plain"],
        "step": 1234,
        "name": "multi-host run",
        "config": {"lr": 3e-4, "layers": [4, 8], "bf16": True},
    }


# The S3 test's extra array: 24 MiB per process (float32 rows), so that segments are well
# above S3's 5 MiB part minimum and the committer can copy them on the server side.
BIG_ROWS_PER_PROCESS = (3072, 2048)


def big_block(rank: int) -> np.ndarray:
    return np.random.default_rng(100 + rank).standard_normal(BIG_ROWS_PER_PROCESS,
                                                             dtype=np.float32)


def with_big(tree: Dict[str, Any], rank: int, count: int, jtree: Any) -> Dict[str, Any]:
    r, c = BIG_ROWS_PER_PROCESS
    tree["big"] = jtree.GlobalArray(big_block(rank), (slice(rank * r, (rank + 1) * r),),
                                    (count * r, c))
    return tree


def chunked_bytes() -> int:
    """The bytes of array data the saved tree stores in chunks (each array once; "plain", 18
    bytes, goes inline in the header)."""
    return sum(a.nbytes for k, a in global_arrays().items() if k != "plain")


def uneven_arrays() -> Dict[str, np.ndarray]:
    """Arrays whose np.array_split blocks share no useful common divisor (issue 19): a vocabulary
    vector, a [vocabulary, 64] table, a 3-way split of 1000 bytes and an odd 3-D split."""
    rng = np.random.default_rng(19)
    return {"v": rng.integers(0, 65535, 100003, dtype=np.uint16),
            "t": rng.standard_normal((50257, 64)).astype(np.float32),
            "b": rng.integers(0, 255, 1000, dtype=np.uint8),
            "c": rng.standard_normal((7, 1001, 13)).astype(np.float32)}


def _split(n: int, parts: int) -> List[slice]:
    """np.array_split's pieces of range(n) as slices."""
    edges = np.cumsum([0] + [len(p) for p in np.array_split(np.arange(n), parts)])
    return [slice(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


def uneven_blocks(key: str) -> List[Tuple[slice, ...]]:
    """The blocks of uneven_arrays()[key]: v over 4, t over 4 in each dimension, b over 3, c
    3 x 4 x 1."""
    if key == "v":
        return [(s,) for s in _split(100003, 4)]
    if key == "t":
        return [(r, c) for r in _split(50257, 4) for c in _split(64, 4)]
    if key == "b":
        return [(s,) for s in _split(1000, 3)]
    return [(a, b, slice(0, 13)) for a in _split(7, 3) for b in _split(1001, 4)]
