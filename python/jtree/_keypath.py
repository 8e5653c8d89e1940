"""Key paths ("params/layers/0/w") and key-path patterns ("params/*/kernel").

The syntax is the C++ library's, and so is the code that writes and splits them
(lib/include/jtree/key_path.h, through ``_jtree.key_path`` and ``_jtree.split_key_path``): the
keys from the root joined by '/', list and tuple items by position, '/' and '\\' inside string
keys escaped by '\\', the empty string key written '\\e' (the root's path is '').
Patterns use the same syntax; each component is matched with shell-style wildcards
(``*``, ``?``, ``[...]``, as fnmatch.fnmatchcase matches them) and a component ``**`` matches
any number of components. A pattern that matches a container selects everything below it. The
matching is the C++ library's too (lib/include/jtree/key_path_pattern.h, ``_jtree.KeyPathPatterns``).
"""
from __future__ import annotations

from typing import Iterable, List, Optional, Sequence, Set, Union

from . import _jtree
from ._errors import InvalidArgumentError

Key = Union[str, int]


def escape(key: Key) -> str:
    """The path component of one key."""
    return join((key,))


def join(parts: Iterable[Key]) -> str:
    """The key path of a sequence of keys (or positions)."""
    if not isinstance(parts, (tuple, list)):
        parts = tuple(parts)
    try:
        return _jtree.key_path(parts)
    except TypeError:
        # Keys are str or int; anything else (a bool, a key of a type a save refuses, named
        # in that error's message) is written as str() writes it.
        return _jtree.key_path([p if isinstance(p, str)
                                or (isinstance(p, int) and not isinstance(p, bool)) else str(p)
                                for p in parts])


def split(path: str) -> List[str]:
    """The unescaped components of a key path or pattern; '' has none.
    InvalidArgumentError for a path ending with an unfinished escape '\\'."""
    return _jtree.split_key_path(path)


class PatternSet:
    """Key-path patterns; ``selects(parts)`` tells whether a leaf at ``parts`` is chosen. The
    matching is the C++ library's (jtree::KeyPathPatterns, lib/include/jtree/key_path_pattern.h:
    components as fnmatch.fnmatchcase matches them, ``**`` for any number of components), so
    that the native load of a selection (jtree._load_plain) and the walk here agree."""

    def __init__(self, patterns: Union[str, Sequence[str]]):
        if isinstance(patterns, str):
            patterns = [patterns]
        if not isinstance(patterns, (list, tuple)) or not all(
                isinstance(p, str) for p in patterns):
            raise InvalidArgumentError(
                f"keys must be a key-path pattern (str) or a list of them, not {patterns!r}")
        self.texts: List[str] = list(patterns)
        self.native = _jtree.KeyPathPatterns(self.texts)

    def __len__(self) -> int:
        return len(self.texts)

    def selects(self, parts: Sequence[str], pending: Optional[Set[int]] = None) -> bool:
        """True when a pattern matches ``parts`` or one of its prefixes. The numbers of the
        patterns that match are removed from ``pending`` (the patterns not matched yet: a load
        reports those that matched nothing)."""
        if pending:
            matched = self.native.matching(parts)
            pending.difference_update(matched)
            return bool(matched)
        return self.native.selects(parts)

    def may_select_below(self, parts: Sequence[str]) -> bool:
        """False when no pattern can select anything at ``parts`` or below it (a container
        whose subtree a load need not look into); True when one might (a ``**`` always
        might)."""
        return self.native.may_select_below(parts)

    def may_walk_everything(self) -> bool:
        """Whether a load with these patterns may look into every container (the root's
        pattern "", or a first component with wildcards, ``**`` included); False when each
        names its first key plainly."""
        return self.native.may_walk_everything()

    def text(self, i: int) -> str:
        """Pattern number ``i`` as the caller wrote it."""
        return self.texts[i]


def nearest(pattern: str, paths: Sequence[str], n: int = 3) -> List[str]:
    """The key paths most like ``pattern``, best first: what a typo meant (the C++ library's
    choice, jtree::nearest_paths, as the jtree command's)."""
    return _jtree.nearest_paths(pattern, paths, n)
