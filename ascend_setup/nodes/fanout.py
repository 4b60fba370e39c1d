"""Run a command on many nodes at once, each bounded: a node that does not answer in time is killed (the
process group this started: the ssh or the local chain behind a run prefix) and reported, never waited on."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, TypeVar

T = TypeVar("T")
R = TypeVar("R")
#: Output a node may send back: facts are a few KB; more is a node answering something else.
MAX_OUTPUT = 8 * 1024 * 1024


@dataclass(frozen=True)
class Answer:
    returncode: Optional[int]  # None: timed out (killed) or could not start
    stdout: str
    stderr: str
    seconds: float
    error: Optional[str] = None  # why there is no answer

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.error is None


def run_bounded(argv: Sequence[str], timeout: float) -> Answer:
    """`argv` in a session of its own; past `timeout` its whole process group is killed (ours: started here)."""
    start = time.monotonic()
    try:
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, errors="replace", start_new_session=True)
    except OSError as exc:
        return Answer(None, "", "", time.monotonic() - start, f"{argv[0]} could not start: {exc.strerror or exc}")
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            out, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:  # a grandchild that left the group holds the pipes: stop reading
            out, err = "", ""
        return Answer(None, out[:MAX_OUTPUT], err[-4096:], time.monotonic() - start,
                      f"no answer in {timeout:g} s")
    return Answer(proc.returncode, out[:MAX_OUTPUT], err[-4096:], time.monotonic() - start)


def in_parallel(items: Sequence[T], work: Callable[[T], R], limit: int = 32) -> List[R]:
    """work(item) for every item, at most `limit` at once, results in the items' order."""
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(limit, len(items)))) as pool:
        return list(pool.map(work, items))
