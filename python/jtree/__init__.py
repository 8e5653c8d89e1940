"""jtree: save and load trees of arrays (ML checkpoints) as one seekable .jtree file.

    import jtree
    jtree.save({"params": {"w": w, "b": b}, "step": 1000}, "ckpt.jtree")
    tree = jtree.load("ckpt.jtree")                       # NumPy arrays (framework="torch"/"jax")
    spec = jtree.load_pytreedef("ckpt.jtree")             # structure only: no array data read
    part = jtree.load("ckpt.jtree", {"params": {"w": None, "b": ...}, "step": True})
    part = jtree.load("ckpt.jtree", keys="params/*")      # key-path patterns
    shard = jtree.load("model.jtree", slices=jtree.TensorParallel(rank, world),
                       framework="torch", device="cuda:0")  # a rank's shard, one pass
    fut = jtree.nonblocking_save(tree, "ckpt.jtree"); fut.result()
    jtree.save({"step": 1001}, "ckpt.jtree", partial_write=True)
    # every process of a job: its block of a global array; one file comes out
    jtree.save({"w": jtree.GlobalArray(block, (slice(r0, r1),), (rows, cols))}, "ckpt.jtree")
    with jtree.open("ckpt.jtree") as f:
        rows = f["params"]["emb"][1000:2000, :64]         # reads only the chunks needed
    data = jtree.dumps(tree); tree = jtree.loads(data)    # bytes; also save/load(file object)

The C++ library does the work (format, compression, checksums, parallel I/O) with the GIL
released; this package walks Python objects and translates. See python/README.md.
"""
from . import _jtree
from ._api import (Future, WriteStats, commit_segments, compact, dumps, load, load_pytreedef,
                   loads, nonblocking_load, nonblocking_save, open, release_scratch_memory,
                   save)
from ._device_options import DeviceOptions, DeviceStats, release_pinned_memory
from ._coordinator import (Coordinator, JaxCoordinator, MPICoordinator, SingleProcess,
                           TorchCoordinator)
from ._errors import (AbortedError, AlreadyExistsError, CorruptionError, Error,
                      InvalidArgumentError, NotFoundError, NotSupportedError,
                      PermissionDeniedError, ResourceExhaustedError, StorageError)
from ._file import File, LazyArray, Node
from ._global_array import GlobalArray
from ._remote import RemoteOptions
from ._registry import register_pytree_leaf_serialization, register_pytree_node_serialization
from ._shard import TensorParallel
from ._structure import LeafSpec

def __getattr__(name: str):
    """jtree.convert (a callable package: jtree.convert(src, dst) converts; jtree/convert/)
    and jtree.ConvertStats, imported on first use: the conversion drivers and their readers
    are no part of the cost of `import jtree` for loads and saves."""
    if name in ("convert", "ConvertStats"):
        import importlib  # noqa: PLC0415

        convert = importlib.import_module(".convert", __name__)  # (binds jtree.convert)
        globals()["ConvertStats"] = convert.ConvertStats
        return convert if name == "convert" else convert.ConvertStats
    raise AttributeError(f"module 'jtree' has no attribute {name!r}")


__version__ = _jtree.version()

__all__ = [
    "save", "load", "load_pytreedef", "nonblocking_save", "nonblocking_load", "open", "compact",
    "dumps", "loads",
    "commit_segments", "convert", "ConvertStats", "GlobalArray", "TensorParallel", "Coordinator",
    "JaxCoordinator", "MPICoordinator", "TorchCoordinator", "SingleProcess",
    "register_pytree_node_serialization", "register_pytree_leaf_serialization",
    "Future", "WriteStats", "File", "Node", "LazyArray", "LeafSpec", "DeviceOptions",
    "RemoteOptions",
    "DeviceStats", "release_pinned_memory", "release_scratch_memory",
    "Error", "CorruptionError", "StorageError", "InvalidArgumentError", "NotSupportedError",
    "NotFoundError", "AlreadyExistsError", "PermissionDeniedError", "AbortedError",
    "ResourceExhaustedError",
]
