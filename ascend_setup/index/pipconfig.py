"""The index pip is configured with: pip.conf / PIP_INDEX_URL, else pip's own default. Asked of pip."""

from __future__ import annotations

import os
import subprocess
import sys
from functools import lru_cache
from typing import Optional

_ASK = (
    "from pip._internal.configuration import Configuration\n"
    "from pip._internal.models.index import PyPI\n"
    "c = Configuration(isolated=False); c.load()\n"
    "vals = dict(c.items())\n"
    "def pick(key):\n"
    "    for scope in (':env:', 'install', 'global'):\n"
    "        v = vals.get(scope + '.' + key)\n"
    "        if v: return v\n"
    "    return ''\n"
    "print(pick('index-url') or PyPI.simple_url)\n"
)


@lru_cache(maxsize=None)
def _ask_pip(python: str) -> str:
    try:
        out = subprocess.run([python, "-I", "-c", _ASK], capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.strip()


def configured_index(python: Optional[str] = None) -> str:
    """PIP_INDEX_URL, else pip.conf's index-url, else pip's built-in default (asked of pip itself)."""
    env = os.environ.get("PIP_INDEX_URL")
    if env:
        return env
    url = _ask_pip(python or sys.executable)
    if not url:
        from ascend_setup.errors import AscendSetupError

        raise AscendSetupError("cannot ask pip for its index (pip is not importable)",
                               hint="pass --index-url URL")
    return url

