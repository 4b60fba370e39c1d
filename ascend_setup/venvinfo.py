"""Reading a venv without running it: pyvenv.cfg, its site-packages, and the record ascend-setup leaves."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from ascend_setup.errors import BadInput
from ascend_setup.fsutil import atomic_write_text, read_regular_text
from ascend_setup.inputs import load_json

RECORD_NAME = "ascend-setup.json"


def read_pyvenv_cfg(venv: Path) -> Optional[Dict[str, str]]:
    """pyvenv.cfg as a dict, or None when `venv` is not a venv."""
    try:
        text = read_regular_text(venv / "pyvenv.cfg")
    except (OSError, UnicodeDecodeError):
        return None
    result: Dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            result[key.strip().lower()] = value.strip()
    return result


def site_packages(venv: Path) -> List[Path]:
    """The venv's purelib/platlib directories (lib/pythonX.Y/site-packages, lib64 too)."""
    found = []
    for lib in ("lib", "lib64"):
        for candidate in sorted((venv / lib).glob("python3*/site-packages")):
            if candidate.is_dir() and candidate.resolve() not in [f.resolve() for f in found]:
                found.append(candidate)
    return found


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


@dataclass
class VenvRecord:
    """What built this venv: the workdir, the lock it was installed from, the indexes it came from. The
    audit reads it, so a venv ascend-setup built is checked against its own lock and real indexes."""

    workdir: str
    lock: Optional[str] = None
    indexes: Dict[str, str] = field(default_factory=dict)


def write_venv_record(venv: Path, record: VenvRecord) -> None:
    atomic_write_text(venv / RECORD_NAME, json.dumps(asdict(record), indent=2) + "\n")


def read_venv_record(venv: Path) -> Optional[VenvRecord]:
    if not (venv / RECORD_NAME).is_file():
        return None
    try:
        data = load_json(venv / RECORD_NAME, "venv-record")  # a FIFO or a bomb in its place: no record
        return VenvRecord(workdir=str(data["workdir"]), lock=data.get("lock"), indexes=dict(data.get("indexes") or {}))
    except (BadInput, OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
