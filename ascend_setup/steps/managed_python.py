"""python: the managed CPython preflight chose (no interpreter in the row's range on the host, or --python
managed), installed under the workdir before anything needs it. A host whose interpreter fits skips it."""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any, Dict, Optional

from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn

from ascend_setup.engine.step import Step
from ascend_setup.errors import AscendSetupError
from ascend_setup.host.interpreters import probe
from ascend_setup.managed.pinned import PythonBuild, PythonBuilds
from ascend_setup.managed.uv_python import fetch_archive, install_build
from ascend_setup.steps.install_session import InstallSession
from ascend_setup.steps.outputs import ManagedPython
from ascend_setup.steps.preflight import Preflight
from ascend_setup.utils.paths import cache_dir


class InstallManagedPython(Step[ManagedPython]):
    """install the managed CPython the venv is made from (when the host has none in the row's range)"""

    name = "python"
    Output = ManagedPython
    depends_on = ("preflight",)

    def _build(self, ctx: InstallSession, builds: PythonBuilds) -> Optional[PythonBuild]:
        facts = ctx.get(Preflight)
        if not facts.managed:
            return None
        build = builds.find(facts.python_minor, platform.machine())
        if build is None or build.key != facts.managed:
            raise AscendSetupError(
                f"the pinned builds no longer hold {facts.managed}, which preflight chose",
                hint="run again: preflight chooses anew when its inputs change",
            )
        return build

    def inputs(self, ctx: InstallSession) -> Dict[str, Any]:
        facts = ctx.recorded(Preflight)
        return {"managed": facts.managed if facts else None}

    def is_done(self, ctx: InstallSession) -> bool:
        return self.why_not_done(ctx) == ""

    def why_not_done(self, ctx: InstallSession) -> str:
        facts = ctx.recorded(Preflight)
        if facts is None:
            return "preflight decides whether the host's Python will do"
        if not facts.managed:
            return ""  # the host's interpreter: nothing to install
        interp = probe(facts.python)
        if interp is None:
            return f"the managed Python {facts.python} is not installed or does not run"
        if interp.version != facts.python_version or not interp.has_venv:
            return f"the managed Python {facts.python} is {interp.version}, not {facts.python_version} with venv"
        return ""

    def _archive(self, ctx: InstallSession, builds: PythonBuilds, build: PythonBuild, log: Path) -> Path:
        bundle = ctx.bundle
        offline = bundle.python_archive(build) if bundle is not None else None
        with Progress(
            TextColumn(f"downloading {build.file}"), BarColumn(), DownloadColumn(), console=ctx.console, transient=True
        ) as progress:
            task = progress.add_task("download", total=None)
            return fetch_archive(
                builds,
                build,
                ctx.workdir.downloads,
                log,
                mirror=ctx.options.python_mirror,
                offline_copy=offline,
                on_progress=lambda done, total: progress.update(task, completed=done, total=total),
            )

    def run(self, ctx: InstallSession, log: Path) -> ManagedPython:
        builds = ctx.python_builds()
        build = self._build(ctx, builds)
        if build is None:
            return ManagedPython()
        archive = self._archive(ctx, builds, build, log)
        # A folder already there is one this step left: not done, or stopped mid-way (uv may have moved it in
        # before fixing up its build-time paths, and such a folder may even run): uv installs it anew.
        interp = install_build(
            build,
            archive,
            ctx.workdir.pythons,
            cache_dir() / "uv",
            log,
            network=ctx.the_pip_settings.network,
            reinstall=(ctx.workdir.pythons / build.key).exists(),
        )
        return ManagedPython(python=interp.path, version=interp.version, archive=str(archive))
