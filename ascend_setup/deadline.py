"""Run network calls at once and keep what has finished by a deadline.

A DNS lookup that hangs cannot be interrupted, only left behind: each call runs in a daemon thread that
is waited for until the deadline and then abandoned (never joined later, so it cannot hold the run or the
process's exit). Pools are not used here for that reason: their workers are joined at interpreter exit.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Dict, List, Optional, Sequence, TypeVar, Union

T = TypeVar("T")


def run_until(calls: Sequence[Callable[[], T]], deadline: float) -> List[Optional[Union[T, Exception]]]:
    """Start every call at once; return their results in order: None for those not finished by `deadline`
    (a time.monotonic() value), the exception for those that raised. A call that crashed did not time out,
    and must not be reported as one (a crash in ssl once passed for an index that did not answer)."""
    results: Dict[int, Union[T, Exception]] = {}

    def run(index: int, call: Callable[[], T]) -> None:
        try:
            results[index] = call()
        except Exception as exc:  # the caller says what a failed call means, with its cause
            results[index] = exc

    threads = [threading.Thread(target=run, args=(i, c), daemon=True) for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return [results.get(i) for i in range(len(calls))]


def failure_text(exc: Exception) -> str:
    """A failed call's cause in one line, for a message."""
    return f"{exc.__class__.__name__}: {exc}"
