"""jtree's exceptions: one class per status code of the C++ library.

Every error jtree raises is a :class:`jtree.Error`. Each subclass also derives from the
built-in exception a Python programmer would reach for (``ValueError`` for bad arguments,
``FileNotFoundError`` for a missing file or key path, ...), so existing ``except`` clauses work.
Messages name the file and the key path at fault.
"""
from __future__ import annotations

from typing import Optional

from . import _jtree


class Error(Exception):
    """Base class of every jtree error.

    ``code`` is the name of the library's status code (``"Corruption"``, ``"NotFound"``...).
    ``file`` and ``key_path`` name the file and the key path at fault (``None`` where they
    do not apply or are not known); the message names them too. Errors from the C++ library
    carry the file of the reader or writer that failed, and the key path of the leaf its
    message names.
    """

    code = "Unknown"

    def __init__(self, message: str, *, file: Optional[str] = None,
                 key_path: Optional[str] = None):
        super().__init__(message)
        self.file = file
        self.key_path = key_path

    def __str__(self) -> str:  # OSError subclasses would otherwise print errno fields
        return str(self.args[0]) if self.args else ""


class CorruptionError(Error):
    """The file's bytes are inconsistent, damaged or hostile."""

    code = "Corruption"


class StorageError(Error, OSError):
    """The storage backend failed: a read, a write, the network, a full disk."""

    code = "IOError"


class InvalidArgumentError(Error, ValueError):
    """The caller asked for something impossible: an object that cannot be saved, a slice out
    of bounds, a target tree that does not match the file."""

    code = "InvalidArgument"


class NotSupportedError(Error):
    """The file needs something this build or process does not have: a newer format version,
    an unregistered custom type, the ml_dtypes package, a dtype a framework lacks."""

    code = "NotSupported"


class NotFoundError(Error, FileNotFoundError, LookupError):
    """No such file, key path or chunk."""

    code = "NotFound"


class AlreadyExistsError(Error, FileExistsError):
    """The target exists and replacing it was not allowed (for example a file that is not a
    .jtree file, without ``overwrite_foreign=True``)."""

    code = "AlreadyExists"


class PermissionDeniedError(Error, PermissionError):
    """The storage backend refused access (file mode, credentials)."""

    code = "PermissionDenied"


class AbortedError(Error):
    """The operation was cancelled."""

    code = "Aborted"


class ResourceExhaustedError(Error):
    """A configured limit was hit (for example a file larger than the parser limits allow)."""

    code = "ResourceExhausted"


class IndexOutOfRangeError(InvalidArgumentError, IndexError):
    """An index or slice outside an array or container (also an IndexError, so that Python's
    iteration protocol and ``except IndexError`` work)."""


class IndexKindError(InvalidArgumentError, TypeError):
    """An index of a kind that cannot select from this object (also a TypeError)."""


class ArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument of the wrong type given to the native module (also a TypeError)."""


# Index = jtree::StatusCode value.
_BY_CODE = (Error, CorruptionError, StorageError, InvalidArgumentError, NotSupportedError,
            NotFoundError, AlreadyExistsError, PermissionDeniedError, AbortedError,
            ResourceExhaustedError)
_jtree._set_error_classes(_BY_CODE, ArgumentTypeError, IndexOutOfRangeError)


def where(file: Optional[str], key_path: Optional[str]) -> str:
    """'<file>: at <key path>' for messages."""
    parts = []
    if file:
        parts.append(str(file))
    if key_path is not None:
        parts.append(f"at '{key_path}'" if key_path else "at the root")
    return ": ".join(parts)


def error(cls: type, file: Optional[str], key_path: Optional[str], message: str) -> Error:
    """An exception of class ``cls`` whose message starts with the file and key path."""
    prefix = where(file, key_path)
    return cls(f"{prefix}: {message}" if prefix else message, file=file, key_path=key_path)
