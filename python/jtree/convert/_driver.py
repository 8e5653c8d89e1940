"""jtree.convert(): picks the reader and writer, streams the tree, verifies on request.

foreign -> .jtree: the reader's Source tree (memory maps / Deferred leaves) is saved with one
``jtree.save``. .jtree -> foreign: the writer module reads the file leaf by leaf. foreign ->
foreign: through a temporary uncompressed .jtree file beside the destination.
Nothing partial is left on failure: jtree.save and the writers replace the destination
atomically, and an existing destination survives a failed conversion.
"""
from __future__ import annotations

import dataclasses
import os
import pickle
import tempfile
import time
from typing import Any, Callable, Iterator, List, Optional, Tuple, Union

import numpy as np

from .. import _dtypes
from .. import _keypath as kp
from .._errors import (AlreadyExistsError, CorruptionError, InvalidArgumentError, NotFoundError,
                       NotSupportedError, error)
from . import _progress, _registry
from ._common import deferred_class
from ._source import Source

JTREE_MAGIC = b"\x89JTREE\r\n"
PathLike = Union[str, "os.PathLike[str]"]


@dataclasses.dataclass
class ConvertStats:
    """What :func:`convert` did: the formats, how many leaves and array bytes it wrote, the
    time it took, whether the result was verified, the reader's one-line description of
    the source (``"safetensors (sharded): 291 tensors in 4 shards"``), and ``output``, the
    file written (for sharded safetensors, its ``.safetensors.index.json``)."""

    src_format: str
    dst_format: str
    leaves: int
    array_bytes: int
    seconds: float
    verified: bool
    description: str = ""
    output: str = ""  # the file a reader opens: the destination, or a sharded one's index


def is_jtree(path: str) -> bool:
    """True when ``path`` is a file that starts with the .jtree magic."""
    try:
        with open(path, "rb") as f:
            return f.read(8) == JTREE_MAGIC
    except OSError:
        return False


def detect_source(path: str) -> str:
    """The source format: 'jtree' or the first reader whose sniff() says yes."""
    if os.path.isfile(path) and is_jtree(path):
        return "jtree"
    for name, module in _registry.available_readers():
        if module.sniff(path):
            return name
    found = {n for n, _ in _registry.available_readers()}
    missing = [m for n, m in _registry.READERS if n not in found]
    hint = (f" (readers not available in this installation: {', '.join(missing)})"
            if missing else "")
    raise error(NotSupportedError, path, None,
                f"cannot tell its format; pass from_format= (--from){hint}")


def detect_destination(path: str) -> str:
    """The destination format from the extension; anything else is a .jtree file."""
    for ext, fmt in _registry.DST_EXTENSIONS.items():
        if path.endswith(ext):
            return fmt
    return "jtree"


# ---- walking trees ------------------------------------------------------------------------------

def leaves(tree: Any, path: Tuple[Any, ...] = ()) -> Iterator[Tuple[Tuple[Any, ...], Any]]:
    """(path, leaf) of every leaf of a Source tree, in order (dicts, lists and tuples)."""
    stack: List[Tuple[Tuple[Any, ...], Any]] = [(path, tree)]
    while stack:
        p, x = stack.pop()
        if type(x) is dict:
            stack.extend(reversed([(p + (k,), v) for k, v in x.items()]))
        elif type(x) in (list, tuple):
            stack.extend(reversed([(p + (i,), v) for i, v in enumerate(x)]))
        else:
            yield p, x


def _map_leaves(tree: Any, fn: Callable[[Tuple[Any, ...], Any], Any],
                path: Tuple[Any, ...] = ()) -> Any:
    if type(tree) is dict:
        return {k: _map_leaves(v, fn, path + (k,)) for k, v in tree.items()}
    if type(tree) in (list, tuple):
        return type(tree)(_map_leaves(v, fn, path + (i,)) for i, v in enumerate(tree))
    return fn(path, tree)


