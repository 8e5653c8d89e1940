"""Progress of a conversion: bytes counted here, shown or passed on by jtree._progress (the bar
and the ``progress=`` values are the ones save and load take)."""
from __future__ import annotations

from typing import Any, Optional

from .. import _progress


def make(progress: Any, label: str) -> "Reporter":
    """A Reporter for ``progress``: True (a bar when stderr is a terminal), a callable, or
    False/None (nothing); anything else is an InvalidArgumentError."""
    return Reporter(_progress.progress_callback(progress, label))


class Reporter:
    """Counts the bytes done and calls the progress function with (done, total); a user
    callback's exception propagates (it aborts the conversion), the bar never raises."""

    def __init__(self, fn: Optional[_progress.ProgressFn]):
        self.fn = fn
        self.done = 0
        self.total = 0

    def report(self, done: int) -> None:
        self.done = done
        if self.fn is not None:
            self.fn(done, self.total)

    def add(self, n: int) -> None:
        self.report(self.done + n)

    def finish(self) -> None:
        """Ends the bar's line (a bar that reached its total has ended it already)."""
        if isinstance(self.fn, _progress.TerminalBar):
            _progress.finish(self.fn, self.total)
