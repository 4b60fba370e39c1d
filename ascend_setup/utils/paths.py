"""Where things live: the workdir on a persistent disk, and user-given paths checked up front."""

from __future__ import annotations

import errno
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional, Tuple

from ascend_setup.errors import BadInput

#: Only these survive a stop of a preemptible instance.
PERSISTENT_ROOTS = ("/mnt/workspace", "/home")
WORKDIR_NAME = "ascend-setup"


@dataclass(frozen=True)
class Flag:
    """A path-like flag with its ASCEND_SETUP_* environment variable, defined once: the flag wins over the
    variable; an empty value of either is bad input; errors name whichever the user set."""

    name: str
    env: str

    def value(self, given: Optional[str]) -> Tuple[Optional[str], str]:
        """(the value, where it came from): an error then names the flag or the variable the user set."""
        if given is not None:
            if not given.strip():
                raise BadInput(f"{self.name} was given an empty value")
            check_path_length(Path(given), self.name)
            return given, self.name
        value = os.environ.get(self.env)
        if value is not None and not value.strip():
            raise BadInput(f"{self.env} is set but empty", hint="unset it or give it a value")
        if value:
            check_path_length(Path(value), self.env)
        return (value, self.env) if value else (None, f"{self.name} (default)")

    def path(self, given: Optional[str]) -> Tuple[Optional[Path], str]:
        """The value as an absolute path, `~` expanded (None when neither flag nor variable is set)."""
        value, source = self.value(given)
        return (Path(value).expanduser().absolute() if value else None), source


WORKDIR = Flag("--workdir", "ASCEND_SETUP_WORKDIR")
VENV = Flag("--venv", "ASCEND_SETUP_VENV")
PYTHON_BUILDS = Flag("--python-builds", "ASCEND_SETUP_PYTHON_BUILDS")
PYTHON = Flag("--python", "ASCEND_SETUP_PYTHON")
CANN_HOME = Flag("--cann-home", "ASCEND_SETUP_CANN_HOME")
#: The filesystem root the container checks read as `/` (a container's rootfs seen from the host, a test's).
ROOT = Flag("--root", "ASCEND_SETUP_ROOT")


def is_this_host(root: Path) -> bool:
    """Whether a --root is this host's own /: only then may its binaries run without --run-root-tools (a
    root given to read is data: its npu-smi could be anyone's program)."""
    return root.resolve() == Path("/").resolve()


def root_dir(given: Optional[str]) -> Path:
    """--root (or its variable) as an existing directory, else /."""
    path, source = ROOT.path(given)
    if path is None:
        return Path("/")
    if not path.is_dir():
        raise BadInput(f"{source} {path} is not a directory")
    return path


def default_workdir(candidates: Optional[Iterable[str]] = None, write: bool = True) -> Path:
    """First writable of /mnt/workspace, $HOME, then `<dir>/ascend-setup` (for a read command: the first of
    them that already holds a workdir, even a read-only one)."""
    if candidates is None:
        candidates = ["/mnt/workspace", os.environ.get("HOME", "")]
    candidates = list(candidates)
    if not write:
        for base in candidates:
            if base and (Path(base) / WORKDIR_NAME).is_dir():
                return Path(base) / WORKDIR_NAME
    for base in candidates:
        if base and os.path.isdir(base) and os.access(base, os.W_OK | os.X_OK):
            return Path(base) / WORKDIR_NAME
    if not write:  # a read command reads nothing there, and needs no writable HOME for that
        return Path(next((b for b in candidates if b), "/mnt/workspace")) / WORKDIR_NAME
    raise BadInput(
        "no writable persistent directory found (/mnt/workspace, $HOME)",
        hint="pass --workdir DIR or set ASCEND_SETUP_WORKDIR",
    )


def resolve_workdir(flag_value: Optional[str], *, mode: str = "write", exist: bool = False) -> Path:
    """The workdir the user asked for, or the default, checked for `mode` (see check_dir_path); `exist`
    ones (status, resume) need it to be there."""
    chosen, source = WORKDIR.path(flag_value)
    path = chosen or default_workdir(write=mode == "write")
    check_path_length(path, source)
    path = settle_link(path, source)
    if exist and not path.is_dir():
        what = "is not a directory" if path.exists() else "does not exist"
        raise BadInput(f"{source} {path} {what}", hint="name the workdir an install used (--workdir DIR)")
    check_dir_path(path, source, mode=mode)
    if mode == "write":
        check_owned(path, source)
    return path


#: Linux's NAME_MAX and PATH_MAX: past them every call fails with ENAMETOOLONG.
NAME_MAX, PATH_MAX = 255, 4095


