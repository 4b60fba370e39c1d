"""One DNS lookup per host name, not one per connection, while mirrors are ranked.

The ranking asks every candidate at once. A resolver that drops part of such a burst answers the dropped
queries only at its retry, 5 s later (glibc's default timeout), and requests resolves again for every page it
fetches: pypi.org, resolved in 2 ms by the ranking's own first lookup, then took 5.4 s for its pages and was
dropped as a timeout. Python keeps no DNS cache of its own, so successful answers are kept here for a few
minutes (the OS's resolver keeps its TTLs; this only spares repeats within one command).
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any, Callable, Dict, Tuple

#: Long enough for a ranking and the install step that follows it, short against any record's change.
KEEP_SECONDS = 300.0


def _keeping(lookup: Callable[..., Any]) -> Callable[..., Any]:
    """`lookup` (socket.getaddrinfo as it stands) with its successful answers kept."""
    answers: Dict[Tuple[Any, ...], Tuple[float, Any]] = {}
    lock = threading.Lock()

    def getaddrinfo(host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0, flags: int = 0) -> Any:
        key = (host, port, int(family), int(type), proto, flags)  # the ranking's lookup and urllib3's are one
        with lock:
            kept = answers.get(key)
        if kept is not None and time.monotonic() - kept[0] < KEEP_SECONDS:
            return kept[1]
        answer = lookup(host, port, family, type, proto, flags)  # failures are not kept: the next ask may succeed
        with lock:
            answers[key] = (time.monotonic(), answer)
        return answer

    # a mark on the function itself, read back with getattr: mypy types no attribute set on a function
    getaddrinfo.keeps_answers = True  # type: ignore[attr-defined]
    return getaddrinfo


def keep_answers() -> None:
    """From now on in this process, a name resolved once is not asked again for KEEP_SECONDS."""
    if not getattr(socket.getaddrinfo, "keeps_answers", False):
        socket.getaddrinfo = _keeping(socket.getaddrinfo)
