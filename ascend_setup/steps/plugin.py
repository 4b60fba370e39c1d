"""vllm-ascend: the wheel when the host can take one, else a source build on the persistent disk."""

from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path
from typing import Any, Dict, List

from rich.progress import BarColumn, DownloadColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ascend_setup.dists.installers import InstallRequest
from ascend_setup.engine.step import Step
from ascend_setup.errors import StepFailed
from ascend_setup.index.download import download
from ascend_setup.index.simple import SimpleIndex
from ascend_setup.knowledge.scan import triage
from ascend_setup.resolve.lockfile import LockedPackage
from ascend_setup.sourcebuild import thirdparty
from ascend_setup.sourcebuild.jobs import host_job_budget
from ascend_setup.sourcebuild.kernel_meta import sweep_kernel_meta_locks
from ascend_setup.sourcebuild.kernels import missing_kernels
from ascend_setup.sourcebuild.source import build_env, cached_wheel, list_wheels, stage_watcher, wheelhouse_key
from ascend_setup.sourcebuild.tree import build_key, tree_for
from ascend_setup.steps.install_session import InstallSession
from ascend_setup.steps.mirror import ChooseMirror
from ascend_setup.steps.outputs import PluginInstalled
from ascend_setup.steps.packages import install_locked, slice_of, unmet
from ascend_setup.steps.preflight import Preflight
from ascend_setup.utils.files import open_append
from ascend_setup.utils.procs import run_logged


def alternate_urls(ctx: InstallSession, filename: str) -> List[str]:
    """The same file on the other fresh mirrors, so a stalled download continues elsewhere."""
    urls = []
    choice = ctx.recorded(ChooseMirror)
    for index in choice.fallbacks if choice else []:
        page = SimpleIndex(index).project("vllm-ascend")
        urls += [f.url for f in page.files if f.filename == filename]
    return urls


def _note(log: Path, *lines: str) -> None:
    with open_append(log) as handle:
        handle.writelines(line + "\n" for line in lines)


def wheel_lacks_kernels(wheel: Path, soc: str) -> List[str]:
    """The compiled custom ops a wheel should hold and does not."""
    with zipfile.ZipFile(wheel) as archive:
        return missing_kernels(archive.namelist(), soc)


