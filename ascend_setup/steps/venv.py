"""venv: a clean venv (no system site-packages) on the workdir, pip upgraded, indexes configured in it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

from ascend_setup.errors import BadInput, StepFailed
from ascend_setup.host.interpreters import probe
from ascend_setup.mirrors.apply import venv_config_matches, write_venv_config
from ascend_setup.procs import run_logged
from ascend_setup.steps.base import Context, Step
from ascend_setup.steps.common import indexes_of, installed_versions, lock_of, python_of, venv_dir
from ascend_setup.steps.packages import install_locked, slice_of, unmet
from ascend_setup.venvinfo import VenvRecord, read_pyvenv_cfg, read_venv_record, write_venv_record


class CreateVenv(Step):
    """create a clean venv, upgrade pip, point it at the chosen index"""

    name = "venv"
    depends_on = ("preflight", "mirror", "resolve")

    def inputs(self, ctx: Context) -> Dict[str, Any]:
        pre = ctx.outputs.get("preflight", {})
        return {"venv": str(venv_dir(ctx)), "python": pre.get("python"), "python_version": pre.get("python_version"),
                "packages": [p.requirement() for p in slice_of(ctx, self.name)]}

    def is_done(self, ctx: Context) -> bool:
        return self.why_not_done(ctx) == ""

    def why_not_done(self, ctx: Context) -> str:
        cfg = read_pyvenv_cfg(venv_dir(ctx))
        pre = ctx.outputs.get("preflight", {})
        if cfg is None:
            return f"{venv_dir(ctx)} is not a venv"
        if cfg.get("include-system-site-packages", "false").lower() == "true":
            return "the venv includes system site-packages"
        interp = probe(str(python_of(ctx)))
        if interp is None or interp.version != pre.get("python_version"):
            return f"the venv's interpreter is {interp.version if interp else 'not runnable'}, not " \
                   f"{pre.get('python_version')}"
        problems = unmet(ctx, slice_of(ctx, self.name)) or ([] if "pip" in installed_versions(ctx) else ["no pip"])
        if problems:
            return "; ".join(problems)
        idx = indexes_of(ctx)
        if not venv_config_matches(venv_dir(ctx), idx.index_url, idx.extra_index_urls):
            return "the venv's pip.conf / uv.toml do not name the chosen index"
        return "" if read_venv_record(venv_dir(ctx)) is not None else "the venv's ascend-setup.json is missing"

    def run(self, ctx: Context, log: Path) -> Dict[str, Any]:
        venv = venv_dir(ctx)
        pre = ctx.outputs["preflight"]
        cfg = read_pyvenv_cfg(venv)
        if cfg is None and venv.exists() and any(venv.iterdir()) and not (venv / "bin").exists():
            raise BadInput(f"--venv {venv} exists, is not empty and is not a venv",
                           hint="choose another --venv; ascend-setup never deletes what it did not create")
        if cfg is not None:
            if cfg.get("include-system-site-packages", "false").lower() == "true":
                raise StepFailed(f"{venv} includes system site-packages (stale torch builds leak in)",
                                 hint="pass a new --venv; ascend-setup does not rewrite a venv it did not create")
            have = cfg.get("version") or cfg.get("version_info") or ""
            if have and ".".join(have.split(".")[:2]) != ".".join(pre["python_version"].split(".")[:2]):
                raise StepFailed(f"{venv} was made with Python {have}, not {pre['python_version']}",
                                 hint="pass a new --venv (or --python matching it)")
        # `python -m venv` on a half-made venv completes it: safe after a kill at any point.
        run_logged([pre["python"], "-m", "venv", str(venv)], log, what="python -m venv")
        install_locked(ctx, self.name, slice_of(ctx, self.name), log)  # the lock's pip
        idx = indexes_of(ctx)
        write_venv_config(venv, idx.index_url, idx.extra_index_urls)
        lock = lock_of(ctx)
        write_venv_record(venv, VenvRecord(workdir=str(ctx.workdir), lock=(ctx.outputs.get("resolve") or {}).get("lock"),
                                           indexes=dict(lock.indexes) if lock else {"mirror": idx.index_url}))
        return {"pip": installed_versions(ctx).get("pip")}
