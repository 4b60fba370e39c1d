"""Run network calls at once and keep what has finished by a deadline.

A DNS lookup that hangs cannot be interrupted, only left behind: each call runs in a daemon thread that
is waited for until the deadline and then abandoned (never joined later, so it cannot hold the run or the
process's exit). Pools are not used here for that reason: their workers are joined at interpreter exit.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Dict, List, Optional, Sequence, TypeVar

T = TypeVar("T")


def run_until(calls: Sequence[Callable[[], T]], deadline: float) -> List[Optional[T]]:
    """Start every call at once; return their results in order, None for those not finished by `deadline`
    (a time.monotonic() value) or that raised."""
    results: Dict[int, T] = {}

    def run(index: int, call: Callable[[], T]) -> None:
        try:
            results[index] = call()
        except Exception:  # a call that fails is a call without a result; the caller says what that means
            pass

    threads = [threading.Thread(target=run, args=(i, c), daemon=True) for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return [results.get(i) for i in range(len(calls))]
