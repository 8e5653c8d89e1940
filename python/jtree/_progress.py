"""Progress reporting shared by save, load and convert: ``progress=`` options made callables.

``progress=`` takes False/None (nothing), True (a bar on stderr when stderr is a terminal,
nothing otherwise) or a callable ``fn(done_bytes, total_bytes)``. :func:`progress_callback`
turns that value into an ``Optional[Callable[[int, int], None]]`` that the operation calls
as it goes (None: report nothing, and skip the work of counting)::

    cb = progress_callback(progress, "convert model.safetensors")
    if cb is not None:
        cb(done, total)        # as often as convenient: the bar throttles itself
    ...
    finish(cb, total)          # once at the end: the bar reaches 100% and ends its line

A callable given by the user is called as given (after each chunk, or at most about every
0.1 s from the native library): it may raise to abort the operation, which then leaves
nothing behind and raises that exception. The bar never raises.
"""
from __future__ import annotations

import sys
import threading
import time
from typing import Any, Callable, Optional

from ._errors import InvalidArgumentError

ProgressFn = Callable[[int, int], Any]

__all__ = ["ProgressFn", "TerminalBar", "Tracked", "progress_callback", "finish", "Phases"]


def progress_callback(progress: Any, label: str = "") -> Optional[ProgressFn]:
    """The callable for a ``progress=`` value: None for False/None, a :class:`TerminalBar`
    labelled ``label`` for True (None when stderr is not a terminal), else a :class:`Tracked`
    calling the function given. Anything else is an :class:`InvalidArgumentError`."""
    if progress is None or progress is False:
        return None
    if progress is True:
        stream = sys.stderr
        isatty = getattr(stream, "isatty", None)
        if stream is None or isatty is None or not isatty():
            return None
        return TerminalBar(label, stream)
    if callable(progress):
        return Tracked(progress)
    raise InvalidArgumentError(f"progress must be True, False or a function (done_bytes, "
                               f"total_bytes), not {progress!r}")


def finish(cb: Optional[ProgressFn], total: int) -> None:
    """The last report of a successful operation: ``cb(total, total)`` unless the last call
    already said it was done (the native library does not report operations without chunks;
    after earlier reports, their total is used)."""
    if cb is None:
        return
    last = getattr(cb, "last", None)
    if last is not None:
        if last[0] >= last[1]:
            return  # (the last report said it: done)
        total = last[1]  # (the total the reports had: they stay consistent)
    cb(total, total)


class Tracked:
    """A progress function that remembers its last report (``last``: (done, total) or None),
    so that :func:`finish` does not repeat it."""

    def __init__(self, fn: ProgressFn):
        self.fn = fn
        self.last: Optional[tuple] = None

    def __call__(self, done: int, total: int) -> Any:
        self.last = (done, total)
        return self.fn(done, total)


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # (not reached)


class TerminalBar:
    """A one-line progress bar on a terminal stream (``label  42% [####....] 1.2/2.9 GiB
    310.5 MiB/s``), redrawn at most 10 times a second, ended with a newline when done reaches
    total. Thread-safe; never raises (a closed or broken stream silences it)."""

    def __init__(self, label: str = "", stream: Any = None, width: int = 30,
                 interval: float = 0.1):
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.interval = interval
        self.start = time.monotonic()
        self.drawn_at = 0.0
        self.last: Optional[tuple] = None
        self.ended = False
        self.lock = threading.Lock()

    def __call__(self, done: int, total: int) -> None:
        with self.lock:
            self.last = (done, total)
            end = done >= total
            now = time.monotonic()
            if self.ended or (not end and now - self.drawn_at < self.interval):
                return
            self.drawn_at = now
            frac = min(done / total, 1.0) if total else 1.0
            fill = int(frac * self.width)
            rate = done / max(now - self.start, 1e-9)
            line = (f"\r{self.label + '  ' if self.label else ''}{frac * 100:3.0f}% "
                    f"[{'#' * fill}{'.' * (self.width - fill)}] {_size(done)}/{_size(total)} "
                    f"{_size(rate)}/s")
            try:
                # (\x1b[K clears what a longer line before left)
                self.stream.write(line + "\x1b[K" + ("\n" if end else ""))
                self.stream.flush()
            except Exception:  # noqa: BLE001  (a progress bar must not fail the operation)
                self.ended = True
                return
            if end:
                self.ended = True


class Phases:
    """One monotonic report over several phases of known sizes: ``phase(size)`` returns the
    callable for the next phase, which maps its own ``(done, total)`` (in any unit) onto
    ``size`` bytes after the phases before it. ``cb`` sees ``(done, total_of_all)``."""

    def __init__(self, cb: ProgressFn, total: int):
        self.cb = cb
        self.total = total
        self.base = 0
        self.reported = 0

    def phase(self, size: int) -> ProgressFn:
        base = self.base
        self.base += size

        def report(done: int, total: int) -> Any:
            part = size if total <= 0 else min(size, size * done // total)
            return self.report(base + part)

        return report

    def report(self, done: int) -> Any:
        """Reports ``done`` (never going backwards)."""
        done = max(done, self.reported)
        self.reported = done
        return self.cb(done, self.total)
