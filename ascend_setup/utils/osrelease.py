"""/etc/os-release read as key=value pairs: a fact of this machine that the known fixes (knowledge/) and
host/ both read, so it lives below both."""

from __future__ import annotations

from pathlib import Path
from typing import Dict

from ascend_setup.utils.inputs import read_host_text


def os_release(path: Path = Path("/etc/os-release")) -> Dict[str, str]:
    """The key=value pairs of os-release, quotes removed."""
    result: Dict[str, str] = {}
    for line in (read_host_text(path, "host-file") or "").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and not key.startswith("#"):
            result[key.strip()] = value.strip().strip('"').strip("'")
    return result
