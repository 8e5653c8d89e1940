"""Split GGUF sets (llama.cpp's ``gguf-split``, gguf-py's ``GGUFWriter(split_max_tensors=...)``):
finding the shards of a set and checking that they form one, for _from_gguf.

A model split in n shards is n files named ``<prefix>-00001-of-0000n.gguf`` ...
``<prefix>-0000n-of-0000n.gguf`` (gguf-py's ``SHARD_NAME_FORMAT``, llama.cpp's
``llama_split_path``: 1-based in the name). Every shard is a complete GGUF file whose key-values
hold ``split.no`` (0-based: the first file has 0), ``split.count`` (n) and
``split.tensors.count`` (the tensors of the whole set); the first shard also holds the model's
key-values, the others usually nothing else. Each shard's tensors follow on from the previous
shard's. The checks here refuse anything that is not exactly such a set, naming the file, so
that a set converts to one model or not at all.
"""
from __future__ import annotations

import dataclasses
import os
import re
from typing import Callable, Dict, List, Optional, Tuple

from .._errors import CorruptionError
from . import _gguf_parse
from ._common import corrupt

# gguf.Keys.Split (LLM_KV_SPLIT_NO, LLM_KV_SPLIT_COUNT, LLM_KV_SPLIT_TENSORS_COUNT).
NO = "split.no"
COUNT = "split.count"
TENSORS = "split.tensors.count"
KEYS = (NO, COUNT, TENSORS)
# Both writers store split.count as a UINT16; a larger count is refused before any shard is
# opened (each shard holds an open file while the set converts).
MAX_SHARDS = 65535
# gguf.constants.SHARD_NAME_FORMAT.
NAME_FORMAT = "{}-{:05d}-of-{:05d}.gguf"
_NAME = re.compile(r"^(?P<prefix>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")
_INTEGER_TYPES = ("UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "UINT64", "INT64")


@dataclasses.dataclass
class Split:
    """One shard's split key-values: ``no`` (0-based), ``count`` and ``tensors`` (the set's)."""

    no: int
    count: int
    tensors: int


def split_of(header: _gguf_parse.Header, path: str) -> Optional[Split]:
    """The split key-values of a parsed shard of a set, or None when the file is one whole
    model: no split.count, or one of 0 or 1, as llama.cpp's loader decides (``gguf-split
    --merge`` leaves split.count 0 in the merged file, a split into one file has 1). Such a
    file converts as it is, its split.* key-values kept. CorruptionError naming ``path`` when
    a set's shard lacks split.no or split.tensors.count, or one is not a fitting integer."""
    kvs = {kv.key: kv for kv in header.kvs if kv.key in KEYS}
    values = []
    for key in (COUNT, NO, TENSORS):
        kv = kvs.get(key)
        if kv is None:
            if key == COUNT:
                return None
            raise corrupt(path, f"split GGUF: split.count is {values[0]} but there is no "
                                f"{key!r} key-value")
        if kv.type_name not in _INTEGER_TYPES:
            raise corrupt(path, f"split GGUF: {key!r} has type {kv.type_name}, not an integer",
                          f"metadata/{key}")
        values.append(int(kv.value))
        if key == COUNT and values[0] in (0, 1):
            return None
    s = Split(no=values[1], count=values[0], tensors=values[2])
    if not 2 <= s.count <= MAX_SHARDS:
        raise corrupt(path, f"split GGUF: split.count is {s.count}; a set has 2 to "
                            f"{MAX_SHARDS} shards (0 and 1 mean one whole file)")
    if not 0 <= s.no < s.count:
        raise corrupt(path, f"split GGUF: split.no is {s.no}, not in [0, {s.count})")
    if s.tensors < 0:
        raise corrupt(path, f"split GGUF: split.tensors.count is {s.tensors}")
    return s


def shard_paths(path: str, split: Split) -> List[str]:
    """The paths of every shard of the set ``path`` belongs to, in order (``path`` itself at
    index ``split.no``). Its name must be llama.cpp's, agreeing with the split key-values, or
    the others cannot be found."""
    d, base = os.path.split(path)
    m = _NAME.match(base)
    if m is None:
        raise corrupt(path, f"split GGUF: this is shard {split.no + 1} of {split.count} "
                            f"(its split.no is {split.no}), but its name does not end in "
                            f"-NNNNN-of-NNNNN.gguf as llama.cpp names shards, so the other "
                            f"shards cannot be found (rename them "
                            f"{NAME_FORMAT.format('<prefix>', 1, split.count)}, ...)")
    no, count = int(m.group("no")), int(m.group("count"))
    if (no, count) != (split.no + 1, split.count):
        raise corrupt(path, f"split GGUF: the name says shard {no} of {count}, the key-values "
                            f"shard {split.no + 1} of {split.count} (split.no {split.no}, "
                            f"split.count {split.count})")
    return [os.path.join(d, NAME_FORMAT.format(m.group("prefix"), i + 1, split.count))
            for i in range(split.count)]


def set_name(paths: List[str]) -> str:
    """How errors name the set: its shards' pattern, e.g. ``dir/model-*-of-00003.gguf``."""
    d, base = os.path.split(paths[0])
    m = _NAME.match(base)
    if m is None:
        return paths[0]
    return os.path.join(d, f"{m.group('prefix')}-*-of-{m.group('count')}.gguf")


def check_present(paths: List[str]) -> None:
    """CorruptionError naming the first missing shard and the set, before any is opened."""
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        i = paths.index(missing[0])
        more = f" ({len(missing)} of {len(paths)} shards are missing)" if len(missing) > 1 else ""
        raise corrupt(missing[0], f"split GGUF: shard {i + 1} of {len(paths)} of the set "
                                  f"{set_name(paths)} is missing{more}")


def check_shard(index: int, path: str, split: Optional[Split], first: Split,
                first_path: str) -> None:
    """Checks that the shard at ``index`` of the set (0-based) says so: split keys present,
    split.no equal to ``index``, split.count and split.tensors.count those of the shard the
    set was found from (``first``)."""
    if split is None:
        raise corrupt(path, f"split GGUF: shard {index + 1} of {first.count} by its name, but "
                            f"not a shard of a set: no split.count above 1 (is it from another "
                            f"model?)")
    if split.count != first.count:
        raise corrupt(path, f"split GGUF: split.count is {split.count}, but {first_path} "
                            f"says {first.count}", f"metadata/{COUNT}")
    if split.no != index:
        raise corrupt(path, f"split GGUF: split.no is {split.no}, but this is shard "
                            f"{index + 1} of {first.count} by its name (split.no {index}): "
                            f"shards out of order or from another set", f"metadata/{NO}")
    if split.tensors != first.tensors:
        raise corrupt(path, f"split GGUF: split.tensors.count is {split.tensors}, but "
                            f"{first_path} says {first.tensors}", f"metadata/{TENSORS}")


def check_tensor_names(owner: Dict[str, str], header: _gguf_parse.Header, path: str) -> None:
    """Adds ``header``'s tensors to ``owner`` (name -> shard path); CorruptionError when a name
    is already in an earlier shard (merged, one would hide the other)."""
    for t in header.tensors:
        if t.name in owner:
            raise corrupt(path, f"split GGUF: tensor {t.name!r} is also in {owner[t.name]}",
                          f"tensors/{t.name}")
        owner[t.name] = path


def check_total(n_tensors: int, first: Split, paths: List[str]) -> None:
    """CorruptionError when the set's tensors are not the split.tensors.count it declares."""
    if n_tensors != first.tensors:
        raise corrupt(paths[0], f"split GGUF: split.tensors.count is {first.tensors}, but the "
                                f"{len(paths)} shards of {set_name(paths)} hold {n_tensors} "
                                f"tensors", f"metadata/{TENSORS}")


def layout_end(header: _gguf_parse.Header) -> int:
    """Where a GGUF writer ends this file: after its last tensor, padded to the alignment (both
    gguf-py's GGUFWriter and ggml pad every tensor), or at the data section with no tensor."""
    a = header.alignment
    return max([header.data_offset] + [t.offset + -(-t.nbytes // a) * a for t in header.tensors])


def aligned_like(first: _gguf_parse.Header, header: _gguf_parse.Header,
                 reparse: Callable[[int], _gguf_parse.Header]) -> _gguf_parse.Header:
    """A later shard's header at the alignment its bytes are laid out with. GGUF aligns a file
    without general.alignment to 32, and llama.cpp's gguf-split writes later shards so; but
    gguf-py's GGUFWriter writes every shard of a set at the first shard's general.alignment
    while putting the key in the first shard only (read at 32, its tensors would be read from
    the wrong bytes, silently). The file's size tells the two apart: a shard is read at the
    first shard's alignment (``reparse(alignment)``) only when it has no general.alignment of
    its own, its own layout does not end where the file does, and that one does."""
    if (first.alignment == header.alignment or layout_end(header) == header.file_size
            or any(kv.key == "general.alignment" for kv in header.kvs)):
        return header
    try:
        other = reparse(first.alignment)
    except CorruptionError:
        return header  # not laid out that way either: GGUF's rule stands
    return other if layout_end(other) == other.file_size else header


def merge_kvs(shards: List[Tuple[str, _gguf_parse.Header]]) -> List[_gguf_parse.KeyValue]:
    """The merged model's key-values: the first shard's in its order, then any key only a later
    shard has, without the split.* keys (the merged model is one file). A later shard's
    general.alignment is its own file's layout, not the model's, and is left out. A key in two
    shards must have the same type and value there (CorruptionError naming the later one)."""
    from ._to_gguf import _same  # noqa: PLC0415 - bit-exact equality of key-values

    out: Dict[str, Tuple[_gguf_parse.KeyValue, str]] = {}
    for i, (path, header) in enumerate(shards):
        for kv in header.kvs:
            if kv.key in KEYS or (i and kv.key == "general.alignment"):
                continue
            seen = out.get(kv.key)
            if seen is None:
                out[kv.key] = (kv, path)
            elif seen[0].type_name != kv.type_name or not _same(seen[0].value, kv.value):
                raise corrupt(path, f"split GGUF: key-value {kv.key!r} ({kv.type_name}) differs "
                                    f"from the one in {seen[1]} ({seen[0].type_name})",
                              f"metadata/{kv.key}")
    return [kv for kv, _ in out.values()]


__all__ = ["Split", "split_of", "shard_paths", "check_present", "check_shard",
           "check_tensor_names", "check_total", "merge_kvs", "aligned_like", "layout_end",
           "set_name", "KEYS", "MAX_SHARDS", "NAME_FORMAT"]
