"""One temporary root per run, removed by the exit path, on a signal too.

Each run makes `ascend-setup-run-*` under the system's temp directory and points TMPDIR (and Python's
tempfile) at it, so everything it and its children create there (pip's `pip-*` build and unpack dirs, uv's,
`ascend-setup-resolve-*`) lies inside it. The normal exit and the interrupt handler both remove it: a
Ctrl-C during pip leaves no `pip-*` behind. Only a SIGKILL of the tool itself can leave the root, which
is one directory with the run's name on it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Optional, Tuple

_run: Optional[Tuple[Path, Optional[str], Optional[str], str]] = None  # root, old TMPDIR, old tempdir, system


def enter() -> Path:
    """Make this run's temp root and route every temporary file of the run (and its children) into it."""
    global _run
    if _run is not None:
        return _run[0]
    system = tempfile.gettempdir()
    root = Path(tempfile.mkdtemp(prefix="ascend-setup-run-", dir=system))
    _run = (root, os.environ.get("TMPDIR"), tempfile.tempdir, system)
    os.environ["TMPDIR"] = str(root)
    tempfile.tempdir = str(root)
    return root


def leave() -> None:
    """Remove the run's temp root (ours: made by enter) and put TMPDIR back as it was."""
    global _run
    if _run is None:
        return
    root, old_env, old_tempdir, _ = _run
    _run = None
    shutil.rmtree(root, ignore_errors=True)
    if old_env is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = old_env
    tempfile.tempdir = old_tempdir


def kept_tempdir() -> str:
    """Where a temporary directory that must outlive the run goes (a demo's --keep workdir)."""
    return _run[3] if _run is not None else tempfile.gettempdir()
