"""Reading a venv without running it: pyvenv.cfg and its site-packages."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional


def read_pyvenv_cfg(venv: Path) -> Optional[Dict[str, str]]:
    """pyvenv.cfg as a dict, or None when `venv` is not a venv."""
    try:
        text = (venv / "pyvenv.cfg").read_text(encoding="utf-8", errors="replace")
    except OSError:
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
