"""pip and uv behind one small interface (pipx's Backend idea): the steps never build argv by hand."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Mapping, Optional, Sequence

from ascend_setup.errors import StepFailed
from ascend_setup.procs import LineHook, run_logged


@dataclass(frozen=True)
class Indexes:
    """Where packages come from for one command: the chosen mirror plus the extra indexes."""

    index_url: str
    extra_index_urls: Sequence[str] = field(default_factory=tuple)

    def args(self) -> List[str]:
        argv = ["--index-url", self.index_url]
        for extra in self.extra_index_urls:
            argv += ["--extra-index-url", extra]
        return argv


class Installer(ABC):
    name: str

    @abstractmethod
    def install(self, python: Path, requirements: Sequence[str], *, log: Path, indexes: Indexes,
                constraints: Optional[Path] = None, overrides: Optional[Path] = None, no_deps: bool = False,
                force_reinstall: bool = False, upgrade: bool = False, only_binary: Sequence[str] = (),
                env: Optional[Mapping[str, str]] = None, on_line: Optional[LineHook] = None) -> None:
        """Install `requirements` into the venv whose interpreter is `python`."""

    @abstractmethod
    def uninstall(self, python: Path, names: Sequence[str], *, log: Path) -> None:
        """Remove distributions by name."""


def _common_flags(*, no_deps: bool, force_reinstall: bool, upgrade: bool, only_binary: Sequence[str]) -> List[str]:
    argv = []
    if no_deps:
        argv.append("--no-deps")
    if force_reinstall:
        argv.append("--force-reinstall")
    if upgrade:
        argv.append("--upgrade")
    if only_binary:
        argv += ["--only-binary", ",".join(only_binary)]
    return argv


class PipInstaller(Installer):
    name = "pip"

    def install(self, python, requirements, *, log, indexes, constraints=None, overrides=None, no_deps=False,
                force_reinstall=False, upgrade=False, only_binary=(), env=None, on_line=None) -> None:
        argv = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
                *indexes.args(), *_common_flags(no_deps=no_deps, force_reinstall=force_reinstall, upgrade=upgrade,
                                                only_binary=only_binary)]
        for path in (constraints, overrides):  # pip has no overrides: row pins go in as constraints
            if path is not None:
                argv += ["-c", str(path)]
        run_logged(argv + list(requirements), log, env=env, on_line=on_line, what="pip install")

    def uninstall(self, python, names, *, log) -> None:
        run_logged([str(python), "-m", "pip", "uninstall", "-y", *names], log, what="pip uninstall")


def uv_command() -> List[str]:
    """uv on PATH, else the one the `uv` package ships for this interpreter."""
    found = shutil.which("uv")
    if found:
        return [found]
    if importlib.util.find_spec("uv") is not None:
        return [sys.executable, "-m", "uv"]
    raise StepFailed("--installer uv: uv is not installed", hint="pip install uv, or use --installer pip")


class UvInstaller(Installer):
    """uv reads no pip.conf: everything is passed explicitly. Indexes are merged the way pip merges
    them (unsafe-best-match), so both installers pick the same files."""

    name = "uv"

    def install(self, python, requirements, *, log, indexes, constraints=None, overrides=None, no_deps=False,
                force_reinstall=False, upgrade=False, only_binary=(), env=None, on_line=None) -> None:
        argv = [*uv_command(), "pip", "install", "--python", str(python), "--index-strategy", "unsafe-best-match",
                *indexes.args(), *_common_flags(no_deps=no_deps, force_reinstall=force_reinstall, upgrade=upgrade,
                                                only_binary=only_binary)]
        if constraints is not None:
            argv += ["-c", str(constraints)]
        if overrides is not None:
            argv += ["--override", str(overrides)]
        run_logged(argv + list(requirements), log, env=env, on_line=on_line, what="uv pip install")

    def uninstall(self, python, names, *, log) -> None:
        run_logged([*uv_command(), "pip", "uninstall", "--python", str(python), *names], log, what="uv pip uninstall")


def get_installer(name: str) -> Installer:
    return UvInstaller() if name == "uv" else PipInstaller()
