"""venv: a clean venv (no system site-packages) on the workdir, the lock's pip, indexes configured in it.

The venv's pip is never upgraded by itself. The venv is made `--without-pip`, and the lock's pip is
installed into it by uv (a runtime dependency of this tool), whatever `--installer` says. A pip that
upgrades itself runs from the files it is replacing: a kill mid-way leaves two versions in one package
and an installer that cannot start (`cannot import name ... from pip._internal`), so no later run could
repair it with it. uv runs from its own binary: a kill mid-way leaves a pip whose RECORD does not
match, which the interrupted-step check sees and uv reinstalls with --force-reinstall. (Rejected:
ensurepip, which installs its bundled pip, not the lock's, with pip itself; a venv built in a temp dir
and renamed, since a venv is not relocatable: its scripts name its path.)
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Dict

from ascend_setup.dists.venv_reader import (
    VenvRecord,
    leftovers_only,
    read_pyvenv_cfg,
    read_venv_record,
    write_venv_record,
)
from ascend_setup.engine.step import Step
from ascend_setup.errors import BadInput, StepFailed
from ascend_setup.host.interpreters import probe
from ascend_setup.knowledge.scan import triage
from ascend_setup.mirrors.apply import venv_config_matches, write_venv_config
from ascend_setup.steps.common import installed_versions
from ascend_setup.steps.install_session import InstallSession
from ascend_setup.steps.outputs import VenvMade
from ascend_setup.steps.packages import install_locked, repair_damaged, slice_of, unmet
from ascend_setup.steps.preflight import Preflight
from ascend_setup.steps.resolve import Resolve
from ascend_setup.utils.diskfull import DiskFull
from ascend_setup.utils.procs import run_logged


class CreateVenv(Step[VenvMade]):
    """create a clean venv, upgrade pip, point it at the chosen index"""

    name = "venv"
    Output = VenvMade
    depends_on = ("preflight", "mirror", "resolve")

    def inputs(self, ctx: InstallSession) -> Dict[str, Any]:
        pre = ctx.recorded(Preflight)
        return {
            "venv": str(ctx.venv),
            "python": pre and pre.python,
            "python_version": pre and pre.python_version,
            "packages": [p.requirement() for p in slice_of(ctx, self.name)],
        }

    def is_done(self, ctx: InstallSession) -> bool:
        return self.why_not_done(ctx) == ""

    def why_not_done(self, ctx: InstallSession) -> str:
        cfg = read_pyvenv_cfg(ctx.venv)
        pre = ctx.recorded(Preflight)
        if cfg is None:
            return f"{ctx.venv} is not a venv"
        if cfg.get("include-system-site-packages", "false").lower() == "true":
            return "the venv includes system site-packages"
        interp = probe(str(ctx.python))
        want = pre.python_version if pre else None
        if interp is None or interp.version != want:
            return f"the venv's interpreter is {interp.version if interp else 'not runnable'}, not {want}"
        problems = unmet(ctx, slice_of(ctx, self.name)) or ([] if "pip" in installed_versions(ctx) else ["no pip"])
        if problems:
            return "; ".join(problems)
        idx = ctx.indexes
        if not venv_config_matches(ctx.venv, idx.index_url, idx.extra_index_urls):
            return "the venv's pip.conf / uv.toml do not name the chosen index"
        return "" if read_venv_record(ctx.venv) is not None else "the venv's ascend-setup.json is missing"

    def repair_interrupted(self, ctx: InstallSession, log: Path) -> None:
        """The installer itself first (the interpreter, then pip's own files): every later step needs it."""
        self._make(ctx, log)
        if ctx.lock() is not None:
            repair_damaged(ctx, self.name, slice_of(ctx, self.name), log, installer=ctx.venv_installer())

    def _make(self, ctx: InstallSession, log: Path) -> None:
        """`python -m venv` completes a half-made venv (safe after a kill at any point). An interpreter that
        still does not run is recreated when ascend-setup made the venv; a venv it did not make is never
        deleted."""
        venv = ctx.venv
        pre = ctx.get(Preflight)
        cfg = read_pyvenv_cfg(venv)
        record = read_venv_record(venv)
        if cfg is None and record is None:
            if venv.exists() and leftovers_only(venv):
                raise BadInput(
                    f"--venv {venv} exists, is not empty and is not a venv",
                    hint="choose another --venv; ascend-setup never deletes what it did not create",
                )
            venv.mkdir(parents=True, exist_ok=True)
            for stale in venv.iterdir():  # the temp file of a record write a kill interrupted: ours
                stale.unlink()
            self._record(ctx, created=True)  # before `python -m venv`: it proves the venv is ours to recreate
            record = read_venv_record(venv)
        if cfg is not None:
            if cfg.get("include-system-site-packages", "false").lower() == "true":
                raise StepFailed(
                    f"{venv} includes system site-packages (stale torch builds leak in)",
                    hint="pass a new --venv; ascend-setup does not rewrite a venv it did not create",
                )
            have = cfg.get("version") or cfg.get("version_info") or ""
            if have and ".".join(have.split(".")[:2]) != pre.python_minor:
                raise StepFailed(
                    f"{venv} was made with Python {have}, not {pre.python_version}",
                    hint="pass a new --venv (or --python matching it)",
                )
        created = record is not None and record.created
        argv = [pre.python, "-m", "venv", "--without-pip", str(venv)]
        try:
            run_logged(argv, log, what="python -m venv", explain=triage)
            broken = "" if probe(str(ctx.python)) is not None else f"its interpreter {ctx.python} does not run"
        except DiskFull:
            raise  # not broken: full (deleting it would lose every package already installed)
        except StepFailed as exc:
            broken = exc.message
        if broken:
            if not created:
                raise StepFailed(
                    f"the venv {venv} is broken ({broken}), and ascend-setup did not make it, so it will not delete it",
                    hint="repair or remove it yourself, or pass another --venv",
                )
            shutil.rmtree(venv)
            venv.mkdir(parents=True)
            self._record(ctx, created=True)
            run_logged(argv, log, what="python -m venv (recreating the broken venv)", explain=triage)

    def _record(self, ctx: InstallSession, created: bool) -> None:
        idx = ctx.indexes
        lock, ref = ctx.lock(), ctx.recorded(Resolve)
        write_venv_record(
            ctx.venv,
            VenvRecord(
                workdir=str(ctx.root),
                lock=ref.lock if ref else None,
                indexes=dict(lock.indexes) if lock else {"mirror": idx.index_url},
                created=created,
            ),
        )

    def run(self, ctx: InstallSession, log: Path) -> VenvMade:
        venv = ctx.venv
        self._make(ctx, log)
        record = read_venv_record(venv)
        install_locked(ctx, self.name, slice_of(ctx, self.name), log, installer=ctx.venv_installer())
        idx = ctx.indexes
        write_venv_config(venv, idx.index_url, idx.extra_index_urls)
        self._record(ctx, created=record is not None and record.created)
        return VenvMade(pip=installed_versions(ctx).get("pip"))
