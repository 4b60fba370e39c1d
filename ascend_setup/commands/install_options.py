"""`install`'s options model, apart from its command: it is built on the recorded `InstallOptions` (the steps'
room), which `install --help` must not load; the parser names it lazily (`LazyOptions`)."""

from __future__ import annotations

from typing import Optional

from ascend_setup.cli.command import Options
from ascend_setup.steps.options import InstallOptions


class InstallCommandOptions(InstallOptions, Options):
    """`install`'s flags: the options it records (InstallOptions), before the paths are resolved, and what
    only this run is asked (a dry run, no question, the resume-on-login block's on/off/untouched)."""

    workdir: Optional[str] = None  # type: ignore[assignment]  # resolved: flag, variable, default
    venv: Optional[str] = None  # type: ignore[assignment]
    resume_on_login: Optional[bool] = None  # type: ignore[assignment]  # None: neither flag was given
    matrix: Optional[str] = None  # type: ignore[assignment]  # recorded as given: resolved with the paths
    dry_run: bool = False
    yes: bool = False
