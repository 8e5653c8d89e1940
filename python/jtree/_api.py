"""The public functions: save, load, load_pytreedef, their non-blocking forms, dumps, loads,
open, compact."""
from __future__ import annotations

import io
import os
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, Generator, NamedTuple, Optional, Union

import numpy as np

from . import _jtree
from ._errors import (AlreadyExistsError, CorruptionError, InvalidArgumentError,
                      NotFoundError, NotSupportedError, error)
from ._coordinator import Coordinator, JaxCoordinator, SingleProcess, detect
from ._device_options import DeviceOptions
from . import _fileobj
from . import _shard
from . import _keypath as kp
from ._file import File, LazyArray, Node
from ._multi_process import collective_save
from ._progress import finish, progress_callback
from . import _remote
from ._remote import RemoteOptions
from ._load import LoadOptions, spec_tree
from ._load_call import call_options, run
from ._save import Emitter, SaveOptions, flatten, merge
from ._save import spec_tree as save_spec_tree
from ._structure import CODEC_RAW, CODEC_ZSTD, paused_gc

if TYPE_CHECKING:
    import concurrent.futures

PathLike = Union[str, "os.PathLike[str]"]


class WriteStats(NamedTuple):
    """What a save wrote: leaves in the tree, chunks and bytes written by this call (raw
    and stored), the file's size and its generation (0 for a new file, +1 per partial write)."""

    leaves: int
    chunks: int
    raw_bytes: int
    stored_bytes: int
    file_size: int
    generation: int


# ---- background work -------------------------------------------------------------------------

# (concurrent.futures, which imports logging, and asyncio are imported when first used: they are
# over half of `import jtree`'s own time, which every fresh process pays before its first load.)

_executor: Optional[concurrent.futures.ThreadPoolExecutor] = None
_executor_lock = threading.Lock()
# Writes to one path run in the order they were asked for: each waits for the previous one.
_last_write: Dict[str, concurrent.futures.Future] = {}


def _pool() -> concurrent.futures.ThreadPoolExecutor:
    import concurrent.futures  # noqa: PLC0415

    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = concurrent.futures.ThreadPoolExecutor(max_workers=4,
                                                              thread_name_prefix="jtree")
        return _executor


def _path_key(path: str) -> str:
    # Writes to one file run in order: a local file by its absolute path (file:// URLs
    # included), a URL as written. Which is which is the library's rule (jtree::is_local_path:
    # "runs/a://b" is a path), asked through the native module.
    local = _jtree.local_path(path)
    return path if local is None else os.path.abspath(local)


def _in_order(path: str, work, background: bool) -> concurrent.futures.Future:
    """Runs `work` after every earlier write to the same path (in the pool, or here)."""
    import concurrent.futures  # noqa: PLC0415

    key = _path_key(path)
    mine: concurrent.futures.Future = concurrent.futures.Future()
    with _executor_lock:
        prev = _last_write.get(key)
        _last_write[key] = mine

    def run() -> None:
        try:
            if prev is not None:
                concurrent.futures.wait([prev])
            result = work()
        except BaseException as e:  # noqa: BLE001  (handed to the caller through the future)
            mine.set_exception(e)
        else:
            mine.set_result(result)
        finally:
            with _executor_lock:
                if _last_write.get(key) is mine:
                    del _last_write[key]

    if background:
        _pool().submit(run)
    else:
        run()
    return mine


class Future:
    """The result of a non-blocking save or load: ``done()``, ``result(timeout)``,
    ``exception(timeout)``, ``add_done_callback(fn)``, ``await``-able; ``pytree`` is the
    structure (a :class:`LeafSpec` per leaf), available at once."""

    def __init__(self, future: concurrent.futures.Future, pytree: Any):
        self._future = future
        self._pytree = pytree

    @property
    def pytree(self) -> Any:
        """The tree's structure, known before any data is written or read."""
        return self._pytree

    def done(self) -> bool:
        """True once the save or load has finished (successfully or not)."""
        return self._future.done()

    def result(self, timeout: Optional[float] = None) -> Any:
        """Waits for the end; returns the loaded tree (load) or the :class:`WriteStats`
        (save), or raises the operation's error."""
        return self._future.result(timeout)

    def exception(self, timeout: Optional[float] = None) -> Optional[BaseException]:
        """Waits for the end; the operation's error, or None."""
        return self._future.exception(timeout)

    def add_done_callback(self, fn) -> None:
        """Calls ``fn(self)`` when the operation ends (at once if it has)."""
        self._future.add_done_callback(lambda _f: fn(self))

    def __await__(self) -> Generator[Any, None, Any]:
        import asyncio  # noqa: PLC0415

        return asyncio.wrap_future(self._future).__await__()

    def __repr__(self) -> str:
        return f"<jtree.Future {'done' if self.done() else 'pending'}>"


# ---- save --------------------------------------------------------------------------------------

def _codec(compression: Optional[str]) -> int:
    if compression in (None, "none", "raw"):
        return CODEC_RAW
    if compression == "zstd":
        return CODEC_ZSTD
    raise InvalidArgumentError(f"compression must be 'zstd' or None, not {compression!r}")


