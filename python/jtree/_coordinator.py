"""Coordination of a multi-process save, borrowed from the job's own distributed runtime.

jtree brings no network of its own: the processes of a job that save one checkpoint together
already share a runtime (JAX's, MPI, torch.distributed), and a save needs only three things from
it, all small: who am I and how many are we, a barrier, and an all-gather of a few bytes per
process. :class:`Coordinator` is that interface; the adapters below implement it on each
runtime, and :func:`detect` picks the one a process has initialised.
"""
from __future__ import annotations

import pickle
import sys
from typing import Any, List, Optional

import numpy as np

from ._errors import InvalidArgumentError


class Coordinator:
    """What a multi-process save needs from the job's runtime. Subclass it to plug another
    runtime in: set ``process_index`` and ``process_count`` and implement :meth:`barrier` and
    :meth:`all_gather` (every process calls them in the same order)."""

    process_index: int = 0
    process_count: int = 1

    def barrier(self, name: str) -> None:
        """Returns once every process has called it (with the same ``name``)."""
        raise NotImplementedError

    def all_gather(self, data: bytes) -> List[bytes]:
        """Every process's ``data`` (a few bytes to a few KiB), in process order."""
        raise NotImplementedError

    def broadcast(self, data: bytes) -> bytes:
        """Process 0's ``data``, in every process."""
        return self.all_gather(data if self.process_index == 0 else b"")[0]

    def broadcast_object(self, obj: Any) -> Any:
        """Process 0's ``obj`` (picklable, small), in every process."""
        return pickle.loads(self.broadcast(pickle.dumps(obj) if self.process_index == 0
                                           else b""))

    def gather_objects(self, obj: Any) -> List[Any]:
        """Every process's ``obj`` (picklable, small), in process order. The bytes come from
        the processes of one job, which trust each other as they trust their own code."""
        return [pickle.loads(b) for b in self.all_gather(pickle.dumps(obj))]

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} process {self.process_index} of "
                f"{self.process_count}>")


class JaxCoordinator(Coordinator):
    """JAX's multi-process runtime (after ``jax.distributed.initialize``): barriers and
    gathers through ``jax.experimental.multihost_utils`` on the job's devices."""

    def __init__(self) -> None:
        import jax  # noqa: PLC0415

        self.process_index = jax.process_index()
        self.process_count = jax.process_count()

    def barrier(self, name: str) -> None:
        """``multihost_utils.sync_global_devices(name)``."""
        from jax.experimental import multihost_utils as mu  # noqa: PLC0415

        mu.sync_global_devices(name)

    def all_gather(self, data: bytes) -> List[bytes]:
        """Through ``multihost_utils.process_allgather`` (lengths, then padded bytes)."""
        from jax.experimental import multihost_utils as mu  # noqa: PLC0415

        # process_allgather wants equal shapes everywhere: lengths first, then padded bytes.
        sizes = np.asarray(mu.process_allgather(np.array([len(data)], np.int64))).reshape(-1)
        width = max(int(sizes.max()), 1)
        padded = np.zeros(width, np.uint8)
        padded[:len(data)] = np.frombuffer(data, np.uint8)
        rows = np.asarray(mu.process_allgather(padded)).reshape(self.process_count, width)
        return [rows[i, :int(sizes[i])].tobytes() for i in range(self.process_count)]


class MPICoordinator(Coordinator):
    """MPI through mpi4py: a communicator (default ``MPI.COMM_WORLD``)."""

    def __init__(self, comm: Any = None) -> None:
        if comm is None:
            from mpi4py import MPI  # noqa: PLC0415

            comm = MPI.COMM_WORLD
        self.comm = comm
        self.process_index = comm.Get_rank()
        self.process_count = comm.Get_size()

    def barrier(self, name: str) -> None:
        """``comm.Barrier()``."""
        self.comm.Barrier()

    def all_gather(self, data: bytes) -> List[bytes]:
        """``comm.allgather(data)``."""
        return list(self.comm.allgather(bytes(data)))

    def broadcast(self, data: bytes) -> bytes:
        """``comm.bcast(data, root=0)``."""
        return self.comm.bcast(bytes(data) if self.process_index == 0 else None, root=0)


class TorchCoordinator(Coordinator):
    """torch.distributed (after ``init_process_group``), in a process group (default: the
    whole job). With NCCL, the current CUDA device carries the gathers, as torch requires."""

    def __init__(self, group: Any = None) -> None:
        import torch.distributed as dist  # noqa: PLC0415

        if not dist.is_initialized():
            raise InvalidArgumentError("TorchCoordinator: torch.distributed is not initialised "
                                       "(call torch.distributed.init_process_group first)")
        self.group = group
        self.process_index = dist.get_rank(group)
        self.process_count = dist.get_world_size(group)

    def barrier(self, name: str) -> None:
        """``torch.distributed.barrier(group)``."""
        import torch.distributed as dist  # noqa: PLC0415

        dist.barrier(self.group)

    def all_gather(self, data: bytes) -> List[bytes]:
        """``torch.distributed.all_gather_object`` in the group."""
        import torch.distributed as dist  # noqa: PLC0415

        out: List[Any] = [None] * self.process_count
        dist.all_gather_object(out, bytes(data), group=self.group)
        return out


class SingleProcess(Coordinator):
    """A job of one process: every collective step is immediate."""

    def barrier(self, name: str) -> None:
        """Nothing to wait for."""

    def all_gather(self, data: bytes) -> List[bytes]:
        """``[data]``."""
        return [bytes(data)]


def detect() -> Optional[Coordinator]:
    """The coordinator of the runtime this process has initialised for a job of several
    processes: torch.distributed, then MPI (only when mpi4py is already imported: importing it
    would start MPI), then JAX (only when jax is imported). None when there is none."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized() \
            and dist.get_world_size() > 1:
        return TorchCoordinator()
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized() \
            and mpi.COMM_WORLD.Get_size() > 1:
        return MPICoordinator()
    jax = sys.modules.get("jax")
    if jax is not None and jax.process_count() > 1:
        return JaxCoordinator()
    return None
