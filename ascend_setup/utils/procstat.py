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
