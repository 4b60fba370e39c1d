"""verify: in the venv's own interpreter, with CANN's environment, the stack imports at the row's versions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from ascend_setup.audit.native_rules import native_message
from ascend_setup.audit.rules import installed_device
from ascend_setup.dists.installed import read_venv
from ascend_setup.dists.venv_reader import site_packages
from ascend_setup.dists.versions import pin_verdict
from ascend_setup.engine.step import Step
from ascend_setup.errors import StepFailed
from ascend_setup.matrix.serve_hints import hint_lines as hints_for
from ascend_setup.matrix.soc import label
from ascend_setup.native.venv_libs import check_venv, host_target
from ascend_setup.sourcebuild.kernels import installed_files, missing_kernels
from ascend_setup.steps.install_session import InstallSession
from ascend_setup.steps.outputs import Verified
from ascend_setup.steps.preflight import Preflight
from ascend_setup.steps.triton import triton_check
from ascend_setup.utils.files import open_append
from ascend_setup.utils.procs import capture

MODULES = {"torch": "torch", "torch_npu": "torch-npu", "vllm": "vllm", "vllm_ascend": "vllm-ascend"}

PROBE = '''\
import importlib, importlib.metadata as md, json, sys
result = {}
for module, dist in json.loads(sys.argv[1]).items():
    try:
        importlib.import_module(module)
        result[dist] = {"ok": True, "version": md.version(dist)}
    except Exception as exc:
        result[dist] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
print(json.dumps(result))
'''


def import_problems(
    result: Dict[str, Any], pins: Mapping[str, str], found_versions: Optional[List[str]] = None
) -> List[str]:
    """The probe's imports that fail, and the versions the row's pins do not accept (each verdict said into
    `found_versions`)."""
    found = []
    for dist, info in result.items():
        if not info["ok"]:
            found.append(f"import of {dist} fails: {info['error']}")
            continue
        verdict = pin_verdict(dist, info["version"], pins[dist])
        if found_versions is not None:
            found_versions.append(verdict.said())
        if not verdict.accepted:
            found.append(verdict.note)
    return found


def problems(ctx: InstallSession, found_versions: Optional[List[str]] = None) -> List[str]:
    """Why the venv does not yet serve the row (empty when it does); `found_versions` gets each version found
    and its verdict (the version policy: a newer post release or a source build of the pin passes, said so)."""
    proc = capture([ctx.python, "-c", PROBE, json.dumps(MODULES)], env=ctx.cann_env(), timeout=600)
    try:
        result = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return [f"the venv's Python could not run the import check: {(proc.stderr or proc.stdout).strip()[-300:]}"]
    found = import_problems(result, ctx.the_row.packages, found_versions)
    if result.get("vllm-ascend", {}).get("ok"):
        found += kernel_problems(ctx)
    triton = triton_check(ctx)
    if triton:
        found.append(f"triton check: {triton}")
    device = device_problem(ctx)
    if device:
        found.append(device)
    return found + native_problems(ctx)


def native_problems(ctx: InstallSession) -> List[str]:
    """Every shared object of the venv, loaded as the loader would with CANN's environment: a library that does
    not resolve fails verify even when the import that loads it is wrapped in a `try` (the import check passes)."""
    venv = read_venv(ctx.venv)
    report = check_venv(venv, host_target(ctx.cann_env()))
    return [native_message(item, str(venv.root)) for item in report.problems if item.problem.kind != "loop"]


def device_problem(ctx: InstallSession) -> Optional[str]:
    """The installed vllm_ascend's device type against this host's: the import passes either way, and the
    worker's start-up assertion is what fails (None when they match or the host's is unknown)."""
    host = ctx.device
    built = installed_device(read_venv(ctx.venv)) if host else None
    if built is None or built[0] == host:
        return None
    return f"vllm_ascend was built for {label(built[0])} NPUs ({built[1]}) and this host's are {label(host)}"


def kernel_problems(ctx: InstallSession) -> List[str]:
    """The installed vllm-ascend must hold its compiled custom ops (a wheel built without them imports fine)."""
    soc = ctx.soc or ""
    names = [name for site in site_packages(ctx.venv) for name in installed_files(site)]
    missing = missing_kernels(names, soc)
    return [f"the installed vllm-ascend lacks {', '.join(missing)}"] if missing else []


def shell_lines(ctx: InstallSession) -> List[str]:
    facts = ctx.recorded(Preflight)
    scripts = facts.set_env if facts else []
    return [f"source {s}" for s in scripts] + [f"source {ctx.venv}/bin/activate"]


def serving_hints(ctx: InstallSession) -> List[str]:
    return hints_for(ctx.the_row)


class Verify(Step[Verified]):
    """import torch, torch_npu, vllm, vllm_ascend in the venv; versions equal the row; custom ops there; triton works"""

    name = "verify"
    Output = Verified
    depends_on = ("vllm-ascend",)

    def inputs(self, ctx: InstallSession) -> Dict[str, Any]:
        return {"pins": {d: ctx.the_row.packages[d] for d in MODULES.values()}}

    def is_done(self, ctx: InstallSession) -> bool:
        return not problems(ctx)

    def run(self, ctx: InstallSession, log: Path) -> Verified:
        versions: List[str] = []
        found = problems(ctx, versions)
        with open_append(log) as handle:
            handle.write(
                "\n".join(versions + (found or ["all imports and versions match the row; triton kernel[grid] works"]))
            )
            handle.write("\n")
        if found:
            raise StepFailed(
                "verification failed: " + "; ".join(found),
                hint=f"ascend-setup audit --venv {ctx.venv} shows what to fix",
            )
        return Verified(shell=shell_lines(ctx), hints=serving_hints(ctx))