class _SaveJob:
    """A flattened tree (arrays referenced or snapshotted) and how to write it."""

    def __init__(self, tree: Any, path: PathLike, *, partial_write: bool, snapshot: bool,
                 overwrite: bool, overwrite_foreign: bool, allow_pickle: bool,
                 compression: Optional[str], level: Optional[int], chunk_bytes: Optional[int],
                 inline_threshold: Optional[int], threads: int, sync: bool,
                 metadata: Optional[Dict[str, Union[str, bytes]]],
                 coordinator: Optional[Coordinator], progress: Any = False,
                 shard_layout: Any = None, remote: Optional[RemoteOptions] = None):
        # A binary file object (jtree._fileobj) is written sequentially; self.path names it.
        self.fileobj = path if _fileobj.is_fileobj(path) else None
        self.path = _fileobj.name_of(path) if self.fileobj is not None else os.fspath(path)
        self.progress = progress_callback(progress, f"save {self.path}")
        if remote is not None and self.fileobj is not None:
            raise error(InvalidArgumentError, self.path, None,
                        "remote= applies to s3:// URLs, not to a file object")
        # The native calls' remote= (checked there: refused for a local path).
        self.remote_options = remote
        self.remote = _remote.settings(remote)
        self.codec = _codec(compression)
        self.level = level
        self.partial = partial_write
        self.args = dict(chunk_bytes=chunk_bytes, inline_threshold=inline_threshold,
                         threads=threads, overwrite=overwrite,
                         overwrite_foreign=overwrite_foreign, sync=sync,
                         shard_layout=_shard.layout_arg(shard_layout))
        self.metadata = {}
        for k, v in (metadata or {}).items():
            # Metadata keys are UTF-8 text in the file: say so here rather than let the
            # binding fail with a TypeError (a str with lone surrogates cannot be encoded).
            if not isinstance(k, str):
                raise InvalidArgumentError(f"metadata key {k!r}: keys must be str",
                                           file=self.path)
            try:
                k.encode("utf-8")
            except UnicodeEncodeError as e:
                raise InvalidArgumentError(f"metadata key {k!r} is not valid Unicode text "
                                           f"({e.reason}); keys are stored as UTF-8",
                                           file=self.path) from None
            if isinstance(v, str):  # (text: saved marked so, and given back as str)
                try:
                    v.encode("utf-8")
                except UnicodeEncodeError as e:
                    raise InvalidArgumentError(f"metadata {k!r}: the value is not valid Unicode "
                                               f"text ({e.reason}); text is stored as UTF-8 "
                                               f"(pass bytes for other data)",
                                               file=self.path) from None
                self.metadata[k] = v
            else:
                self.metadata[k] = bytes(v)
        if coordinator is not None and not isinstance(coordinator, Coordinator):
            raise InvalidArgumentError(f"coordinator must be a jtree.Coordinator, not "
                                       f"{type(coordinator).__qualname__}")
        opts = SaveOptions(allow_pickle=allow_pickle, snapshot=snapshot,
                           chunk_bytes=chunk_bytes, file=self.path)
        self.chunk_bytes = opts.chunk_bytes
        # With a coordinator given, an error in this process's tree is reported to the others
        # in the save's first collective step (they would wait for this process otherwise).
        self.prepared: Optional[BaseException] = None
        self.global_leaves: list = []
        try:
            self.root, walk = flatten(tree, opts)
            self.keepalive, self.global_leaves = walk.keepalive, walk.global_leaves
            segmented, jax_global = walk.segmented, walk.jax_global
        except Exception as e:  # noqa: BLE001
            if coordinator is None or coordinator.process_count == 1:
                raise
            self.prepared, self.root, self.keepalive = e, None, []
            segmented = jax_global = False
        # A save by every process of the job: a coordinator given (for a job of several
        # processes), or arrays spread over the processes (then the runtime's coordinator).
        self.coordinator = coordinator
        if coordinator is None and segmented:
            self.coordinator = JaxCoordinator() if jax_global else (detect() or SingleProcess())
        self.collective = self.coordinator is not None and (
            segmented or self.prepared is not None or self.coordinator.process_count > 1)
        if self.collective and partial_write:
            raise error(NotSupportedError, self.path, None,
                        "partial_write of a multi-process save (arrays spread over several "
                        "processes, or a coordinator) is not supported: save the whole tree")
        if self.fileobj is not None and (partial_write or self.collective):
            raise error(NotSupportedError, self.path, None,
                        "a file object takes a whole save from one process: partial_write "
                        "and multi-process saves need a path")

    def write(self) -> WriteStats:
        if self.collective:
            return self.write_collective()
        root = self.root
        append = False
        expect: Dict[str, Any] = {}
        metadata: Dict[str, bytes] = {}
        if self.partial:
            try:
                f = File(self.path, mmap=False, remote=self.remote_options)
            except NotFoundError:
                f = None
            except CorruptionError as e:
                # Not a jtree file (or a damaged one): nothing to add leaves to. Replaced by a
                # new file only when the caller said so, like save() without partial_write.
                if not self.args["overwrite_foreign"]:
                    raise error(AlreadyExistsError, self.path, None,
                                f"partial_write: the file exists but cannot be read as a jtree "
                                f"file ({e}); pass overwrite_foreign=True to replace it with "
                                f"this tree") from e
                f = None
            if f is not None:
                root = merge(root, f._root, self.path)
                metadata = f.metadata
                append = True
                # The append is refused (nothing written) if another writer changes the file
                # between this read and the append: the merged tree would drop its leaves.
                expect = _append_base(f.info())
        metadata.update(self.metadata)
        b = Emitter(self.path, self.codec, self.level).run(root, metadata)
        if self.fileobj is not None:
            stats = _fileobj.write(b, self.fileobj, self.path, self.progress, codec=self.codec,
                                   level=self.level, **self.args)
        else:
            # (progress= only when asked: a native module built before it had no such argument)
            stats = _jtree.write(b, self.path, codec=self.codec, level=self.level,
                                 append=append, **self.args, **expect, remote=self.remote,
                                 **({"progress": self.progress} if self.progress else {}))
        finish(self.progress, stats["raw_bytes"])
        return WriteStats(**stats)

    def write_collective(self) -> WriteStats:
        """A multi-process save (every process of the job calls it with the same tree): each
        process writes its replica-0 blocks into its segment next to the target, then process
        0 assembles the file; every process returns once the file is there, or raises if any
        step failed anywhere (jtree._multi_process)."""
        a = self.args

        def write_segment(index: int, count: int, save_id: int) -> None:
            b = Emitter(self.path, self.codec, self.level).run(self.root, self.metadata)
            _jtree.save_segment(
                b, self.path, process_index=index, process_count=count, save_id=save_id,
                codec=self.codec, level=self.level, chunk_bytes=a["chunk_bytes"],
                inline_threshold=a["inline_threshold"], threads=a["threads"], sync=a["sync"],
                shard_layout=a["shard_layout"], remote=self.remote)

        def commit() -> Dict[str, int]:
            return _jtree.commit_segments(
                self.path, self.coordinator.process_count, overwrite=a["overwrite"],
                overwrite_foreign=a["overwrite_foreign"], sync=a["sync"], remote=self.remote)

        def check_target() -> None:
            _jtree.check_save_target(self.path, overwrite_foreign=a["overwrite_foreign"],
                                     remote=self.remote)

        stats = collective_save(self.coordinator, self.path, self.prepared, self.global_leaves,
                                self.chunk_bytes, write_segment, commit, check_target,
                                remote=_remote.settings(self.remote_options))
        return WriteStats(**stats)


