"""File writes that survive a SIGKILL or a power cut at any byte."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Union


def fsync_dir(directory: Path) -> None:
    """Make a rename inside `directory` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_text(path: Union[str, Path], text: str) -> None:
    """Write `text` to `path` so that readers see the old file or the new one, never a mix."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def read_regular_text(path: Path) -> str:
    """A file's text, refusing what is not a regular file: a FIFO would block forever, a device is no file.
    Raises OSError (IsADirectoryError, FileNotFoundError, or one naming the special file) for the caller."""
    import stat

    mode = path.stat().st_mode
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(21, "is a directory", str(path))
    if not stat.S_ISREG(mode):
        raise OSError(f"{path} is not a regular file (a FIFO, socket or device)")
    return path.read_text(encoding="utf-8")
