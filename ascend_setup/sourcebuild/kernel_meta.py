"""kernel_meta locks: the TBE/opc operator compiler's `kernel_meta.lock` files, and which are stale (their
recorded process is gone). Not the run lock (engine/runlock.py) nor the lock (resolve/lockfile.py).

The operator compiler compares pids and never checks liveness, so a killed build leaves a lock that
fails every operator with 'Another process is using this dir'. A careless `find -name '*lock*'`
once matched block_table.py and destroyed a source tree: here only files named exactly
kernel_meta.lock (or `*.lock` inside a kernel_meta directory), holding a pid that is not alive,
owned by us, are ever touched.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Optional

from ascend_setup.errors import BadInput
from ascend_setup.utils.inputs import read_host_text
from ascend_setup.utils.procs import pid_alive

LOCK_NAME = "kernel_meta.lock"


@dataclass(frozen=True)
class KernelMetaLock:
    path: Path
    pid: Optional[int]
    alive: bool
    ours: bool

    @property
    def stale(self) -> bool:
        return self.pid is not None and not self.alive


def _is_kernel_meta_lock(path: Path) -> bool:
    return path.name == LOCK_NAME or (path.suffix == ".lock" and path.parent.name.startswith("kernel_meta"))


def _read_pid(path: Path) -> Optional[int]:
    try:  # through the gate: a FIFO in a lock's place would hang doctor, /dev/zero fill its memory
        text = (read_host_text(path, "host-file") or "").strip()
    except BadInput:
        return None  # not a file that holds a pid
    first = text.split()[0] if text else ""
    return int(first) if first.isdigit() else None


def find_kernel_meta_locks(root: Path) -> Iterator[KernelMetaLock]:
    """Every kernel_meta lock under `root`, without following symlinks out of it."""
    if not root.is_dir():
        return
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            if not name.endswith(".lock") or path.is_symlink() or not _is_kernel_meta_lock(path):
                continue
            pid = _read_pid(path)
            try:
                ours = path.lstat().st_uid == os.geteuid()
            except OSError:
                continue
            yield KernelMetaLock(path=path, pid=pid, alive=pid is not None and pid_alive(pid), ours=ours)


def sweep_kernel_meta_locks(root: Path) -> List[KernelMetaLock]:
    """Remove the stale kernel_meta locks we own; return what was removed."""
    removed = []
    for lock in find_kernel_meta_locks(root):
        if lock.stale and lock.ours:
            try:
                lock.path.unlink()
            except FileNotFoundError:
                continue
            removed.append(lock)
    return removed