def _append_base(info: Dict[str, Any]) -> Dict[str, Any]:
    """The write() arguments that pin an append to the generation ``info`` (File.info()) describes
    (none from a native module built before they existed)."""
    if "footer_offset" not in info:
        return {}
    return dict(expect_generation=info["generation"], expect_footer_offset=info["footer_offset"],
                expect_etag=info.get("etag", ""))


def save(tree: Any, path: PathLike, *, partial_write: bool = False, overwrite: bool = True,
         overwrite_foreign: bool = False, allow_pickle: bool = False,
         compression: Optional[str] = "zstd", level: Optional[int] = None,
         chunk_bytes: Optional[int] = None, inline_threshold: Optional[int] = None,
         threads: int = 0, sync: bool = True,
         metadata: Optional[Dict[str, Union[str, bytes]]] = None,
         coordinator: Optional[Coordinator] = None, progress: Any = False,
         shard_layout: Union[None, int, _shard.TensorParallel] = None,
         remote: Optional[RemoteOptions] = None) -> WriteStats:
    """Saves a tree of arrays and values as one .jtree file.

    ``tree`` is any nesting of dict (order kept), list, tuple, namedtuple, OrderedDict and None,
    with leaves that are arrays (NumPy, PyTorch, JAX -- sharded ones shard by shard -- or
    anything with ``__dlpack__``), Python int/float/bool/complex/str/bytes/bytearray, NumPy
    scalars, or registered custom types. Anything else is refused with its type and key path,
    unless ``allow_pickle=True``. The same array object appearing twice is stored once.

    Many processes, one file: in a job of several processes, every process calls ``save``
    with the same tree and path (a file system or bucket all of them see) when the tree holds
    arrays spread over them -- a ``jax.Array`` that is not fully addressable, or a
    :class:`GlobalArray` (a NumPy array or torch tensor block) -- or when ``coordinator`` is
    given. Each process writes the replica-0 blocks it holds into a segment next to the
    target (leaves nobody shards are written by process 0), and process 0 assembles the one
    file after a barrier; an error anywhere raises in every process and leaves no segment.
    ``coordinator`` is the job's runtime (:class:`JaxCoordinator`, :class:`MPICoordinator`,
    :class:`TorchCoordinator` or your own :class:`Coordinator`); without one, the runtime
    this process has initialised is used (torch.distributed, MPI, JAX). ``partial_write`` is
    not supported there; ``nonblocking_save`` runs these steps before returning.

    ``path`` is a local path (or a URL when the build has that backend). The file is replaced
    atomically; a file that is not a .jtree file is refused unless ``overwrite_foreign=True``,
    and any existing file unless ``overwrite`` (default True). ``path`` may also be a
    writable binary file object (``open(p, "wb")``, ``io.BytesIO``...): the file is written
    into it sequentially from its position (no seeking; see :func:`jtree.dumps`); a failed
    save seeks back and truncates it where it can.

    ``partial_write=True`` adds or replaces leaves of an existing file in place (a new
    generation appended to it): the file keeps what it has wherever ``tree`` holds None, and
    takes ``tree``'s values (arrays, scalars, whole subtrees) elsewhere; new dict keys are
    added. A missing file is simply created; a file that cannot be read as a jtree file is
    refused (:class:`AlreadyExistsError`) unless ``overwrite_foreign=True``. The append is
    pinned to the generation (and, on S3, the ETag) it read: if another writer appends to or
    replaces the file in between, it is refused with :class:`AbortedError` and nothing is
    written (the other writer's generation stays intact); read and try again.

    ``compression`` is "zstd" (default) or None; ``level`` the zstd level; ``chunk_bytes`` the
    target chunk size (default 4 MiB); ``inline_threshold`` the stored size up to which
    payloads go in the header (default 512 bytes: every open reads the whole header, and a
    larger payload loads as fast or faster from a chunk of its own); ``threads`` the
    compression threads (0: all cores); ``sync=False`` skips the fsync; ``metadata`` is stored
    as user metadata. ``progress`` is True (a bar on stderr when it is a terminal), a function
    ``(done_bytes, total_bytes)`` of the raw bytes written (an exception it raises aborts the
    save: nothing is committed, a previous file stays), or False. Returns the
    :class:`WriteStats`.

    ``shard_layout`` lays the file out for tensor-parallel serving: a world size, or a
    :class:`TensorParallel` whose world, ``rules`` and ``expert_parallel`` apply (its rank does
    not matter). Every array the split rules split gets a chunk grid cut at the edges of every
    rank's part, so that ``load(..., slices=TensorParallel(rank, world))`` for that world, or
    any divisor of it, reads and verifies whole chunks of its own part only (without it, a
    row-parallel weight's rank part lies in every row-slab chunk of the weight). A split the
    leaf cannot take (a column or row dimension that does not divide by the world) is an
    :class:`InvalidArgumentError` naming the leaf.

    ``remote``: a :class:`RemoteOptions` for an ``s3://`` target (endpoint, credentials,
    part size, retries...; None: the environment's settings); for a local path or a file
    object it is an :class:`InvalidArgumentError`.
    Errors: :class:`jtree.Error` subclasses naming the file and the key path.
    """
    # The collector paused until the job's nodes (two objects per leaf) are freed: its next
    # collection would otherwise scan them all (as load() does).
    with paused_gc():
        job = _SaveJob(tree, path, partial_write=partial_write, snapshot=False,
                       overwrite=overwrite, overwrite_foreign=overwrite_foreign,
                       allow_pickle=allow_pickle, compression=compression, level=level,
                       chunk_bytes=chunk_bytes, inline_threshold=inline_threshold,
                       threads=threads, sync=sync, metadata=metadata, coordinator=coordinator,
                       progress=progress, shard_layout=shard_layout, remote=remote)
        stats = _in_order(job.path, job.write, background=False).result()
        del job
    return stats


