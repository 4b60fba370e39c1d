"""File writes that survive a SIGKILL or a power cut at any byte, and never go through a symbolic link.

Every file the tool creates or writes in a workdir (run.lock, logs, state.json, downloads, mirrors.json) is
opened here with O_NOFOLLOW, and with O_EXCL where it must be new: on a shared disk a link planted in its
place would otherwise let root's run truncate or append to any file on the machine. A link there is bad
input naming it (exit 2); the tool never removes it (it is not ours).
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO, TextIO, Union

from ascend_setup.errors import BadInput
from ascend_setup.utils.redact import redacting


def _refuse(path: Path, why: str) -> BadInput:
    return BadInput(
        f"{path} {why}; ascend-setup opens none of its own files through a link or as a special file",
        hint="it is not ascend-setup's: look at it, move it away, then run again",
    )


def open_nofollow(path: Union[str, Path], flags: int, mode: int = 0o644) -> int:
    """os.open with O_NOFOLLOW (and O_NONBLOCK, so a FIFO in the file's place cannot hang the open); a link,
    a FIFO, a device or a directory there is BadInput naming it. Returns a blocking fd on a regular file."""
    path = Path(path)
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP or path.is_symlink():
            raise _refuse(path, "is a symbolic link") from None
        if exc.errno == errno.EEXIST:
            raise _refuse(path, "already exists") from None
        if exc.errno in (errno.EISDIR, errno.ENXIO):  # ENXIO: a FIFO without a reader opened for writing
            raise _refuse(path, "is a directory" if exc.errno == errno.EISDIR else "is a FIFO") from None
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise _refuse(path, "is not a regular file (a FIFO, socket or device)")
    os.set_blocking(fd, True)
    return fd


def open_append(path: Union[str, Path]) -> TextIO:
    """A step log (or any log) for appending text, created if missing, never through a link."""
    fd = open_nofollow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    handle = os.fdopen(fd, "a", encoding="utf-8", errors="replace")
    return redacting(lambda: handle)  # a log is shown (and shared): no password reaches it


def open_binary(path: Union[str, Path], append: bool) -> BinaryIO:
    """A download's `.part` file: appended to on resume, else created anew (truncated), never through a link."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
    return os.fdopen(open_nofollow(path, flags), "ab" if append else "wb")


def make_dir(path: Union[str, Path]) -> Path:
    """A directory of the workdir (logs, downloads, lock): created if missing, refused if a link, so that
    O_NOFOLLOW on the files inside is not undone by a linked parent."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    if path.is_symlink():
        raise _refuse(path, "is a symbolic link")
    return path


def refuse_link(path: Union[str, Path]) -> None:
    """Before replacing `path`: a link or a non-regular file there is not ours to replace."""
    path = Path(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        raise _refuse(path, "is a symbolic link")
    if not stat.S_ISREG(info.st_mode):
        raise _refuse(path, "is not a regular file")


def fsync_dir(directory: Path) -> None:
    """Make a rename inside `directory` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_text(path: Union[str, Path], text: str) -> None:
    """Write `text` to `path` so that readers see the old file or the new one, never a mix. The temp file is
    made with O_EXCL (mkstemp); a link at `path` is refused, not replaced."""
    path = Path(path)
    refuse_link(path)
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