def _is_array(x: Any) -> bool:
    return isinstance(x, np.ndarray) or _is_deferred(x)


def _is_deferred(x: Any) -> bool:
    d = deferred_class()
    return d is not None and isinstance(x, d)


def _nbytes(x: Any) -> int:
    if isinstance(x, np.ndarray):
        return int(x.nbytes)
    if _is_deferred(x):
        n = 1
        for s in x.shape:
            n *= int(s)
        return n * np.dtype(x.dtype).itemsize
    return 0


def _materialize(x: Any) -> Any:
    if _is_deferred(x):
        return x.fetch()
    return x


# ---- convert ------------------------------------------------------------------------------------

def convert(src: PathLike, dst: PathLike, *, from_format: Optional[str] = None,
            to_format: Optional[str] = None, compression: Optional[str] = "zstd",
            level: Optional[int] = None, chunk_bytes: Optional[int] = None,
            max_shard_size: Optional[Union[int, str]] = None,
            verify: bool = False, progress: Any = False, allow_pickle: bool = False,
            overwrite: bool = True, shard_layout: Any = None,
            remote: Any = None) -> ConvertStats:
    """Converts a checkpoint between formats; one of them is usually .jtree.

    Sources: safetensors (a file, or a Hugging Face sharded checkpoint: its
    ``*.safetensors.index.json`` or its directory), PyTorch ``.pt``/``.bin``, NumPy
    ``.npy``/``.npz``, GGUF (a split model's set from any of its shards), orbax / JAX
    pytree_serialization directories, flax msgpack, and .jtree files. Destinations: .jtree
    (default), ``.safetensors`` and ``.gguf`` (by extension, or ``to_format=``).
    ``from_format`` names the source's format when detection would not ("safetensors",
    "torch", "numpy", "gguf", "orbax", "flax").

    safetensors output can be sharded as transformers' ``save_pretrained`` shards it:
    ``max_shard_size`` (bytes, or a size such as ``"5GB"`` -- 10**9 bytes, as transformers
    reads it -- or ``"512MiB"``) cuts the tensors into ``NAME-0000i-of-0000n.safetensors``
    with ``NAME.safetensors.index.json`` (``metadata.total_size`` and ``weight_map``) beside
    ``dst = DIR/NAME.safetensors``; what fits in one shard is the one file. ``dst`` may be a
    directory (an existing one, or a path ending with "/"): safetensors output (implied by
    ``max_shard_size``, else ``to_format="safetensors"``) is then written into it as
    ``model.safetensors`` or ``model-0000i-of-0000n.safetensors`` + index; other formats
    need a file name. An overwrite removes what a previous conversion left under the same
    NAME (the other layout, shards of another count).

    The data streams: arrays are memory maps of the input, written one after the other, so
    memory stays about one tensor whatever the model size. ``compression`` ("zstd" or None) and
    ``level``, ``chunk_bytes`` and ``shard_layout`` (a .jtree file laid out for
    tensor-parallel serving on that many ranks) are those of :func:`jtree.save`; a
    ``shard_layout`` for another destination is refused. ``verify=True`` re-reads
    the destination and compares every leaf bit for bit with the source. ``progress`` is True
    (a bar on stderr when it is a terminal) or a callable ``(done_bytes, total_bytes)``.
    ``allow_pickle`` lets a PyTorch file that needs full unpickling load (only for files you
    trust: unpickling runs code). ``overwrite=False`` refuses an existing destination.
    A .jtree destination may be an ``s3://`` URL, written as :func:`jtree.save` writes one;
    ``remote`` (a :class:`jtree.RemoteOptions`: endpoint, credentials, part size...) applies to
    it, and to its ``verify`` read; for a local destination or another format it is an
    :class:`InvalidArgumentError` (it would go unused).

    Inputs are checked as they are parsed: a malformed or hostile file raises
    :class:`jtree.CorruptionError` naming it, and nothing is written (an existing destination
    is kept). Returns a :class:`ConvertStats`.
    """
    t0 = time.monotonic()
    src, dst = os.fspath(src), os.fspath(dst)
    if not os.path.exists(src):
        raise error(NotFoundError, src, None, "no such file or directory")
    into_dir = os.path.isdir(dst) or dst.endswith(("/", os.sep))
    if to_format:
        dst_fmt = _registry.normalize(to_format)
    else:  # a directory takes a sharded checkpoint; a file says its format by its extension
        dst_fmt = "safetensors" if into_dir and max_shard_size is not None \
            else detect_destination(dst)
    if into_dir and dst_fmt != "safetensors":
        raise error(InvalidArgumentError, dst, None,
                    f"is a directory: name the {dst_fmt} file to write in it (e.g. "
                    f"{os.path.join(dst, 'model.' + dst_fmt)}), or write a Hugging Face "
                    f"safetensors checkpoint into it with to_format='safetensors' (--to "
                    f"safetensors) or max_shard_size= (--max-shard-size)")
    if remote is not None and dst_fmt != "jtree":
        raise error(InvalidArgumentError, dst, None,
                    f"remote= applies to a .jtree destination on object storage; this "
                    f"destination is {dst_fmt}, written as a local file")
    if shard_layout is not None and dst_fmt != "jtree":
        raise error(InvalidArgumentError, dst, None,
                    f"shard_layout lays out a .jtree file; this destination is {dst_fmt}")
    if max_shard_size is not None and dst_fmt != "safetensors":
        raise error(InvalidArgumentError, dst, None,
                    f"max_shard_size shards safetensors output; this destination is {dst_fmt}")
    if dst_fmt == "safetensors":  # its files: the one file, or an index and shards
        st_writer = _registry.writer(dst_fmt)
        if max_shard_size is not None:
            st_writer.parse_size(max_shard_size)  # a bad size refused before any work
        present = st_writer.existing(dst)
    else:
        present = [dst] if os.path.exists(dst) else []
    if present and not overwrite:
        raise error(AlreadyExistsError, present[0], None,
                    "exists (overwrite=True / drop --no-overwrite to replace it)")
    if os.path.exists(dst) and os.path.samefile(src, dst):
        raise error(InvalidArgumentError, dst, None, "the source and the destination are "
                                                     "the same file")
    src_fmt = _registry.normalize(from_format) if from_format else detect_source(src)
    if compression not in ("zstd", None, "none"):
        raise error(InvalidArgumentError, None, None,
                    f"compression must be 'zstd' or None, not {compression!r}")
    if compression == "none":
        compression = None

    if dst_fmt == "jtree":
        if src_fmt == "jtree":
            raise error(InvalidArgumentError, src, None, "is already a .jtree file (jtree "
                        "compact rewrites one; jtree.load + jtree.save recompress it)")
        n, size, verified, desc = _to_jtree(src, dst, src_fmt, compression, level,
                                            chunk_bytes, verify, progress, allow_pickle,
                                            overwrite, shard_layout, remote)
        output = dst
    elif src_fmt == "jtree":
        n, size, verified, output = _from_jtree(src, dst, dst_fmt, verify, progress,
                                                max_shard_size)
        desc = f"jtree: {n} leaves"
    else:
        # foreign -> foreign: through a .jtree file beside dst (same file system), removed after.
        writer = _registry.writer(dst_fmt)  # fail before any work when it is missing
        del writer
        fd, tmp = tempfile.mkstemp(prefix=os.path.basename(dst) + ".", suffix=".convert.jtree",
                                   dir=os.path.dirname(os.path.abspath(dst)))
        os.close(fd)
        os.unlink(tmp)
        try:
            desc = _to_jtree(src, tmp, src_fmt, None, None, chunk_bytes, False, False,
                             allow_pickle, True)[3]
            n, size, verified, output = _from_jtree(tmp, dst, dst_fmt, verify, progress,
                                                    max_shard_size)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return ConvertStats(src_fmt, dst_fmt, n, size, time.monotonic() - t0, verified, desc,
                        output)