class VllmAscend(Step[PluginInstalled]):
    """install vllm-ascend: a wheel if one fits this host, else build it from source (resumable)"""

    name = "vllm-ascend"
    Output = PluginInstalled
    depends_on = ("triton",)

    def inputs(self, ctx: InstallSession) -> Dict[str, Any]:
        return {"packages": [f"{p.requirement()} {p.sha256 or ''}" for p in slice_of(ctx, self.name)], "soc": ctx.soc}

    def is_done(self, ctx: InstallSession) -> bool:
        locked = slice_of(ctx, self.name)
        return bool(locked) and not unmet(ctx, locked)

    def run(self, ctx: InstallSession, log: Path) -> PluginInstalled:
        locked = slice_of(ctx, self.name)
        if not locked or locked[0].outcome == "unavailable":
            raise StepFailed(
                f"the lock has no file for vllm-ascend {ctx.the_row.packages['vllm-ascend']}",
                hint=locked[0].reason if locked else "rerun: the resolve step makes the lock again",
            )
        plugin = locked[0]
        _note(log, f"forecast: {plugin.outcome} {plugin.file or ''} {plugin.reason or ''}")
        if plugin.outcome == "wheel":
            install_locked(ctx, self.name, locked, log)
            return PluginInstalled(source="wheel", file=plugin.file)
        wheel = self._built_wheel(ctx, plugin, log)
        ctx.installer().install(ctx.python, InstallRequest(requirements=[str(wheel)]), log=log)
        return PluginInstalled(source="built", file=wheel.name, reason=plugin.reason)

    def _built_wheel(self, ctx: InstallSession, plugin: LockedPackage, log: Path) -> Path:
        pre = ctx.get(Preflight)
        soc = ctx.soc
        if not soc:
            raise StepFailed(
                "vllm-ascend must be built from source and no SOC_VERSION is known "
                f"({pre.npu_error or 'no NPU found'})",
                hint="pass --soc, e.g. --soc ascend910b1 (Atlas A2 images use ascend910b1)",
            )
        key = wheelhouse_key(
            version=plugin.version or "",
            cann=pre.cann_version,
            arch=pre.arch,
            python=pre.python_minor,
            glibc=pre.glibc or "unknown",
            soc=soc,
        )
        wheelhouse = ctx.workdir.wheelhouse
        cached = cached_wheel(wheelhouse, key) or (cached_wheel(ctx.bundle.wheelhouse, key) if ctx.bundle else None)
        if cached is not None and not wheel_lacks_kernels(cached, soc):
            _note(log, f"reusing {cached} (key {key})")
            return cached
        if cached is not None:
            _note(log, f"not reusing {cached}: it lacks {', '.join(wheel_lacks_kernels(cached, soc))}")
        sdist = self._download(ctx, plugin, log)
        tree = tree_for(
            sdist, ctx.workdir.src, build_key(soc=soc, cann=pre.cann_version, torch=ctx.the_row.packages["torch"])
        )
        _note(log, f"build tree {tree.path}: {tree.case}")
        ctx.console.print(f"note: vllm-ascend build tree: {tree.case}", soft_wrap=True, markup=False)
        source = tree.path
        self._prefetch(ctx, source, log)
        removed = sweep_kernel_meta_locks(source)
        for lock in removed:
            _note(log, f"removed stale compile lock {lock.path} (pid {lock.pid} is gone)")
        budget = host_job_budget(ctx.options.jobs)
        home = ctx.workdir.build_home
        home.mkdir(parents=True, exist_ok=True)
        built_env = build_env(
            ctx.cann_env(),
            host=os.environ,
            venv=ctx.venv,
            soc=soc,
            jobs=budget.jobs,
            ascend_home=pre.cann_toolkit,
            home=home,
        )
        _note(log, f"MAX_JOBS={budget.jobs} ({budget.why}); HOME={home}; PATH starts with {ctx.venv}/bin")
        for note in built_env.notes:
            _note(log, f"note: {note}")
            ctx.console.print(f"note: {note}", soft_wrap=True, markup=False)
        building = wheelhouse / f".building-{key}"
        if building.exists():
            shutil.rmtree(building)  # ours: a wheel half-written by a killed build
        building.mkdir(parents=True)
        with Progress(
            TextColumn("building vllm-ascend"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=ctx.console,
            transient=True,
        ) as progress:
            task = progress.add_task("build", total=None)
            run_logged(
                [
                    ctx.python,
                    "-m",
                    "pip",
                    "wheel",
                    "-v",
                    "--no-build-isolation",
                    "--no-deps",
                    "--disable-pip-version-check",
                    "--wheel-dir",
                    str(building),
                    str(source),
                ],
                log,
                env=built_env.env,
                on_line=stage_watcher(lambda n, m: progress.update(task, completed=n, total=m)),
                what="vllm-ascend build",
                explain=triage,
            )
        built = list_wheels(building)
        if not built:
            raise StepFailed("the vllm-ascend build produced no wheel", hint=f"see {log}")
        lacking = wheel_lacks_kernels(built[0], soc)
        if lacking:
            shutil.rmtree(building)
            raise StepFailed(
                f"the vllm-ascend build made {built[0].name} without {', '.join(lacking)}; it is not kept",
                hint=f"the build log {log} shows why the custom ops were skipped",
            )
        final_dir = wheelhouse / key
        final_dir.mkdir(parents=True, exist_ok=True)
        final = final_dir / built[0].name
        os.replace(built[0], final)
        shutil.rmtree(building)
        return final

    def _prefetch(self, ctx: InstallSession, tree: Path, log: Path) -> None:
        """The archives csrc's CMake would download, fetched now so that the build needs no network."""
        archives = thirdparty.read_archives(tree)
        cache = ctx.bundle.third_party if ctx.bundle else ctx.workdir.third_party  # a bundle's are verified here
        mirror = ctx.options.build_deps_url
        thirdparty.gate(archives, cache, mirror)
        with Progress(
            TextColumn("downloading {task.description}"),
            BarColumn(),
            DownloadColumn(),
            console=ctx.console,
            transient=True,
        ) as progress:
            tasks: Dict[str, Any] = {}

            def shown(name: str, done: int, total: Any) -> None:
                if name not in tasks:
                    tasks[name] = progress.add_task(name, total=total)
                progress.update(tasks[name], completed=done, total=total)

            lines = thirdparty.fetch(archives, cache, mirror, on_progress=shown)
        thirdparty.place(archives, cache, tree)
        _note(log, *lines)

    def _download(self, ctx: InstallSession, plugin: LockedPackage, log: Path) -> Path:
        assert plugin.url and plugin.file
        if ctx.bundle is not None:
            return ctx.bundle.file(plugin.file, plugin.sha256)
        with Progress(
            TextColumn(f"downloading {plugin.file}"), BarColumn(), DownloadColumn(), console=ctx.console, transient=True
        ) as progress:
            task = progress.add_task("download", total=plugin.size)

            def failover(url: str, why: str) -> None:
                with open_append(log) as handle:
                    handle.write(f"download from {url} stopped ({why}); trying the next mirror\n")

            return download(
                [plugin.url, *alternate_urls(ctx, plugin.file)],
                ctx.workdir.src / plugin.file,
                sha256=plugin.sha256,
                size=plugin.size,
                on_progress=lambda done, total: progress.update(task, completed=done, total=total),
                on_failover=failover,
            )