def nonblocking_save(tree: Any, path: PathLike, **options: Any) -> Future:
    """Starts :func:`save` in the background and returns a :class:`Future` at once.

    Before returning it walks the tree and takes a snapshot of every mutable array (NumPy
    arrays and torch tensors are copied; JAX arrays are immutable and only referenced), so the
    caller may change its arrays right away. The write then runs in a background thread with
    its memory bounded by the writer's bytes in flight. Saves to the same path run in the order
    they were started. ``future.pytree`` is the saved structure; ``future.result()`` the
    :class:`WriteStats`. Options are those of :func:`save`.
    """
    job = _SaveJob(tree, path, snapshot=True, **_save_defaults(options))
    # The structure first: once the write has started, its thread competes for the GIL.
    structure = save_spec_tree(job.root) if job.root is not None else None
    # A multi-process save runs its barriers here, in the caller's thread, in the same order in
    # every process; the future is then already done.
    fut = _in_order(job.path, job.write, background=not job.collective)
    return Future(fut, structure)


def _save_defaults(options: Dict[str, Any]) -> Dict[str, Any]:
    defaults = dict(partial_write=False, overwrite=True, overwrite_foreign=False,
                    allow_pickle=False, compression="zstd", level=None, chunk_bytes=None,
                    inline_threshold=None, threads=0, sync=True, metadata=None,
                    coordinator=None, progress=False, shard_layout=None, remote=None)
    unknown = set(options) - set(defaults)
    if unknown:
        raise TypeError(f"nonblocking_save() got unexpected options {sorted(unknown)}")
    defaults.update(options)
    return defaults


# ---- load --------------------------------------------------------------------------------------

# (Every load call's options become one LoadOptions in jtree._load_call, shared with File.load,
# Node.load and LazyArray.read.)