def _to_jtree(src: str, dst: str, src_fmt: str, compression: Optional[str],
              level: Optional[int], chunk_bytes: Optional[int], verify: bool, progress: Any,
              allow_pickle: bool, overwrite: bool, shard_layout: Any = None,
              remote: Any = None) -> Tuple[int, int, bool, str]:
    from .._api import save  # noqa: PLC0415

    reader = _registry.reader(src_fmt)
    source: Source = reader.open_source(src, allow_pickle=allow_pickle)
    try:
        report = _progress.make(progress, f"{os.path.basename(src)} -> {os.path.basename(dst)}")
        all_leaves = list(leaves(source.tree))
        report.total = sum(_nbytes(x) for _, x in all_leaves)
        tree = _with_progress(source.tree, report)
        report.report(0)
        save(tree, dst, compression=compression, level=level, chunk_bytes=chunk_bytes,
             metadata=source.metadata or None, allow_pickle=allow_pickle, overwrite=overwrite,
             shard_layout=shard_layout, remote=remote)
        report.report(report.total)
        report.finish()
        verified = False
        if verify:
            verify_jtree(source, dst, allow_pickle=allow_pickle, remote=remote)
            verified = True
        return len(all_leaves), report.total, verified, source.description or src_fmt
    finally:
        source.close()


