"""One run per workdir: an flock that dies with its process, so there is never a manual unlock."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Optional

from ascend_setup.errors import LockHeld

#: `<workdir>/run.lock`. (`<workdir>/lock/` holds the resolved package locks.)
RUN_LOCK = "run.lock"


class WorkdirLock:
    """Exclusive, non-blocking `flock` on `<workdir>/lock`; the file records the holder's pid."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: Optional[int] = None

    def holder(self) -> Optional[int]:
        """The pid written by the current holder, if it is readable."""
        try:
            text = self.path.read_text().strip()
        except OSError:
            return None
        return int(text) if text.isdigit() else None

    def running(self) -> Optional[int]:
        """The pid of the run that holds the lock now, or None (reads only: works on a read-only workdir)."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return self.holder() or -1
        finally:
            os.close(fd)  # closing drops the probe's own lock, if it got one
        return None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            pid = self.holder()
            who = f"pid {pid}" if pid else "another process"
            raise LockHeld(f"another ascend-setup run ({who}) holds {self.path}",
                           hint="wait for it to finish; the lock disappears with that process") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "WorkdirLock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