def _open(path: Union[PathLike, File], settings: Dict[str, Any],
          allow_full_download: bool = False, remote: Optional[RemoteOptions] = None) -> File:
    """An open File for a path, with the file ``settings`` given (LoadOptions.file_settings),
    or the File given."""
    if isinstance(path, (File, Node, LazyArray)):
        f = path if isinstance(path, File) else path._f
        if remote is not None:
            raise error(InvalidArgumentError, f.name, None,
                        "remote= applies when a path is opened, and this file is open already "
                        "(give remote= to jtree.open)")
        return f
    kw = dict(settings)
    if allow_full_download:
        kw["allow_full_download"] = True
    if remote is not None:
        kw["remote"] = remote
    return File(path, **kw)


def load(path: Union[PathLike, File], pytree: Any = None, *, keys: Any = None,
         framework: str = "numpy", cast: Any = None, pad_truncate: bool = False,
         out: Any = None, allow_pickle: Optional[bool] = None, strict: Optional[bool] = None,
         verify: Optional[bool] = None, threads: Optional[int] = None,
         device: Any = None, map_location: Any = None,
         shardings: Any = None, mmap: Union[bool, str, None] = None, prune: bool = False,
         progress: Any = False, allow_full_download: bool = False,
         device_options: Optional[DeviceOptions] = None, slices: Any = None,
         remote: Optional[RemoteOptions] = None) -> Any:
    """Loads a .jtree file (a path, a URL, a :class:`File` from :func:`jtree.open`, a seekable
    binary file object read with range reads, or bytes-like data: see :func:`jtree.loads`), or
    a part of an open one (``jtree.load(f["params"])``, as ``f["params"].load()``: a
    :class:`Node` or :class:`LazyArray`; key paths and ``keys=`` patterns stay the file's).

    Arrays come back as NumPy arrays (bfloat16, float8, float4 and int4 as ml_dtypes types),
    or as ``framework="torch"`` tensors or ``"jax"`` arrays; other leaves as the Python values
    saved; containers as saved (namedtuples as classes made here, never imported).

    ``pytree`` selects and shapes what is loaded: a tree matching the file's structure (or a
    part of it: a dict may name only some keys) whose ``None`` or ``...`` leaves are skipped
    (never read; returned as given), whose ``False`` leaves are skipped too (returned as None:
    a boolean mask such as ``jax.tree.map(lambda s: s.is_array, spec)`` works), and whose other
    leaves (``True``, a :class:`LeafSpec`, an array...) are loaded. An array-like leaf
    (NumPy array, torch tensor, jax.Array, jax.ShapeDtypeStruct, :class:`LeafSpec`) also gives
    the dtype to cast to, the shape (different shapes need ``pad_truncate=True``: zeros pad,
    extra elements are dropped), the framework, and for JAX the sharding.
    ``keys`` selects leaves by key-path patterns such as ``"params/*/kernel"`` or
    ``["step", "**/bias"]`` (each component matched as ``fnmatch.fnmatchcase`` matches: ``*``,
    ``?``, ``[seq]``, ``[!seq]``; ``**`` any number of components; a pattern naming a
    container selects everything below it); the others come back as None and are never read.
    A pattern that matches nothing is a :class:`NotFoundError` naming it and the nearest key
    paths.
    ``prune=True`` returns only what is loaded: dicts drop the entries not selected (by
    ``keys`` or ``pytree``) and the containers left with nothing, so a state_dict subset
    comes back that ``load_state_dict(strict=False)`` takes (lists, tuples and other
    containers keep their positions, None where nothing is loaded).
    ``progress`` is True (a bar on stderr when it is a terminal), a function
    ``(done_bytes, total_bytes)`` called as the data is read (raising in it aborts the load
    with that exception), or False.

    ``cast`` converts arrays on load: a dtype (every floating-point array), a mapping
    ``{stored: wanted}``, or a function ``(key_path, stored_dtype_name) -> dtype or None``.
    ``out`` is a tree of preallocated arrays (NumPy or torch) to fill in place (instead of
    ``pytree``); the result holds those arrays. ``shardings`` (JAX) is a Sharding for every
    array, or a function ``(key_path, LeafSpec) -> Sharding or None``: each device's slice is
    read on its own. It implies ``framework="jax"`` (with ``"torch"`` it is an error, as is a
    value that is no Sharding). ``strict=False`` loads custom nodes and leaves this process has not registered as
    plain dicts/lists and bytes; pickled leaves need ``allow_pickle=True``. ``verify=False``
    skips checksum verification; ``threads`` bounds the decoding threads (0: all cores; their
    buffers are reused, and at most 64 MiB of them kept once the load returns).

    ``mmap``: arrays the file stores uncompressed (a save with ``compression=None``) come back,
    from a local file, as views of a private copy-on-write memory map of the file, as
    safetensors does: no copy, and a page costs nothing until it is touched. They are
    writable, and writes change this process's copy only, never the file; they stay valid
    after the file is closed, replaced by a new save (a save writes a new file and renames it)
    or appended to. Checksums are still verified (on all cores, which also reads the pages in)
    unless ``verify=False``. ``mmap="r"`` gives read-only NumPy arrays instead; ``mmap=False``
    copies every array into fresh memory. Compressed leaves, remote files, and torch/JAX
    targets that need a cast are read into new memory whatever the setting. As with every
    memory map, another program truncating the file while its arrays live makes touching
    them fail with SIGBUS (jtree itself never truncates a file it replaces).

    ``device`` (or its alias ``map_location``, as in ``torch.load``; not both) places torch
    tensors: a ``torch.device`` or a string such as ``"cpu"`` or ``"cuda:0"``. It implies
    ``framework="torch"`` (with JAX use ``shardings``). To a CUDA device (``device=``, or
    ``out=`` / ``pytree`` tensors on one) arrays are read straight into device memory, all
    in one native load through pinned staging buffers, when this jtree is built with CUDA
    and sees the device (``jtree._device``); otherwise they are read into host memory and
    moved there with ``Tensor.to``. ``"cuda"`` raises :class:`NotSupportedError` when
    ``torch.cuda`` is not available. Torch targets (``pytree``) on a device keep theirs; targets on the meta
    device give only shape and dtype: their data is created on ``device`` (default the
    CPU), never returned as meta, also as ``out`` (the result then holds new tensors).

    ``slices`` reads a part of array leaves instead of the whole (a tensor-parallel rank's
    shard): a :class:`jtree.TensorParallel` (``TensorParallel(rank, world)``: column-parallel
    weights by rows, row-parallel ones by columns, embeddings by vocabulary rows, the rest
    whole, by the weights' names), a dict ``{key-path pattern: index}`` (patterns as
    ``keys=``; the first that matches a leaf gives its index: ints, slices of step >= 1,
    ``...``, as ``LazyArray`` takes; a pattern that matches no array leaf is a
    :class:`NotFoundError`) or a function ``(key_path, LeafSpec) -> index | None`` (None: the
    whole leaf). Every part of every leaf is read in the load's one native pass (only the
    chunks the parts overlap; to a CUDA ``device=`` straight into device memory), and comes
    back in the tree in place of the leaf, in the load's framework, ``cast=`` applied; leaves
    another rank holds (``TensorParallel(expert_parallel=True)``) come back as None, or are
    dropped with ``prune=True``. With ``out=`` the out arrays are of the parts' shapes. Not
    with ``shardings=`` (JAX places whole arrays); ``pytree=`` targets may be masks or the
    file's own LeafSpecs (whose dtype is then the cast).

    ``device_options``: a :class:`jtree.DeviceOptions` (pinned staging memory and buffers,
    O_DIRECT reads) for the arrays read straight into device memory (torch on a CUDA device,
    JAX shardings over GPUs); its ``last_stats`` then says what the load did. Given to a load
    whose arrays all go to host memory it is an :class:`InvalidArgumentError`; to a load bound
    for a device that cannot take the direct path, a warning (with ``direct_io="on"`` a
    :class:`NotSupportedError`): see :class:`jtree.DeviceOptions`.

    These five default to the :class:`File`'s settings (from :func:`jtree.open`), else to
    allow_pickle=False, strict=True, verify=True, threads=0, mmap=True.

    ``allow_full_download``: an ``http(s)://`` server that ignores Range requests (it answers
    with the whole file) makes the load fail with :class:`NotSupportedError` by default, having
    received none of the body; with True the file is downloaded once, whole, into a temporary
    file (``$TMPDIR``, at most 16 GiB) and read from there (see :func:`jtree.open`).

    ``remote``: a :class:`RemoteOptions` for an ``http(s)://`` or ``s3://`` file (endpoint,
    credentials, concurrency, retries, timeouts...; None: the environment's settings). For a
    local path, or a file already open (a :class:`File`), it is an
    :class:`InvalidArgumentError`.
    """
    target, o = call_options(pytree, out, dict(
        keys=keys, framework=framework, cast=cast, pad_truncate=pad_truncate,
        allow_pickle=allow_pickle, strict=strict, verify=verify, threads=threads,
        device=device, map_location=map_location, shardings=shardings, mmap=mmap, prune=prune,
        progress=progress, device_options=device_options, slices=slices))
    with paused_gc():
        return _open_and_load(path, target, o, allow_full_download, remote)


