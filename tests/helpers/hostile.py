"""The special things a hostile user puts where the tool reads a file: a FIFO (a reader blocks for ever), a
link to /dev/zero (a reader fills memory), a directory, and a sparse file past every kind's size."""

from __future__ import annotations

import os
from pathlib import Path

SPECIAL = ("fifo", "dev-zero", "directory", "huge")
HUGE = 200 * 1024 * 1024  # sparse: larger than every kind's limit, costs no disk


def plant_special(path: Path, how: str, head: bytes = b"") -> None:
    """`how` (one of SPECIAL) at `path`; a huge file starts with `head` (a valid file's first bytes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if how == "fifo":
        os.mkfifo(path)
    elif how == "dev-zero":
        path.symlink_to("/dev/zero")
    elif how == "directory":
        path.mkdir()
        (path / "inside").write_text("x\n")
    elif how == "huge":
        with path.open("wb") as handle:
            handle.write(head)
            handle.truncate(HUGE)
    else:
        raise AssertionError(how)
