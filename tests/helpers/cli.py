"""Running the tool as a user would: the repository, an environment free of the developer's settings, and
the bad-input promise (one line on stderr, the exit code, no traceback)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Dict, Optional

REPO = Path(__file__).resolve().parents[2]


def clean_env(home: Path, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """An environment free of the developer's pip and ascend-setup settings."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PIP_", "ASCEND_", "UV_")) and k not in ("VIRTUAL_ENV", "PYTHONPATH")
    }
    env.update(
        {
            "HOME": str(home),
            "PIP_CONFIG_FILE": os.devnull,
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PYTHONPATH": str(REPO),
            "NO_COLOR": "1",
            "COLUMNS": "200",
        }
    )
    env.update(extra or {})
    return env


def assert_one_line_error(proc: subprocess.CompletedProcess, code: int = 2) -> str:
    """Bad input: the given exit code, exactly one line on stderr, no traceback."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]
