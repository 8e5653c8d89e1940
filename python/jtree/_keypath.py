"""Key paths ("params/layers/0/w") and key-path patterns ("params/*/kernel").

The syntax is the C++ library's (``jtree::Tree::path``): the keys from the root joined by '/',
list and tuple items by position, '/' and '\\' inside string keys escaped by '\\'.
Patterns use the same syntax; each component is matched with shell-style wildcards
(``*``, ``?``, ``[...]``) and a component ``**`` matches any number of components. A pattern
that matches a container selects everything below it.
"""
from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Iterable, List, Sequence, Tuple, Union

from ._errors import InvalidArgumentError

Key = Union[str, int]


def escape(key: Key) -> str:
    """The path component of one key."""
    if isinstance(key, str):
        return key.replace("\\", "\\\\").replace("/", "\\/")
    return str(key)


def join(parts: Iterable[Key]) -> str:
    """The key path of a sequence of keys (or positions)."""
    return "/".join(escape(p) for p in parts)


def split(path: str) -> List[str]:
    """The unescaped components of a key path or pattern; '' has none."""
    if path == "":
        return []
    parts: List[str] = []
    cur: List[str] = []
    i = 0
    while i < len(path):
        c = path[i]
        if c == "\\":
            if i + 1 == len(path):
                raise InvalidArgumentError(
                    f"key path {path!r} ends with an unfinished escape '\\'")
            cur.append(path[i + 1])
            i += 2
            continue
        if c == "/":
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    parts.append("".join(cur))
    return parts


class PatternSet:
    """Key-path patterns; ``selects(parts)`` tells whether a leaf at ``parts`` is chosen."""

    def __init__(self, patterns: Union[str, Sequence[str]]):
        if isinstance(patterns, str):
            patterns = [patterns]
        if not isinstance(patterns, (list, tuple)) or not all(
                isinstance(p, str) for p in patterns):
            raise InvalidArgumentError(
                f"keys must be a key-path pattern (str) or a list of them, not {patterns!r}")
        self.patterns: List[Tuple[str, ...]] = [tuple(split(p)) for p in patterns]

    def selects(self, parts: Sequence[str]) -> bool:
        return any(_prefix_match(p, tuple(parts)) for p in self.patterns)


def _prefix_match(pattern: Tuple[str, ...], path: Tuple[str, ...]) -> bool:
    # True when the pattern matches `path` or one of its prefixes (a container's path).
    if not pattern:
        return True
    head = pattern[0]
    if head == "**":
        return any(_prefix_match(pattern[1:], path[i:]) for i in range(len(path) + 1))
    if not path:
        return False
    return fnmatchcase(path[0], head) and _prefix_match(pattern[1:], path[1:])
