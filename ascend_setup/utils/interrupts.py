"""Ctrl-C, SIGTERM and SIGHUP: stop everything this process started, wait for it, then exit.

The tool used to exit 130 at once while pip went on installing as an orphan, after the workdir lock
was already free. Now the whole process tree below us (pip, uv, the build and what they started) gets
SIGTERM, then SIGKILL after a grace period, and only when it is gone does the process exit, which is
what releases the run lock. A step that was running stays recorded `started` (state is written
atomically), so the next run resumes it. The exit is immediate, not an unwinding: worker threads
waiting on a silent mirror cannot hold Ctrl-C for their timeouts.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

from ascend_setup.utils.procs import pid_alive, send

GRACE_SECONDS = 1.5
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: Run (after the process tree has stopped) before an interrupt exits: a demo's temporary workdir, say.
_at_interrupt: List[Callable[[], None]] = []


def at_interrupt(callback: Callable[[], None]) -> None:
    _at_interrupt.append(callback)


def descendants(pid: int, proc: Path = Path("/proc")) -> List[int]:
    """Every process below `pid`, children first (from /proc: Linux, where the tool runs)."""
    children: Dict[int, List[int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found: List[int] = []
    queue = list(children.get(pid, []))
    while queue:
        child = queue.pop(0)
        found.append(child)
        queue.extend(children.get(child, []))
    return found


def stop_tree(grace: float = GRACE_SECONDS) -> None:
    """SIGTERM to every descendant, SIGKILL to whatever is left after `grace` seconds; wait until all are gone."""
    pids = descendants(os.getpid())  # ours by ancestry, read a moment ago: the proof here
    for pid in pids:
        send(pid, signal.SIGTERM)
    end = time.monotonic() + grace
    while time.monotonic() < end and any(pid_alive(p, unknown=False) for p in pids):
        time.sleep(0.05)
    for pid in descendants(os.getpid()) + pids:
        if pid_alive(pid, unknown=False):
            send(pid, signal.SIGKILL)
    end = time.monotonic() + 5
    while time.monotonic() < end and any(pid_alive(p, unknown=False) for p in pids):
        time.sleep(0.02)


def install_handlers(
    resume_hint: Optional[str] = None, on_interrupt: Optional[Callable[[str, int], None]] = None
) -> None:
    """On SIGINT, SIGTERM or SIGHUP: stop the process tree, say so on stderr, exit 128 + the signal.
    `on_interrupt(message, exit_code)` runs last: a --json run's error document on stdout, say."""

    def handle(signum: int, _frame: object) -> None:
        for sig in SIGNALS:
            signal.signal(sig, signal.SIG_IGN)  # one interrupt is enough; a second must not cut the cleanup short
        stop_tree()
        for callback in _at_interrupt:
            try:
                callback()
            except Exception:  # a cleanup that fails must not keep the process from exiting
                pass
        message = f"interrupted by {signal.Signals(signum).name}; every process it started has stopped"
        hint = f"; {resume_hint}" if resume_hint else ""
        try:
            sys.stderr.write(f"ascend-setup: {message}{hint}\n")
            sys.stderr.flush()
            if on_interrupt is not None:
                on_interrupt(message, 128 + signum)
            sys.stdout.flush()
        finally:
            os._exit(128 + signum)

    for sig in SIGNALS:
        signal.signal(sig, handle)