def _open_and_load(path: Union[PathLike, File], target: Any, o: LoadOptions,
                   allow_full_download: bool = False,
                   remote: Optional[RemoteOptions] = None) -> Any:
    # Called with the collector paused: the file's tree and the load's plan (several objects
    # per leaf) are freed here, before it runs again. Otherwise its next collection scans
    # them all, only to find them freed (60-100 ms for 100,000 leaves).
    return _load_opened(_open(path, o.file_settings(), allow_full_download, remote), path,
                        target, o)


def _load_opened(f: File, path: Any, target: Any, o: LoadOptions) -> Any:
    """The load of ``path`` (the file, or a Node or LazyArray of it) from its open File."""
    node, at = _subtree(f, path)
    return run(f, node, at, target, o)


def _load_in_background(f: File, path: Any, target: Any, o: LoadOptions) -> Any:
    """nonblocking_load's work: _load_opened with the collector paused (see
    _open_and_load)."""
    with paused_gc():
        return _load_opened(f, path, target, o)


def _subtree(f: File, path: Any) -> Any:
    """(the node, its key path) that a load of ``path`` starts at: a Node or LazyArray of an
    open file (``f["params"]``) is that subtree; anything else the file's root."""
    if isinstance(path, (Node, LazyArray)):
        return path._node, path._path
    return f._root, ()


