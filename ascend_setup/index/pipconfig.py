"""The index pip is configured with: pip.conf / PIP_INDEX_URL, else pip's own default. Asked of pip."""

from __future__ import annotations

import os
import subprocess
import sys
from functools import lru_cache
from typing import List, Optional, Tuple

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
    "print(' '.join(pick('extra-index-url').split()))\n"
)


@lru_cache(maxsize=None)
def _ask_pip(python: str) -> Tuple[str, Tuple[str, ...]]:
    try:
        out = subprocess.run([python, "-I", "-c", _ASK], capture_output=True, text=True, timeout=60, check=True).stdout
        lines = out.splitlines() + ["", ""]
        return lines[0].strip(), tuple(lines[1].split())
    except (OSError, subprocess.SubprocessError):
        return "", ()


def configured_index(python: Optional[str] = None) -> str:
    """PIP_INDEX_URL, else pip.conf's index-url, else pip's built-in default (asked of pip itself)."""
    env = os.environ.get("PIP_INDEX_URL")
    if env:
        return env
    url, _ = _ask_pip(python or sys.executable)
    if not url:
        from ascend_setup.errors import AscendSetupError

        raise AscendSetupError("cannot ask pip for its index (pip is not importable)",
                               hint="pass --index-url URL")
    return url


def configured_extra_indexes(python: Optional[str] = None) -> List[str]:
    env = os.environ.get("PIP_EXTRA_INDEX_URL")
    if env:
        return env.split()
    return list(_ask_pip(python or sys.executable)[1])
