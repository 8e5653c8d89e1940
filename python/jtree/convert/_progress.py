"""Progress of a conversion: a callback of (done bytes, total bytes), or a bar on stderr."""
from __future__ import annotations

import sys
import time
from typing import Any, Callable, Optional, TextIO

Callback = Callable[[int, int], None]


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


class Bar:
    """A one-line bar redrawn in place (at most 10 times a second) on a terminal."""

    def __init__(self, label: str, stream: Optional[TextIO] = None):
        self.label = label
        self.stream = stream or sys.stderr
        self.last = 0.0
        self.start = time.monotonic()
        self.drawn = False

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - self.last < 0.1:
            return
        self.last = now
        frac = done / total if total else 1.0
        width = 30
        fill = int(frac * width)
        rate = done / max(now - self.start, 1e-9)
        line = (f"\r{self.label} [{'#' * fill}{'.' * (width - fill)}] {frac * 100:5.1f}% "
                f"{_size(done)}/{_size(total)} {_size(rate)}/s")
        self.stream.write(line)
        self.stream.flush()
        self.drawn = True

    def finish(self) -> None:
        """Ends the bar's line."""
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()


def make(progress: Any, label: str) -> "Reporter":
    """A Reporter for ``progress``: True (a bar when stderr is a terminal), a callable, or
    False/None (nothing)."""
    if callable(progress):
        return Reporter(progress, None)
    if progress:
        if getattr(sys.stderr, "isatty", lambda: False)():
            bar = Bar(label)
            return Reporter(bar, bar)
    return Reporter(None, None)


class Reporter:
    """Counts bytes done and calls the callback with (done, total); never raises from the
    bar (a broken terminal must not fail a conversion), but a user callback's error does."""

    def __init__(self, fn: Optional[Callback], bar: Optional[Bar]):
        self.fn = fn
        self.bar = bar
        self.done = 0
        self.total = 0

    def report(self, done: int) -> None:
        self.done = done
        if self.fn is None:
            return
        if self.bar is not None:
            try:
                self.fn(done, self.total)
            except OSError:
                self.fn = None
        else:
            self.fn(done, self.total)

    def add(self, n: int) -> None:
        self.report(self.done + n)

    def finish(self) -> None:
        if self.bar is not None:
            try:
                self.bar.finish()
            except OSError:
                pass