def load_pytreedef(path: Union[PathLike, File], *, strict: bool = True,
                   allow_full_download: bool = False,
                   remote: Optional[RemoteOptions] = None) -> Any:
    """The structure of a .jtree file (or of a part of an open one: ``f["params"]``): its
    containers, with a :class:`LeafSpec` (kind, shape, dtype) in place of each leaf. Reads the
    header only, never array data. The result can be edited (``None`` to skip a leaf, another
    dtype to cast) and passed to :func:`load` as ``pytree``. ``allow_full_download`` as in :func:`load` (a server that ignores Range
    requests: the whole file is downloaded once); ``remote`` as in :func:`load`."""
    f = _open(path, {"strict": strict}, allow_full_download, remote)
    return _structure(f, path, strict)


def _structure(f: File, path: Any, strict: bool) -> Any:
    """load_pytreedef's tree of ``path`` in the open file ``f``: the file's, or for a part of
    it (a Node or LazyArray) that part of the file's (built in one native pass, then
    indexed by the part's keys: containers rebuilt in Python, such as custom nodes, cannot be
    indexed, and their parts are NotSupportedError)."""
    if isinstance(path, LazyArray):
        return path.spec()
    spec = spec_tree(f._root, strict=strict, file=f.name)
    if not isinstance(path, Node):
        return spec
    for i, key in enumerate(path._path):
        if isinstance(spec, dict) or (isinstance(spec, (list, tuple)) and isinstance(key, int)):
            spec = spec[key]
        elif isinstance(spec, tuple) and hasattr(spec, "_fields"):  # (a namedtuple's field)
            spec = getattr(spec, key)
        else:
            raise error(NotSupportedError, f.name, kp.join(path._path[:i]),
                        f"the structure of a part of a {type(spec).__qualname__} (a container "
                        f"rebuilt by its own code) cannot be taken: load the file's, "
                        f"jtree.load_pytreedef(f)")
    return spec


def nonblocking_load(path: Union[PathLike, File], pytree: Any = None, *,
                     allow_full_download: bool = False, remote: Optional[RemoteOptions] = None,
                     **options: Any) -> Future:
    """Starts :func:`load` in the background; returns a :class:`Future` whose ``pytree`` (the
    file's structure) is available at once (the file is opened before returning), and whose
    ``result()`` is the loaded tree. Options are those of :func:`load`, ``allow_full_download``
    and ``remote`` included (they apply to the open, made before returning)."""
    target, o = call_options(pytree, options.pop("out", None), options, "nonblocking_load")
    f = _open(path, o.file_settings(), allow_full_download, remote)
    structure = _structure(f, path, f.strict if o.strict is None else o.strict)
    return Future(_pool().submit(_load_in_background, f, path, target, o), structure)


# ---- bytes -------------------------------------------------------------------------------------

def dumps(tree: Any, *, allow_pickle: bool = False, compression: Optional[str] = "zstd",
          level: Optional[int] = None, chunk_bytes: Optional[int] = None,
          inline_threshold: Optional[int] = None, threads: int = 0,
          metadata: Optional[Dict[str, Any]] = None, progress: Any = False) -> bytes:
    """The .jtree file of ``tree`` as bytes: :func:`jtree.save` into memory, with its
    options (those about a target file aside)."""
    buf = io.BytesIO()
    save(tree, buf, allow_pickle=allow_pickle, compression=compression, level=level,
         chunk_bytes=chunk_bytes, inline_threshold=inline_threshold, threads=threads,
         metadata=metadata, progress=progress)
    return buf.getvalue()


def loads(data: Any, pytree: Any = None, **options: Any) -> Any:
    """Loads a tree from the bytes of a .jtree file (bytes, bytearray, memoryview, mmap:
    read in place, never copied whole); options as :func:`jtree.load`. Bytes from
    anywhere are safe to pass: a damaged or hostile file is a :class:`CorruptionError` (or
    another :class:`jtree.Error`), never a crash."""
    if not _fileobj.is_buffer(data):
        raise InvalidArgumentError(f"loads() takes bytes-like data, not a "
                                   f"{type(data).__name__} (for a file: jtree.load(path or "
                                   f"file object))")
    return load(data, pytree, **options)


