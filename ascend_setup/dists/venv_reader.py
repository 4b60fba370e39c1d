"""Reading a venv without running it: pyvenv.cfg, its site-packages, and the record ascend-setup leaves."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Optional

from pydantic import BaseModel, ConfigDict, Field

from ascend_setup.errors import BadInput
from ascend_setup.utils.files import atomic_write_text, read_regular_text
from ascend_setup.utils.inputs import Name, PathText, load_model

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
    found: List[Path] = []
    for lib in ("lib", "lib64"):
        for candidate in sorted((venv / lib).glob("python3*/site-packages")):
            if candidate.is_dir() and candidate.resolve() not in [f.resolve() for f in found]:
                found.append(candidate)
    return found


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


#: A row names two or three indexes; a record with more was not written by ascend-setup.
MAX_INDEXES = 64


class VenvRecord(BaseModel):
    """What built this venv: the workdir, the lock it was installed from, the indexes it came from. The
    audit reads it, so a venv ascend-setup built is checked against its own lock and real indexes. Read
    through this model: a lock that is a number or indexes nested in indexes are refused where the file is
    read, not found by a traceback where a value is used."""

    model_config = ConfigDict(extra="forbid")

    workdir: PathText
    lock: Optional[PathText] = None
    indexes: Dict[Name, PathText] = Field(default_factory=dict, max_length=MAX_INDEXES)
    #: True when ascend-setup ran `python -m venv` into an absent or empty directory: only then may it
    #: delete and recreate the venv when its interpreter is broken (an adopted venv is never deleted)
    created: bool = Field(default=False, strict=True)


def write_venv_record(venv: Path, record: VenvRecord) -> None:
    atomic_write_text(venv / RECORD_NAME, record.model_dump_json(indent=2) + "\n")


def read_venv_record(venv: Path) -> Optional[VenvRecord]:
    """The record, or None when there is none; one that is there but damaged (a FIFO, a bomb, a wrong
    type) is bad input naming it, since what the venv is (ours or not) cannot be told without it."""
    path = venv / RECORD_NAME
    if not os.path.lexists(path):
        return None
    return load_model(
        path,
        "venv-record",
        VenvRecord,
        hint=f"move it aside (mv {path} {path}.bad); {venv} is then a venv ascend-setup did not make",
    )


def refused_venv_reason(venv: Path) -> Optional[str]:
    """Why `venv` may never be an install target, or None. The tool's own environment (installing the
    closure into it breaks every later command), the system prefix, ~/.local and /usr hold files that
    other programs own."""
    import sys

    here = venv.resolve()
    named = {
        Path(sys.prefix): "ascend-setup's own environment (sys.prefix)",
        Path(sys.base_prefix): "the system Python's prefix",
        Path(sys.exec_prefix): "the system Python's prefix",
        Path.home() / ".local": "~/.local (the user's own installs)",
        Path("/usr"): "/usr",
        Path("/usr/local"): "/usr/local",
    }
    for path, what in named.items():
        try:
            if path.resolve() == here:
                return what
        except OSError:
            continue
    return None


def leftovers_only(venv: Path) -> List[Path]:
    """[] when `venv` holds nothing but the temp files of an ascend-setup.json write a kill interrupted
    (atomic_write_text's `.<name>.*.tmp`); else what it holds."""
    found = list(venv.iterdir())
    ours = [p for p in found if p.name.startswith(f".{RECORD_NAME}.") and p.name.endswith(".tmp") and p.is_file()]
    return [] if len(ours) == len(found) else found


def venv_target_kind(venv: Path) -> str:
    """What --venv names: 'absent', 'empty', 'ours' (a venv with ascend-setup's record), 'foreign' (a venv
    without it) or 'not-venv' (a non-empty directory without pyvenv.cfg, or not a directory at all)."""
    if not venv.exists() and not venv.is_symlink():
        return "absent"
    if not venv.is_dir():
        return "not-venv"
    if not leftovers_only(venv):
        return "empty"
    if read_venv_record(venv) is not None:
        return "ours"  # written before `python -m venv`: a venv killed half-made has it, and no pyvenv.cfg yet
    return "foreign" if read_pyvenv_cfg(venv) is not None else "not-venv"


def check_venv_target(venv: Path, source: str, *, adopt: bool) -> str:
    """--venv for install: absent, empty, a venv ascend-setup made, or (with --adopt-venv) another venv.
    Anything else is bad input now, before a file is touched. Returns the kind (venv_target_kind)."""
    refused = refused_venv_reason(venv)
    if refused:
        raise BadInput(
            f"{source} {venv} is {refused}: ascend-setup never installs into it",
            hint="pass a new directory, e.g. --venv ~/vllm-ascend-venv",
        )
    kind = venv_target_kind(venv)
    if kind == "not-venv":
        raise BadInput(
            f"{source} {venv} is not empty and not a venv (no pyvenv.cfg): ascend-setup will not write into it",
            hint="pass an absent or empty directory, or a venv",
        )
    if kind == "foreign" and not adopt:
        raise BadInput(
            f"{source} {venv} is a venv ascend-setup did not make",
            hint="pass --adopt-venv to install the lock into it anyway, or a new --venv",
        )
    return kind


def adoption_notice(venv: Path) -> str:
    """What --adopt-venv changes in a venv ascend-setup did not make (printed before it does)."""
    return (
        f"adopting {venv}: ascend-setup will install, replace or upgrade its packages to match the lock "
        "(its pip too; nothing else is uninstalled except upstream triton, which shadows triton-ascend), "
        f"write its pip.conf and uv.toml (the chosen index) and {RECORD_NAME}; it never deletes the venv"
    )