def _with_progress(tree: Any, report: "_progress.Reporter") -> Any:
    """The tree with each Deferred leaf reporting its bytes when the writer fetches it (the
    writer fetches a leaf, writes it, drops it). Other leaves are left alone: wrapping an
    array would lose jtree.save's tying of arrays that share memory."""
    deferred = deferred_class()
    if deferred is None or report.fn is None:
        return tree

    def wrap(_path: Tuple[Any, ...], x: Any) -> Any:
        if not isinstance(x, deferred):
            return x
        n = _nbytes(x)

        def fetch() -> Any:
            a = x.fetch()
            report.add(n)
            return a

        return deferred(x.shape, x.dtype, fetch)

    return _map_leaves(tree, wrap)


def _from_jtree(src: str, dst: str, dst_fmt: str, verify: bool, progress: Any,
                max_shard_size: Optional[Union[int, str]] = None) -> Tuple[int, int, bool, str]:
    from .._api import open as jopen  # noqa: PLC0415

    writer = _registry.writer(dst_fmt)
    # mmap=False: each leaf is read into memory of its own and freed after it is written
    # (pages of a map would stay resident until the file is closed).
    with jopen(src, mmap=False) as f:
        report = _progress.make(progress, f"{os.path.basename(src)} -> {os.path.basename(dst)}")
        specs = list(leaves(f.structure()))
        report.total = sum(getattr(s, "nbytes", 0) for _, s in specs
                           if getattr(s, "is_array", False))
        report.report(0)
        # (max_shard_size passed only when set: only the safetensors writer takes it)
        sharding = {} if max_shard_size is None else {"max_shard_size": max_shard_size}
        output = writer.write(f, dst, progress=report.add if report.fn is not None else None,
                              **sharding) or dst
        report.report(report.total)
        report.finish()
        verified = False
        if verify:
            if hasattr(writer, "verify"):
                writer.verify(f, output)
            else:
                _verify_generic(f, output, dst_fmt)
            verified = True
    return len(specs), report.total, verified, output


# ---- verify -------------------------------------------------------------------------------------

