"""Where things live: the workdir on a persistent disk, and user-given paths checked up front."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Optional

from ascend_setup.errors import BadInput

#: Only these survive a stop of a preemptible instance.
PERSISTENT_ROOTS = ("/mnt/workspace", "/home")
WORKDIR_NAME = "ascend-setup"


def env_or(flag_value: Optional[str], env_name: str) -> Optional[str]:
    """A flag wins over its ASCEND_SETUP_* environment variable."""
    return flag_value if flag_value else (os.environ.get(env_name) or None)


def default_workdir(candidates: Optional[Iterable[str]] = None) -> Path:
    """First writable of /mnt/workspace, $HOME, then `<dir>/ascend-setup`."""
    if candidates is None:
        candidates = ["/mnt/workspace", os.environ.get("HOME", "")]
    for base in candidates:
        if base and os.path.isdir(base) and os.access(base, os.W_OK | os.X_OK):
            return Path(base) / WORKDIR_NAME
    raise BadInput("no writable persistent directory found (/mnt/workspace, $HOME)",
                   hint="pass --workdir DIR or set ASCEND_SETUP_WORKDIR")


def resolve_workdir(flag_value: Optional[str]) -> Path:
    """The workdir the user asked for, or the default; a path that is a file is bad input."""
    chosen = env_or(flag_value, "ASCEND_SETUP_WORKDIR")
    path = Path(chosen).expanduser().absolute() if chosen else default_workdir()
    check_dir_path(path, "--workdir")
    return path


def check_dir_path(path: Path, flag: str) -> None:
    """A directory we may create: it must not be a file, and its nearest existing parent writable."""
    if path.exists() and not path.is_dir():
        raise BadInput(f"{flag} {path} exists and is not a directory")
    parent = path
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise BadInput(f"{flag} {path}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise BadInput(f"{flag} {path}: {parent} is not writable")


def cache_dir() -> Path:
    """The tool's own cache (uv's HTTP cache for resolutions): never the user's uv or pip cache."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ascend-setup"


def is_persistent(path: Path, roots: Iterable[str] = PERSISTENT_ROOTS) -> bool:
    """Whether `path` lies under a directory that survives an instance stop."""
    resolved = path.resolve()
    return any(resolved == Path(r) or Path(r) in resolved.parents for r in roots)
