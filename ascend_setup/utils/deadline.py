"""Run network calls at once and keep what has finished by a deadline.

A DNS lookup that hangs cannot be interrupted, only left behind: each call runs in a daemon thread that
is waited for until the deadline and then abandoned (never joined later, so it cannot hold the run or the
process's exit). Pools are not used here for that reason: their workers are joined at interpreter exit.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Dict, Generic, List, Optional, Sequence, TypeVar, Union

T = TypeVar("T")


class Calls(Generic[T]):
    """Calls started at once in daemon threads; their results can be read at several deadlines (the ranking
    goes on with the calls that answered in time, and looks again for the late ones at the end)."""

    def __init__(self, calls: Sequence[Callable[[], T]]) -> None:
        self._results: Dict[int, Union[T, Exception]] = {}
        self._threads = [threading.Thread(target=self._run, args=(i, c), daemon=True) for i, c in enumerate(calls)]
        for thread in self._threads:
            thread.start()

    def _run(self, index: int, call: Callable[[], T]) -> None:
        try:
            self._results[index] = call()
        except Exception as exc:  # the caller says what a failed call means, with its cause
            self._results[index] = exc

    def results(self, deadline: float) -> List[Optional[Union[T, Exception]]]:
        """Wait until every call is done or `deadline` (a time.monotonic() value); None for those still running."""
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return [self._results.get(i) for i in range(len(self._threads))]


def run_until(calls: Sequence[Callable[[], T]], deadline: float) -> List[Optional[Union[T, Exception]]]:
    """Start every call at once; return their results in order: None for those not finished by `deadline`
    (a time.monotonic() value), the exception for those that raised. A call that crashed did not time out,
    and must not be reported as one (a crash in ssl once passed for an index that did not answer)."""
    return Calls(calls).results(deadline)


def failure_text(exc: Exception) -> str:
    """A failed call's cause in one line, for a message."""
    return f"{exc.__class__.__name__}: {exc}"