def same_leaf(a: Any, b: Any) -> bool:
    """True when two leaves are equal bit for bit (arrays: dtype, shape and bytes); other
    values are compared as jtree stores them (torch.Size as a tuple, torch.dtype by name)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            return False
        if _dtypes.name_of_numpy(a.dtype) != _dtypes.name_of_numpy(b.dtype):
            return False
        if a.shape != b.shape:
            return False
        return bool(np.array_equal(_raw_bytes(a), _raw_bytes(b)))
    a, b = _plain(a), _plain(b)
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True  # NaN
    try:
        if type(a) is type(b) and a == b:
            return True
    except Exception:  # noqa: BLE001  (an __eq__ that raises)
        pass
    # Objects without a value equality (pickled with allow_pickle): by their pickles.
    try:
        return type(a) is type(b) and pickle.dumps(a) == pickle.dumps(b)
    except Exception:  # noqa: BLE001
        return False


def _plain(x: Any) -> Any:
    """torch.Size and torch.dtype as jtree gives them back without torch: a tuple, a name."""
    t = type(x)
    if t.__module__ == "torch":
        if t.__name__ == "Size":
            return tuple(int(d) for d in x)
        if t.__name__ == "dtype":
            return str(x).rsplit(".", 1)[-1]
    return x


def _raw_bytes(a: np.ndarray) -> np.ndarray:
    if a.dtype.byteorder == ">" or (a.dtype.byteorder == "=" and np.little_endian is False):
        a = a.astype(a.dtype.newbyteorder("<"))  # jtree stores little-endian values
    a = np.ascontiguousarray(a)
    return _dtypes.numpy_bytes(a)


def verify_jtree(source: Source, dst: str, *, allow_pickle: bool = False,
                 remote: Any = None) -> None:
    """Re-reads ``dst`` leaf by leaf and compares each with the source; CorruptionError naming
    the first leaf that differs."""
    from .._api import open as jopen  # noqa: PLC0415
    from .._file import Node  # noqa: PLC0415

    with jopen(dst, mmap=False, allow_pickle=allow_pickle, remote=remote) as f:
        want_meta = {k: (v if isinstance(v, str) else bytes(v))
                     for k, v in source.metadata.items()}
        if want_meta and dict(f.metadata) != want_meta:
            raise error(CorruptionError, dst, None, "verify: the user metadata differs from "
                                                    "the source's")
        for path, x in leaves(source.tree):
            got = _at(f, path)
            if _is_array(x):
                got = got.read(mmap=False) if hasattr(got, "read") else got
            elif isinstance(got, Node):  # a value jtree stores as a node (torch.Size)
                got = got.load(allow_pickle=allow_pickle)
            want = _materialize(x)
            if not same_leaf(np.asarray(want) if _is_array(x) else want, got):
                raise error(CorruptionError, dst, kp.join(path),
                            "verify: differs from the source")


def _at(f: Any, path: Tuple[Any, ...]) -> Any:
    node = f.root
    for k in path:
        node = node[k]
    return node


def _verify_generic(f: Any, dst: str, dst_fmt: str) -> None:
    """Reads ``dst`` back with the reader of its format and compares every array leaf with the
    .jtree file's, by their names joined with '.' (the flat names of safetensors)."""
    source = _registry.reader(dst_fmt).open_source(dst)
    try:
        got = {kp_name: x for kp_name, x in
               ((".".join(str(k) for k in p), x) for p, x in leaves(source.tree))}
        n = 0
        for path, spec in leaves(f.structure()):
            if not getattr(spec, "is_array", False):
                continue
            name = ".".join(str(k) for k in path)
            if name not in got:
                raise error(CorruptionError, dst, name, "verify: missing from the output")
            want = _at(f, path).read(mmap=False)
            if not same_leaf(np.asarray(want), np.asarray(_materialize(got[name]))):
                raise error(CorruptionError, dst, name, "verify: differs from the source")
            n += 1
        if n != len(got):
            raise error(CorruptionError, dst, None,
                        f"verify: {len(got)} tensors in the output, {n} in the source")
    finally:
        source.close()


__all__ = ["convert", "ConvertStats", "leaves", "same_leaf", "detect_source",
           "detect_destination"]
