"""One command's run: when it began, and the work left for its end.

The front door (`cli/main.py`) opens the run before it parses the command line and ends it when the command
has ended. A room with something to write once the command is over (pip's remembered answer) registers it on
the run, so what happens at the end never depends on which modules happen to be imported. A command refused as
bad input ends with its work dropped: it touches nothing. Outside a run (a program using the library, a test
calling a room directly) nothing is registered, and the clock starts when it is first read.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Callable, Dict, Iterator, Optional


class Run:
    """A command's run: its start (`time.monotonic()`), and the work for its end, by name."""

    def __init__(self, started: float) -> None:
        self.started = started
        self._at_end: Dict[str, Callable[[], None]] = {}

    def at_end(self, name: str, work: Callable[[], None]) -> None:
        """Do `work` when the command ends; registered again under the same name, the later work replaces it."""
        self._at_end[name] = work

    def end(self) -> None:
        """Do the registered work, once, in the order it was first registered."""
        work, self._at_end = list(self._at_end.values()), {}
        for each in work:
            each()


#: The run the front door has open (a plain reference, not a context variable: worker threads see it too).
_current: Optional[Run] = None


@contextmanager
def command_run(started: float) -> Iterator[Run]:
    """Open the command's run for the time of the `with`; the caller decides whether to `end` it."""
    global _current
    run, previous = Run(started), _current
    _current = run
    try:
        yield run
    finally:
        _current = previous


def at_end(name: str, work: Callable[[], None]) -> None:
    """Register `work` for the end of the command running now; outside a run it is not done."""
    if _current is not None:
        _current.at_end(name, work)


def elapsed() -> float:
    """Seconds since the command running now began (its process's start, interpreter start-up included); 0
    outside a run."""
    return 0.0 if _current is None else time.monotonic() - _current.started
