"""One run per workdir: an flock that dies with its process, so there is never a manual unlock.

The lock file is opened with O_NOFOLLOW and O_NONBLOCK and must be a regular file: a link planted there
would have root truncate its target, and a FIFO would hang `status` (both exit 2, naming the file)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Optional

from ascend_setup.errors import LockHeld
from ascend_setup.utils.files import open_nofollow


class RunLock:
    """Exclusive, non-blocking `flock` on the run lock file (`RunFiles.run_lock`); the file records the
    holder's pid. `holder` names, in the refusal, what holds it."""

    def __init__(self, path: Path, holder: str = "run") -> None:
        self.path = path
        self.holder = holder
        self._fd: Optional[int] = None

    @staticmethod
    def _pid_in(fd: int) -> Optional[int]:
        """The pid the holder wrote (a few bytes at most; anything else is no pid)."""
        text = os.pread(fd, 32, 0).decode("ascii", errors="replace").strip()
        return int(text) if text.isdigit() else None

    def running(self) -> Optional[int]:
        """The pid of the run that holds the run lock now, or None (reads only: works on a read-only workdir)."""
        try:
            fd = open_nofollow(self.path, os.O_RDONLY)
        except (FileNotFoundError, PermissionError):
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return self._pid_in(fd) or -1
        finally:
            os.close(fd)  # closing drops the probe's own lock, if it got one
        return None

    def acquire(self) -> None:
        fd = open_nofollow(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = self._pid_in(fd)
            os.close(fd)
            who = f"pid {pid}" if pid else "another process"
            raise LockHeld(
                f"another {self.holder} ({who}) holds {self.path}",
                hint="wait for it to finish; the lock disappears with that process",
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
