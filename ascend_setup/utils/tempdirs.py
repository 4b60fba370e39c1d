"""One temporary root per run, removed by the exit path, on a signal too.

Each run makes `ascend-setup-run-*` under the system's temp directory and points TMPDIR (and Python's
tempfile) at it, so everything it and its children create there (pip's `pip-*` build and unpack dirs, uv's,
`ascend-setup-resolve-*`) lies inside it. The normal exit and the interrupt handler both remove it: a
Ctrl-C during pip leaves no `pip-*` behind. Only a SIGKILL of the tool itself (the OOM killer, a
preempted instance's last seconds) can leave the root, with pip's half-unpacked torch (gigabytes) in it:
each root holds an owner file naming its run (pid and process start time), and the next run removes
the roots whose run is gone. Only those: a directory without our owner file is never ours to delete, and
neither is one a run in another PID namespace made (a container or `unshare --pid` sharing this /tmp sees
none of this namespace's processes, so every run here would look gone to it).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Optional, Tuple

from ascend_setup.utils.files import atomic_write_text
from ascend_setup.utils.procstat import start_ticks

_run: Optional[Tuple[Path, Optional[str], Optional[str], str]] = None  # root, old TMPDIR, old tempdir, system
PREFIX = "ascend-setup-run-"
OWNER = ".ascend-setup-owner"


def _process_identity(pid: int) -> Optional[str]:
    """pid plus the process's start time: a reused pid is another process."""
    ticks = start_ticks(pid)
    return None if ticks is None else f"{pid} {ticks}"


def _pid_namespace() -> str:
    """This process's PID namespace (`pid:[inode]`), where a pid means what it says; '' where unknown."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def _sweep_abandoned(system: str) -> None:
    """Remove the temp roots of runs that are gone (killed before their exit path ran)."""
    try:
        entries = list(os.scandir(system))
    except OSError:
        return
    for entry in entries:
        if not entry.name.startswith(PREFIX) or not entry.is_dir(follow_symlinks=False):
            continue
        try:
            if entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
            owner = Path(entry.path, OWNER).read_text().strip()
        except OSError:  # no owner file: not a root we made (or one still being made)
            continue
        words = owner.split()
        pid = words[0] if words else ""  # empty: another run is writing it this instant
        if len(words) > 2 and words[2] != _pid_namespace():
            continue  # a run of another PID namespace: its pid names no process of ours
        if pid.isdigit() and _process_identity(int(pid)) != " ".join(words[:2]):
            shutil.rmtree(entry.path, ignore_errors=True)


def enter() -> Path:
    """Make this run's temp root and route every temporary file of the run (and its children) into it."""
    global _run
    if _run is not None:
        return _run[0]
    system = tempfile.gettempdir()
    _sweep_abandoned(system)
    root = Path(tempfile.mkdtemp(prefix=PREFIX, dir=system))
    # whole or absent to a sweeping run
    atomic_write_text(root / OWNER, f"{_process_identity(os.getpid())} {_pid_namespace()}\n")
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
