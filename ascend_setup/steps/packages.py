"""cann-python-deps, torch-stack, vllm, plugin-deps: the pip installs, each checked against the venv."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

from packaging.specifiers import SpecifierSet

from ascend_setup.audit.venv import read_venv
from ascend_setup.deps.derive import Derived, cann_requirements, constraints_lines, derive, target_environment
from ascend_setup.errors import StepFailed
from ascend_setup.index.choose import Choice, choose
from ascend_setup.index.metadata import MetadataReader
from ascend_setup.index.simple import IndexSet
from ascend_setup.index.tags import Target
from ascend_setup.steps.base import Context, Step
from ascend_setup.steps.common import (indexes_of, installed_versions, installer_of, pins, python_of, row_of,
                                       satisfied, venv_dir, write_lines)

TORCH_STACK = ["torch", "torch-npu", "torchvision", "torchaudio"]


def constraints_file(ctx: Context) -> Path:
    """Every row pin; pip's -c (and uv's --override) keep them from moving."""
    return write_lines(ctx.workdir / "constraints.txt", constraints_lines(row_of(ctx)))


def _pin_inputs(ctx: Context, names: List[str]) -> Dict[str, Any]:
    idx = indexes_of(ctx)
    return {"pins": {n: row_of(ctx).packages[n] for n in names}, "index": idx.index_url,
            "extra": list(idx.extra_index_urls), "installer": ctx.options.get("installer", "pip")}


class CannPythonDeps(Step):
    """install the CANN operator compiler's Python dependencies (decorator, sympy, ...)"""

    name = "cann-python-deps"
    depends_on = ("venv",)

    def requirements(self, ctx: Context) -> Dict[str, str]:
        return {n: (f">={m}" if m else "") for n, m in row_of(ctx).cann_python_deps.items()}

    def inputs(self, ctx: Context) -> Dict[str, Any]:
        return {"requirements": self.requirements(ctx), **_pin_inputs(ctx, [])}

    def is_done(self, ctx: Context) -> bool:
        return not satisfied(installed_versions(ctx), self.requirements(ctx))

    def run(self, ctx: Context, log: Path) -> None:
        installer_of(ctx).install(python_of(ctx), cann_requirements(row_of(ctx)), log=log, indexes=indexes_of(ctx),
                                  constraints=constraints_file(ctx))


class TorchStack(Step):
    """install torch, torch-npu, torchvision, torchaudio at exactly the row's versions"""

    name = "torch-stack"
    depends_on = ("cann-python-deps",)

    def inputs(self, ctx: Context) -> Dict[str, Any]:
        return _pin_inputs(ctx, TORCH_STACK)

    def is_done(self, ctx: Context) -> bool:
        return not satisfied(installed_versions(ctx), pins(row_of(ctx), TORCH_STACK))

    def run(self, ctx: Context, log: Path) -> None:
        row = row_of(ctx)
        installer_of(ctx).install(python_of(ctx), [f"{n}=={row.packages[n]}" for n in TORCH_STACK], log=log,
                                  indexes=indexes_of(ctx), constraints=constraints_file(ctx))


class Vllm(Step):
    """install vllm itself with --no-deps (its metadata would replace the row's torch)"""

    name = "vllm"
    depends_on = ("torch-stack",)

    def inputs(self, ctx: Context) -> Dict[str, Any]:
        return _pin_inputs(ctx, ["vllm"])

    def is_done(self, ctx: Context) -> bool:
        return not satisfied(installed_versions(ctx), pins(row_of(ctx), ["vllm"]))

    def run(self, ctx: Context, log: Path) -> None:
        installer_of(ctx).install(python_of(ctx), [f"vllm=={row_of(ctx).packages['vllm']}"], log=log,
                                  indexes=indexes_of(ctx), no_deps=True)


def host_target(ctx: Context) -> Target:
    pre = ctx.outputs["preflight"]
    return Target(glibc=pre["glibc"] or "2.17", arch=pre["arch"],
                  python=".".join(pre["python_version"].split(".")[:2]))


def forecast_plugin(ctx: Context) -> Choice:
    """The vllm-ascend file pip would take for this host, from the chosen indexes."""
    idx = indexes_of(ctx)
    indexes = IndexSet([idx.index_url, *idx.extra_index_urls])
    version = row_of(ctx).packages["vllm-ascend"]
    choice = choose("vllm-ascend", indexes.pages("vllm-ascend"), SpecifierSet(f"=={version}"), host_target(ctx))
    if choice.file is None:
        raise StepFailed(f"vllm-ascend {version} has no file for this host on {', '.join(indexes.urls)}",
                         hint=choice.reason)
    return choice


def plugin_requires(ctx: Context) -> List[str]:
    """vllm-ascend's Requires-Dist, read from the index without downloading the file."""
    return MetadataReader().requires(forecast_plugin(ctx).file)


class PluginDeps(Step):
    """install vllm's requirements minus CUDA-only ones, the plugin's pins winning, row pins held"""

    name = "plugin-deps"
    depends_on = ("vllm",)

    def inputs(self, ctx: Context) -> Dict[str, Any]:
        return _pin_inputs(ctx, list(row_of(ctx).packages))

    def is_done(self, ctx: Context) -> bool:
        wanted = (ctx.outputs.get(self.name) or {}).get("requirements")
        if wanted is None:
            return False
        installed = installed_versions(ctx)
        return not satisfied(installed, wanted) and not satisfied(installed, pins(row_of(ctx), TORCH_STACK))

    def run(self, ctx: Context, log: Path) -> Dict[str, Any]:
        row = row_of(ctx)
        vllm = read_venv(venv_dir(ctx)).get("vllm")
        if vllm is None:
            raise StepFailed("vllm is not installed in the venv", hint="rerun: the vllm step installs it")
        target = host_target(ctx)
        env = target_environment(target)
        env["python_full_version"] = ctx.outputs["preflight"]["python_version"]
        derived = derive(row, vllm.requires, plugin_requires(ctx), env)
        _log_derived(log, derived)
        wanted = [d for d in derived if d.included]
        constraints = constraints_file(ctx)
        overrides = constraints if ctx.options.get("installer") == "uv" else None
        installer_of(ctx).install(python_of(ctx), [d.requirement() for d in wanted], log=log, indexes=indexes_of(ctx),
                                  constraints=None if overrides else constraints, overrides=overrides)
        displaced = satisfied(installed_versions(ctx), pins(row, TORCH_STACK))
        if displaced:
            raise StepFailed("the row's torch stack was displaced: " + "; ".join(displaced),
                             hint="this should not happen with the constraints file; see the step log")
        return {"requirements": {d.name: str(d.specifier) for d in wanted}}


def _log_derived(log: Path, derived: List[Derived]) -> None:
    with log.open("a", encoding="utf-8") as handle:
        handle.write("derived requirement set (in/out, requirement, why, sources):\n")
        for d in derived:
            handle.write(f"  {'IN ' if d.included else 'OUT'} {d.requirement():<45} {d.why}  "
                         f"[{'; '.join(d.sources)}]\n")
