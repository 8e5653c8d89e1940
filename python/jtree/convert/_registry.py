"""Which modules read and write which formats (the converter's registry).

Readers are ``_from_<fmt>.py`` modules defining ``FORMAT``, ``sniff(path)`` and
``open_source(path, *, allow_pickle=False)``; writers are ``_to_<fmt>.py`` modules defining
``FORMAT`` and ``write(file, dst, *, progress)`` returning the path a reader opens, or None
for ``dst`` (the safetensors writer also takes ``max_shard_size``; see
/work/helpers/CONVERT.md's interface, kept in the package's docs). The lists name every module even before it exists, so a missing one
gives a clear NotSupportedError naming it rather than a silent "unknown format".
"""
from __future__ import annotations

import importlib
from types import ModuleType
from typing import Dict, Iterator, List, Tuple

from .._errors import NotSupportedError

# (format name, module) in the order sniff() is tried: cheap and unambiguous checks first.
READERS: List[Tuple[str, str]] = [
    ("safetensors", "_from_safetensors"),
    ("gguf", "_from_gguf"),
    ("numpy", "_from_numpy"),
    ("torch", "_from_torch"),
    ("orbax", "_from_orbax"),
    ("flax", "_from_flax"),
]

# "jtree" is the default destination and is written by the driver itself (jtree.save).
WRITERS: List[Tuple[str, str]] = [
    ("safetensors", "_to_safetensors"),
    ("gguf", "_to_gguf"),
]

# Destination extensions -> format.
DST_EXTENSIONS: Dict[str, str] = {
    ".jtree": "jtree",
    ".safetensors": "safetensors",
    ".gguf": "gguf",
}

# Aliases users may pass as --from/--to.
ALIASES: Dict[str, str] = {
    "pt": "torch", "pytorch": "torch", "bin": "torch",
    "npy": "numpy", "npz": "numpy", "np": "numpy",
    "st": "safetensors",
    "msgpack": "flax",
    "jax": "orbax", "pytree_serialization": "orbax",
}


def normalize(fmt: str) -> str:
    """Lower-cases a format name and resolves aliases ('pt' -> 'torch')."""
    f = fmt.strip().lower()
    return ALIASES.get(f, f)


def _import(module: str, what: str) -> ModuleType:
    try:
        return importlib.import_module(f"{__package__}.{module}")
    except ModuleNotFoundError as e:
        # Only the module itself missing is "not in this installation"; a missing dependency
        # inside it (gguf, torch...) is reported by name too.
        raise NotSupportedError(
            f"jtree convert: {what} is not available in this installation "
            f"(module jtree.convert.{module}: {e})") from e


def reader(fmt: str) -> ModuleType:
    """The reader module of format ``fmt``; NotSupportedError if unknown or missing."""
    fmt = normalize(fmt)
    for name, module in READERS:
        if name == fmt:
            return _import(module, f"reading {name}")
    raise NotSupportedError(
        f"jtree convert: unknown source format {fmt!r} "
        f"(known: {', '.join(n for n, _ in READERS)})")


def writer(fmt: str) -> ModuleType:
    """The writer module of format ``fmt`` (not 'jtree'); NotSupportedError if unknown/missing."""
    fmt = normalize(fmt)
    for name, module in WRITERS:
        if name == fmt:
            return _import(module, f"writing {name}")
    raise NotSupportedError(
        f"jtree convert: unknown destination format {fmt!r} "
        f"(known: jtree, {', '.join(n for n, _ in WRITERS)})")


def available_readers() -> Iterator[Tuple[str, ModuleType]]:
    """The reader modules that import, in sniff order, each imported only when reached (a
    source detected as safetensors never imports the orbax reader and JAX)."""
    for name, module in READERS:
        try:
            yield name, importlib.import_module(f"{__package__}.{module}")
        except ImportError:
            continue
