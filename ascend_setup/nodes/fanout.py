"""Run a command on many nodes at once, each bounded: a node that does not answer in time is killed (the
process group this started: the ssh or the local chain behind a run prefix) and reported, never waited on.

Every command carries this process's fan-out run token in its environment, and the tool is the child subreaper
of what it starts: what a command leaves behind, even in a session of its own, is found by that token and
ended when the fan-out ends (`end_escaped`). A command's output is read up to a cap, then cut."""

from __future__ import annotations

import math
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, TypeVar

from ascend_setup.utils.procs import RUN_TOKEN_VAR, Started, make_subreaper, new_run_token, read_capped, stop_carriers

T = TypeVar("T")
R = TypeVar("R")
#: Output a node may send back: facts are a few KB; more is a node answering something else.
MAX_OUTPUT = 8 * 1024 * 1024
MAX_STDERR = 4096
#: Nodes asked at once: all of them up to this (two pipes each stay well inside the usual 1024 open files), so
#: the fan-out takes one node timeout, not one per batch.
WIDTH = 256
#: The run token of every command this process fans out (one process, one fan-out at a time: `doctor --nodes`).
TOKEN = new_run_token()


@dataclass(frozen=True)
class Answer:
    returncode: Optional[int]  # None: timed out (killed), cut, or could not start
    stdout: str
    stderr: str
    seconds: float
    error: Optional[str] = None  # why there is no answer

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.error is None


def run_bounded(argv: Sequence[str], timeout: float) -> Answer:
    """`argv` in a session of its own; past `timeout`, or past MAX_OUTPUT of stdout, its whole process group is
    killed (ours: started here, proven by utils/procs.Started before the signal)."""
    start = time.monotonic()
    if timeout <= 0:
        return Answer(None, "", "", 0.0, "not asked: the fan-out's time had run out")
    make_subreaper()
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env={**os.environ, RUN_TOKEN_VAR: TOKEN},
        )
    except OSError as exc:
        return Answer(None, "", "", time.monotonic() - start, f"{argv[0]} could not start: {exc.strerror or exc}")
    try:
        out, err, early = read_capped(proc, timeout, MAX_OUTPUT, MAX_STDERR)
    finally:
        if proc.poll() is None:  # the group only: the token's other carriers are the other nodes' commands
            Started.child(proc, TOKEN).stop(0.0, child=proc, carriers=False)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:  # not proven (it left its group): end_escaped ends it by its token
            pass
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    seconds = time.monotonic() - start
    stdout, stderr = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    if early == "timeout":
        return Answer(None, stdout, stderr, seconds, f"no answer in {math.ceil(timeout * 10) / 10:g} s")
    if early == "cut":
        return Answer(
            None,
            stdout,
            stderr,
            seconds,
            f"sent more than {MAX_OUTPUT} bytes; cut there (facts take a few KB: the node answers something else)",
        )
    return Answer(proc.returncode, stdout, stderr, seconds)


def end_escaped() -> None:
    """End every process the fan-out's commands left behind (a daemon, a grandchild in a session of its own):
    each carries the fan-out's token."""
    stop_carriers(TOKEN, grace=0.0)


def in_parallel(items: Sequence[T], work: Callable[[T], R], limit: int = WIDTH) -> List[R]:
    """work(item) for every item, at most `limit` at once, results in the items' order."""
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(limit, len(items)))) as pool:
        return list(pool.map(work, items))
