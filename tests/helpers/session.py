"""An install session for tests of one step's check or one helper: the options a test names, the rest
InstallOptions' defaults."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional

from pydantic import BaseModel

from ascend_setup.engine.workdir import Workdir
from ascend_setup.steps.install_session import InstallSession
from ascend_setup.steps.options import InstallOptions


def session_for(workdir: Path, outputs: Optional[Dict[str, BaseModel]] = None, **fields: Any) -> InstallSession:
    """`fields` are InstallOptions' (venv, soc, ...) and InstallSession's (matrix, row, pip_settings, console)."""
    session_fields = {k: fields.pop(k) for k in ("matrix", "row", "pip_settings", "console") if k in fields}
    options = InstallOptions(**{"cann": "9.1.0", "workdir": str(workdir), "venv": str(workdir / "venv"), **fields})
    return InstallSession(Workdir(workdir), options=options, outputs=dict(outputs or {}), **session_fields)
