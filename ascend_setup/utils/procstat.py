"""A process's start time from /proc: what tells a process from a later one with the same pid."""

from __future__ import annotations

from typing import Optional, Union


def start_ticks(pid: Union[int, str] = "self") -> Optional[int]:
    """Field 22 of /proc/PID/stat (clock ticks after boot), or None where the process or /proc is gone.
    The command name before it, in parentheses, may hold spaces and parentheses: split after the last one."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def process_started() -> float:
    """time.monotonic() when this process began, by the kernel's start time: the interpreter's own start-up
    (0.1-0.3 s on a loaded host) is part of a command's wall time too. A process that asks long after it began
    (a test run, a program using the library) counts from the call."""
    import os
    import time

    now = time.monotonic()
    ticks = start_ticks()
    if ticks is None:  # not Linux
        return now
    try:
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (AttributeError, OSError, ValueError):
        return now
    return now - age if 0 <= age < 5 else now
