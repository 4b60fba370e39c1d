"""Watching the processes and logs of a run from outside: attempts per step, a condition with a deadline,
the processes that name a path."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Callable, Dict


def attempts(workdir: Path) -> Dict[str, int]:
    """How many attempts each step's log records (one '=== step: reason ===' line per run)."""
    logs = workdir / "logs"
    return {p.stem: len(re.findall(r"^=== ", p.read_text(), re.M)) for p in logs.glob("*.log")} if logs.exists() else {}


def wait_for(predicate: Callable[[], bool], proc, timeout: float = 120, poll: float = 0.02) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        if predicate():
            return True
        time.sleep(poll)
    return False


def processes_mentioning(text: str) -> list:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if text in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found
