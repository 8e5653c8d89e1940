"""What a reader hands the converter's driver: the tree to save and what goes with it.

Each ``_from_<fmt>.py`` module's ``open_source(path)`` returns a :class:`Source`. Its tree holds
NumPy views of the input (np.memmap: zero copy, the OS pages them in and out, so converting a
model holds about one tensor in memory), ``jtree._save.Deferred`` leaves for data that must be
decoded first, or plain values. The driver saves the tree with one ``jtree.save`` call and calls
``close()`` afterwards, success or failure.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Union


def _nothing() -> None:
    """The default ``close``: a reader that keeps nothing open has nothing to release."""


@dataclasses.dataclass
class Source:
    """An opened foreign checkpoint, ready to be saved as a .jtree file.

    Attributes:
        tree: nested dicts (str keys, order kept) and lists whose leaves are np.ndarray (memory
            maps of the input preferred), ``jtree._save.Deferred`` or plain values (None, bool,
            int, float, str, bytes).
        metadata: user metadata of the .jtree file (safetensors' ``__metadata__``, GGUF's
            key-values...), str or bytes values.
        description: one line for the progress output, e.g. ``"safetensors: 291 tensors"``.
        close: releases the files and maps the tree refers to; called once after the save.
    """

    tree: Any
    metadata: Dict[str, Union[str, bytes]] = dataclasses.field(default_factory=dict)
    description: str = ""
    close: Callable[[], None] = _nothing