def check_path_length(path: Path, flag: str) -> None:
    """A path the kernel can take: no component over 255 bytes, the whole under 4096."""
    raw = os.fsencode(str(path))
    longest = max((len(part) for part in raw.split(b"/")), default=0)
    if longest > NAME_MAX or len(raw) > PATH_MAX:
        raise BadInput(
            f"{flag} is too long for Linux ({longest} bytes in one name, at most {NAME_MAX}; "
            f"{len(raw)} in all, at most {PATH_MAX})",
            hint=f"give {flag} a shorter path",
        )


def settle_link(path: Path, flag: str) -> Path:
    """A workdir given as a symbolic link is resolved once, here, and the real directory is used from then on
    (every later open refuses links). A dangling or looping link is bad input naming it."""
    if not path.is_symlink():
        return path
    try:
        real = path.resolve(strict=True)
    except FileNotFoundError:
        raise BadInput(
            f"{flag} {path} is a symbolic link to {os.readlink(path)!r}, which does not exist",
            hint=f"create the directory it points to, or give {flag} the real directory",
        ) from None
    except (OSError, RuntimeError):  # ELOOP (RuntimeError before Python 3.13)
        raise BadInput(f"{flag} {path} is a symbolic link loop", hint=f"give {flag} a real directory") from None
    if not real.is_dir():
        raise BadInput(f"{flag} {path} is a symbolic link to {real}, which is not a directory")
    return real


def check_owned(path: Path, flag: str) -> None:
    """A workdir we write must be the user's own: owned by the effective uid and not writable by everyone
    (group-writable is allowed: Ubuntu's umask 002 gives each user a private group).
    For root that means owned by root: on a shared disk (/mnt/workspace) a directory another user created
    is refused even for root, because its owner could swap files under it while root's run writes there.
    A missing workdir is made by this run, so it is ours."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return
    me = os.geteuid()
    if info.st_uid != me:
        raise BadInput(
            f"{flag} {path} is owned by uid {info.st_uid}, not by you (uid {me})",
            hint=f"use a directory of your own for {flag}, or chown it to yourself if it is yours",
        )
    if info.st_mode & 0o002:  # sticky or not: anyone may still create names (links) we have not made yet
        raise BadInput(
            f"{flag} {path} is writable by every user (mode {info.st_mode & 0o7777:o})",
            hint=f"chmod o-w {path}, or use a directory of your own",
        )


def check_dir_path(path: Path, flag: str, mode: str = "write") -> None:
    """A directory path: never a file, its nearest existing parent a directory. `write`: creatable now.
    `plan` (a read command about a later write): an existing one may be read-only, a missing one must be
    creatable. `read`: nothing more (a read command works on a read-only or missing one)."""
    check_path_length(path, flag)
    if path.is_symlink() and not path.exists():
        raise BadInput(f"{flag} {path} is a dangling or looping symbolic link")
    if path.exists() and not path.is_dir():
        raise BadInput(f"{flag} {path} exists and is not a directory")
    parent = path
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise BadInput(f"{flag} {path}: {parent} is not a directory")
    if mode == "write" or (mode == "plan" and not path.exists()):
        try:  # as root, permission bits say nothing (/proc, a read-only mount): try it, leave nothing
            os.rmdir(tempfile.mkdtemp(prefix=".ascend-setup-probe-", dir=parent))
        except OSError as exc:
            if mode == "plan" and exc.errno == errno.EROFS:
                return  # a dry run over a read-only tree: it only reads
            raise BadInput(
                f"{flag} {path}: no directory can be created in {parent} ({exc.strerror or exc})",
                hint=f"choose a writable place for {flag}",
            ) from None


def cache_dir() -> Path:
    """The tool's own cache (uv's HTTP cache for resolutions): never the user's uv or pip cache."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ascend-setup"


def files_cache() -> Path:
    """Texts read out of distribution files, by sha256 (see index/filecache.py)."""
    return cache_dir() / "files"


def check_output_file(path: Path, flag: str) -> None:
    """A file we will write: absent or a regular file, in a directory where files can be created."""
    check_path_length(path, flag)
    if path.exists() and not path.is_file():
        raise BadInput(f"{flag} {path} exists and is not a regular file")
    check_dir_path(path.parent, flag)


def is_persistent(path: Path, roots: Iterable[str] = PERSISTENT_ROOTS) -> bool:
    """Whether `path` lies under a directory that survives an instance stop."""
    resolved = path.resolve()
    return any(resolved == Path(r) or Path(r) in resolved.parents for r in roots)
