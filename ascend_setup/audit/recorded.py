"""What an audit holds a venv to besides the row: the lock (the one --lock names, else the one ascend-setup
installed the venv from) and the indexes that lock or install recorded."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Mapping, Optional, Tuple

from ascend_setup.dists.venv_reader import read_venv_record
from ascend_setup.errors import BadInput
from ascend_setup.matrix.models import MIRROR, Matrix
from ascend_setup.resolve.lockfile import Lock, read_lock


def recorded_lock(venv: Path) -> Tuple[Optional[Lock], Optional[str], Dict[str, str]]:
    """The lock and indexes ascend-setup recorded when it built `venv` (nothing for other venvs)."""
    record = read_venv_record(venv)
    if record is None:
        return None, None, {}
    lock = None
    if record.lock and Path(record.lock).is_file():
        try:
            lock = read_lock(Path(record.lock))
        except BadInput:
            lock = None
    return lock, record.lock if lock else None, record.indexes


def chosen_lock(venv: Path, given: Optional[str]) -> Tuple[Optional[Lock], Optional[str], Dict[str, str]]:
    """(the lock, where it came from, its indexes by name): --lock's when given, else the recorded one (the
    venv's record is read either way: a damaged one is reported whatever --lock says)."""
    recorded = recorded_lock(venv)
    if given:
        lock = read_lock(Path(given).expanduser().absolute())
        return lock, given, dict(lock.indexes)
    return recorded


def with_recorded_indexes(matrix: Matrix, indexes: Mapping[str, str], overrides: Mapping[str, str]) -> Matrix:
    """The matrix's named indexes as the venv was installed from them (the mirror aside), then --index's."""
    named = {n: u for n, u in indexes.items() if n != MIRROR and n in matrix.indexes}
    return matrix.with_indexes({**named, **overrides})