def open(path: PathLike, *, verify: bool = True, threads: int = 0,  # noqa: A001
         allow_pickle: bool = False, strict: bool = True, use_mmap: Optional[bool] = None,
         limits: Optional[Dict[str, int]] = None, mmap: Union[bool, str] = True,
         framework: str = "numpy", device: Any = None, map_location: Any = None,
         allow_full_download: bool = False, device_options: Any = None,
         remote: Optional[RemoteOptions] = None) -> File:
    """Opens a .jtree file lazily: reads its header and index only. ``path`` is a path, a URL,
    a seekable binary file object (kept open while the File is used; read with seek +
    readinto) or bytes-like data (read in place). Index the result like the saved tree
    (``f["params"]["emb"]``); array leaves come back as :class:`LazyArray`, whose slices
    (``[1000:2000, :64]``) read only the chunks they overlap. ``limits`` lowers the
    parser limits for untrusted files (keys of jtree::Limits: max_nodes, max_depth, ...).
    The Python objects of the structure are made as it is visited: reaching one leaf of a file
    with a million costs the containers on its path, not the million. A context manager.
    ``mmap`` is the default of its loads and slices (see :func:`load`): whole arrays read from
    it (``f.load()``, ``np.asarray(f["w"])``, ``f["w"].read()``) and slices of them
    (``f["w"][10:20]``) are views of the file's memory map where the file allows it (a local
    file, leaves stored uncompressed): copy-on-write with ``True``, read-only NumPy views
    with ``"r"``; ``mmap=False`` does not map the file at all (every read is a pread into new
    memory). ``use_mmap`` is deprecated (a :class:`DeprecationWarning`): ``use_mmap=False``
    is ``mmap=False``. ``framework`` ("numpy", "torch" or "jax") is what
    slices of its arrays come back as (``f["w"][10:20]``; ``f["w"].get(index, framework=...)``
    asks for another); whole loads take theirs from :func:`load`'s ``framework``.
    ``device`` (alias ``map_location``) is where torch slices are placed (it implies
    ``framework="torch"`` for slices; see :func:`load`), and ``device_options`` (a
    :class:`DeviceOptions`; it needs ``device``) the settings of those slices' loads (as
    :meth:`LazyArray.get`'s).
    ``allow_full_download``: reads of ``http(s)://`` files are range requests; a server that
    ignores them (it answers with the whole file, as Python's ``http.server`` does) is
    refused with :class:`NotSupportedError` as soon as its answer's headers show it, without
    downloading the body. True downloads such a file once, whole, into an unlinked temporary
    file (in ``$TMPDIR``, else /tmp; at most 16 GiB) and serves every read from it.
    ``remote``: a :class:`RemoteOptions` for an ``http(s)://`` or ``s3://`` file (endpoint,
    credentials, concurrency, retries, timeouts...; None: the environment's settings); every
    read of the File uses them. For a local path, a file object or bytes it is an
    :class:`InvalidArgumentError`."""
    return File(path, verify=verify, threads=threads, allow_pickle=allow_pickle, strict=strict,
                use_mmap=use_mmap, limits=limits, mmap=mmap, framework=framework,
                device=device, map_location=map_location, device_options=device_options,
                **({"allow_full_download": True} if allow_full_download else {}),
                **({"remote": remote} if remote is not None else {}))


def compact(path: PathLike, out_path: Optional[PathLike] = None, *,
            sync: bool = True, remote: Optional[RemoteOptions] = None) -> WriteStats:
    """Rewrites a file without the bytes earlier generations left behind (after partial
    writes), in place (atomically) or into ``out_path``. ``remote``: a
    :class:`RemoteOptions` for an ``s3://`` file (as :func:`save`'s)."""
    p = os.fspath(path)
    out = os.fspath(out_path) if out_path else ""
    settings = _remote.settings(remote)
    return _in_order(p, lambda: WriteStats(**_jtree.compact(p, out, sync, remote=settings)),
                     background=False).result()


def commit_segments(path: PathLike, process_count: int, *, overwrite: bool = True,
                    overwrite_foreign: bool = False, keep_segments: bool = False,
                    verify: bool = False, sync: bool = True,
                    progress: Optional[Callable[[int, int], Any]] = None,
                    remote: Optional[RemoteOptions] = None) -> WriteStats:
    """The commit step of a multi-process save, alone: assembles ``path`` from the segments
    ``path.seg-KKKKK-of-NNNNN`` its ``process_count`` processes wrote, then removes them.
    :func:`save` does this itself; call it to finish a save whose job died after every
    segment was written, or again after a crash during a commit (the target appears only
    when complete; the segments are removed only after).

    Fails, leaving no target file, when a segment is missing (:class:`NotFoundError`),
    damaged, from another save or another tree (:class:`CorruptionError`), or when a chunk
    is in no segment or in two. ``verify=True`` also checks every chunk's checksum (reads all
    the data; the header, index and footer are always checked). ``progress(done, total)`` is
    called after each segment is copied (bytes); returning False or raising cancels.
    ``remote``: a :class:`RemoteOptions` for an ``s3://`` target (as :func:`save`'s).
    """
    p = os.fspath(path)
    settings = _remote.settings(remote)
    return _in_order(p, lambda: WriteStats(**_jtree.commit_segments(
        p, int(process_count), overwrite=overwrite, overwrite_foreign=overwrite_foreign,
        sync=sync, keep_segments=keep_segments, verify_chunks=verify, progress=progress,
        remote=settings)),
        background=False).result()


def release_scratch_memory() -> int:
    """Frees the scratch buffers jtree's read and save workers keep between calls (a chunk's
    fetched bytes, decoded planes and decoded chunk, reused so that the next call does not fault
    fresh memory in; at most 64 MiB of each kind, ``jtree::release_scratch_memory``) and returns
    how many bytes that was: 0 when none is kept. Calls running meanwhile keep theirs. A server
    that loads its model once calls it after the load (and ``release_pinned_memory`` after a
    load to a GPU); the next load allocates its buffers again."""
    return int(_jtree.release_scratch_memory())
