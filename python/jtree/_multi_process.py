"""A save by every process of a job into one file: segments, a barrier, one commit.

Every process calls :func:`jtree.save` with the same tree (its own blocks of the arrays spread
over the job) and a coordinator. The steps, in the same order in every process:

1. process 0 checks the target (a file or object that is not a jtree file is refused unless
   overwrite_foreign, as the commit would, but before any process writes a byte) and draws a
   save id; everyone receives both (stale segments of another attempt are refused at commit);
2. GlobalArray leaves: the blocks every process holds are gathered, checked (same shape and
   dtype everywhere, replica-0 blocks cover the array exactly once) and one chunk grid that
   fits every block is chosen;
3. each process writes its segment (the chunks of its replica-0 blocks, and process 0 the
   leaves nobody shards);
4. the outcomes are gathered: if any process failed, every process raises;
5. process 0 commits (checks every segment, assembles the file, removes the segments) and the
   outcome reaches everyone; on failure each process removes its own segment.

Everything gathered is small (a save id, block boxes, one outcome per process).
"""
from __future__ import annotations

import math
import os
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import _jtree
from . import _keypath as kp
from ._coordinator import Coordinator
from ._errors import AbortedError, Error, InvalidArgumentError, error
from ._global_array import find_overlap, volume
from ._save import SHARDED


def start(coord: Coordinator, path: str, prepared: Optional[BaseException]) -> int:
    """Step 1: the save id drawn by process 0, and every process's readiness (``prepared``:
    the error met while walking its tree, if any): raises in every process if one failed."""
    gathered = coord.gather_objects((os.urandom(8), _outcome(prepared)))
    if prepared is not None:
        raise prepared
    failed = [(p, o) for p, (_, o) in enumerate(gathered) if o is not None]
    if failed:
        raise error(AbortedError, path, None, "multi-process save: " + "; ".join(
            f"process {p} could not prepare its save ({o[0]}: {o[1]})" for p, o in failed))
    return int.from_bytes(gathered[0][0], "little")


def plan_global_arrays(coord: Coordinator, leaves: List[Tuple[Tuple[Any, ...], Any, List[Any]]],
                       file: str) -> None:
    """Gathers every process's GlobalArray blocks, checks that they fit together and gives
    each leaf the boxes of all its blocks, from which the library cuts the chunk grid (lines at
    every block edge of every process, so that each chunk lies in one block). Every process
    gets the same result from the same gathered data, so an error is raised in all of them
    alike."""
    mine = [(kp.join(path), leaf.dtype, tuple(leaf.shape), boxes) for path, leaf, boxes in leaves]
    everyone = coord.gather_objects(mine)
    counts = [len(x) for x in everyone]
    if len(set(counts)) != 1:
        raise error(InvalidArgumentError, file, None,
                    f"multi-process save: the processes' trees hold different numbers of "
                    f"GlobalArray leaves ({counts}, by process): every process must save the "
                    f"same tree")
    for i, (path, leaf, _) in enumerate(leaves):
        where = kp.join(path)
        views = [x[i] for x in everyone]
        for p, (other_where, dtype, shape, _) in enumerate(views):
            if (other_where, dtype, shape) != (where, leaf.dtype, tuple(leaf.shape)):
                raise error(InvalidArgumentError, file, where,
                            f"multi-process save: process {p} has {dtype} {shape} at "
                            f"{other_where!r}, process {coord.process_index} {leaf.dtype} "
                            f"{tuple(leaf.shape)} at {where!r}")
        shape = tuple(leaf.shape)
        owned = [(box, p) for p, v in enumerate(views) for box in v[3]]
        clash = find_overlap(owned)
        if clash is not None:
            a, b, box = clash
            raise error(InvalidArgumentError, file, where,
                        f"multi-process save: processes {a} and {b} both hold "
                        f"{_box_text(box)} as replica 0 (give copies replica_id > 0)")
        covered = sum(volume(box) for box, _ in owned)
        if covered != math.prod(shape):
            raise error(InvalidArgumentError, file, where,
                        f"multi-process save: the replica-0 blocks of all processes cover "
                        f"{covered} of the {math.prod(shape)} elements of {shape}: part of the "
                        f"array is held by no process")
        # The library cuts the chunk grid at every block edge (the same in every process).
        _, pieces, _, _, _ = leaf.data
        leaf.data = (SHARDED, pieces, sorted(box for box, _ in owned), (), True)


def _box_text(box: Any) -> str:
    return "[" + ", ".join(f"{b}:{e}" for b, e in box) + "]"


def _outcome(e: Optional[BaseException]) -> Optional[Tuple[str, str]]:
    return None if e is None else (type(e).__name__, str(e))


def collective_save(coord: Coordinator, path: str, prepared: Optional[BaseException],
                    global_leaves: List[Any], chunk_bytes: int,
                    write_segment: Callable[[int, int, int], Any],
                    commit: Callable[[], Dict[str, int]],
                    check_target: Callable[[], None] = lambda: None,
                    remote: Optional[Dict[str, Any]] = None) -> Dict[str, int]:
    """Runs steps 1-5 (module docstring). ``prepared`` is the error this process met while
    walking its tree (None: ready); ``check_target()`` raises if the target may not be
    replaced (called by process 0 in step 1); ``write_segment(index, count, save_id)`` writes
    this process's segment; ``commit()`` assembles the file (process 0); ``remote`` (the
    native settings of the save's RemoteOptions) removes a failed save's segments. Returns the
    committed file's statistics, the same in every process."""
    index, count = coord.process_index, coord.process_count
    if index == 0 and prepared is None:
        try:
            check_target()
        except Exception as e:  # noqa: BLE001  (reported to every process in step 1)
            prepared = e
    save_id = start(coord, path, prepared)
    if global_leaves:
        plan_global_arrays(coord, global_leaves, path)
    failure: Optional[BaseException] = None
    try:
        write_segment(index, count, save_id)
    except Exception as e:  # noqa: BLE001  (reported after the gather, in every process)
        failure = e
    outcomes = coord.gather_objects(_outcome(failure))
    if failure is not None:
        _remove_own_segment(path, index, count, remote)
        raise failure
    failed = [(p, o) for p, o in enumerate(outcomes) if o is not None]
    if failed:
        _remove_own_segment(path, index, count, remote)
        raise error(AbortedError, path, None,
                    "multi-process save: " + "; ".join(
                        f"process {p} failed to write its segment ({o[0]}: {o[1]})"
                        for p, o in failed))
    outcome: Tuple[Any, ...] = ("failed", "Error", "no commit")
    if index == 0:
        try:
            outcome = ("ok", commit())
        except Exception as e:  # noqa: BLE001  (reported in every process)
            failure = e
            outcome = ("failed",) + _outcome(e)
    outcome = coord.broadcast_object(outcome)
    if outcome[0] == "ok":
        return outcome[1]
    _remove_own_segment(path, index, count, remote)
    coord.barrier("jtree: segments removed")
    if failure is not None:
        raise failure
    raise error(AbortedError, path, None, f"multi-process save: process 0 failed to assemble "
                                          f"the file ({outcome[1]}: {outcome[2]})")


def _remove_own_segment(path: str, index: int, count: int, remote: Any = None) -> None:
    """No leftovers after a failed save: each process removes its own segment (a local file or
    a remote object, with the save's ``remote`` settings); a failure to remove is not the
    error worth reporting."""
    try:
        _jtree.remove_object(_jtree.segment_path(path, index, count), remote)
    except Error:
        pass
