"""Disk full is a clear stop, not a corruption: one line naming the filesystem, its free space and what
was being written. Every writer here is resumable (`.part` downloads, per-step state, the interrupted
step's RECORD check), so the next run after space is freed continues where this one stopped."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path
from typing import Iterable, Optional, Tuple

from ascend_setup.errors import StepFailed

#: How pip, uv, tar, cmake and Python itself say ENOSPC in their output.
MARKERS = ("No space left on device", "os error 28", "[Errno 28]")
_QUOTED_PATH = re.compile(r"""['`"](/[^'`"]+)['`"]""")


class DiskFull(StepFailed):
    """ENOSPC while writing; the hint says how to continue."""


def is_enospc(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def filesystem_of(path: Path) -> Tuple[str, str]:
    """(mount point, type) of the filesystem holding `path` (its nearest existing ancestor)."""
    here = Path(os.path.abspath(path))
    while not here.exists() and here != here.parent:
        here = here.parent
    real = os.path.realpath(here)
    best = ("/", "unknown")
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                fields = line.split()
                if len(fields) < 3:
                    continue
                mount = _unescape(fields[1])
                inside = real == mount or real.startswith(mount.rstrip("/") + "/")
                if inside and len(mount) >= len(best[0]):
                    best = (mount, fields[2])
    except OSError:
        pass
    return best


def free_bytes(path: Path) -> Optional[int]:
    here = Path(os.path.abspath(path))
    while not here.exists() and here != here.parent:
        here = here.parent
    try:
        st = os.statvfs(here)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _size(n: Optional[int]) -> str:
    if n is None:
        return "an unknown amount"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def disk_full(path: Path, what: str) -> DiskFull:
    """The one-line error for ENOSPC at `path` while doing `what`."""
    mount, kind = filesystem_of(path)
    return DiskFull(
        f"disk full: {mount} ({kind}) has {_size(free_bytes(path))} free; {what} could not write {path}",
        hint=f"free space on {mount} (or pass a --workdir elsewhere), then run the same "
        "command again: it continues where it stopped",
    )


def in_output(lines: Iterable[str]) -> Optional[str]:
    """The first output line that reports ENOSPC, or None."""
    return next((line for line in lines if any(m in line for m in MARKERS)), None)


def path_in(line: str) -> Optional[Path]:
    """The absolute path a tool's ENOSPC line names (pip quotes it with '', uv with ``), if any."""
    found = _QUOTED_PATH.search(line)
    return Path(found.group(1)) if found else None
