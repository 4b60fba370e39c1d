"""pip and uv behind one small interface (pipx's Backend idea): the steps never build argv by hand.

Every run is isolated from the user's pip/uv configuration except its network settings (see
`index.pipconfig`), and installs what it is told with --no-deps: the lock already holds the closure,
so nothing is resolved again at install time.
"""

from __future__ import annotations

import shutil
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Type

from ascend_setup.errors import StepFailed
from ascend_setup.index.pipconfig import PipSettings
from ascend_setup.knowledge.scan import triage
from ascend_setup.utils.files import open_append
from ascend_setup.utils.installer_name import InstallerName
from ascend_setup.utils.procs import LineHook, run_logged


@dataclass(frozen=True)
class Indexes:
    """Where one invocation may download from: one index, plus (for the mirror) the user's extra indexes."""

    index_url: str
    extra_index_urls: Sequence[str] = field(default_factory=tuple)

    def args(self) -> List[str]:
        argv = ["--index-url", self.index_url]
        for extra in self.extra_index_urls:
            argv += ["--extra-index-url", extra]
        return argv


@dataclass(frozen=True)
class InstallRequest:
    """What one installer invocation installs; `indexes=None` means local files only (--no-index)."""

    requirements: Sequence[str] = ()
    requirement_file: Optional[Path] = None  # with one --hash per line: --require-hashes
    indexes: Optional[Indexes] = None
    find_links: Optional[Path] = None  # a directory of already verified files
    force_reinstall: bool = False

    def flags(self) -> List[str]:
        """Always --no-deps: the lock holds the closure, so nothing is resolved at install time."""
        argv = self.indexes.args() if self.indexes else ["--no-index"]
        if self.find_links is not None:
            argv += ["--find-links", str(self.find_links)]
        argv.append("--no-deps")
        if self.force_reinstall:
            argv.append("--force-reinstall")
        if self.requirement_file is not None:
            argv += ["--require-hashes", "-r", str(self.requirement_file)]
        return argv + [str(r) for r in self.requirements]


class Installer(ABC):
    name: str

    def __init__(self, settings: PipSettings, cache_dir: Optional[Path] = None) -> None:
        self.settings = settings
        self.cache_dir = cache_dir

    def install(
        self,
        python: Path,
        request: InstallRequest,
        *,
        log: Path,
        env: Optional[Mapping[str, str]] = None,
        on_line: Optional[LineHook] = None,
    ) -> None:
        """Install into the venv whose interpreter is `python`; the step log names the installer first, so a
        failure is read against the right tool's output."""
        with open_append(log) as handle:
            handle.write(f"installer: {self.name}\n")
        self._install(python, request, log=log, env=env, on_line=on_line)

    @abstractmethod
    def _install(
        self,
        python: Path,
        request: InstallRequest,
        *,
        log: Path,
        env: Optional[Mapping[str, str]],
        on_line: Optional[LineHook],
    ) -> None:
        """Run this installer's own install command."""

    @abstractmethod
    def uninstall(self, python: Path, names: Sequence[str], *, log: Path) -> None:
        """Remove distributions by name."""


class PipInstaller(Installer):
    name = "pip"

    def _install(
        self,
        python: Path,
        request: InstallRequest,
        *,
        log: Path,
        env: Optional[Mapping[str, str]],
        on_line: Optional[LineHook],
    ) -> None:
        argv = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--no-input", *request.flags()]
        run_logged(
            argv,
            log,
            env=self.settings.pip_env(env),
            on_line=on_line,
            what="pip install",
            explain=triage,
            writes=Path(python).parent.parent,
        )

    def uninstall(self, python: Path, names: Sequence[str], *, log: Path) -> None:
        run_logged(
            [str(python), "-m", "pip", "uninstall", "-y", *names],
            log,
            env=self.settings.pip_env(),
            what="pip uninstall",
            explain=triage,
        )


def uv_command() -> List[str]:
    """The uv binary that ships with this tool (a runtime dependency), else uv on PATH."""
    try:
        from uv import find_uv_bin

        return [find_uv_bin()]
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found:
            return [found]
    raise StepFailed("uv is not installed (ascend-setup resolves with it)", hint="pip install uv")


class UvInstaller(Installer):
    """uv reads no pip.conf (and, here, no uv.toml): everything is passed explicitly."""

    name = "uv"

    def _base(self, python: Path, verb: str) -> List[str]:
        argv = [*uv_command(), "pip", verb, "--python", str(python), "--no-config"]
        return argv + (["--cache-dir", str(self.cache_dir)] if self.cache_dir else [])

    def _install(
        self,
        python: Path,
        request: InstallRequest,
        *,
        log: Path,
        env: Optional[Mapping[str, str]],
        on_line: Optional[LineHook],
    ) -> None:
        argv = self._base(python, "install") + ["--index-strategy", "unsafe-best-match", *request.flags()]
        env = self.settings.uv_env(uv_command(), env)
        run_logged(
            argv,
            log,
            env=env,
            on_line=on_line,
            what="uv pip install",
            explain=triage,
            writes=Path(python).parent.parent,
        )

    def uninstall(self, python: Path, names: Sequence[str], *, log: Path) -> None:
        run_logged(
            self._base(python, "uninstall") + list(names),
            log,
            env=self.settings.uv_env(uv_command()),
            what="uv pip uninstall",
            explain=triage,
        )


def installer_for(name: InstallerName, settings: PipSettings, cache_dir: Optional[Path] = None) -> Installer:
    """The installer `name` names (`--installer`, checked by its parser's choices and the options model)."""
    kinds: Dict[InstallerName, Type[Installer]] = {"pip": PipInstaller, "uv": UvInstaller}
    return kinds[name](settings, cache_dir)
