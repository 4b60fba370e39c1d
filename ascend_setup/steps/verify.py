"""verify: in the venv's own interpreter, with CANN's environment, the stack imports at the row's versions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

from ascend_setup.errors import StepFailed
from ascend_setup.procs import capture
from ascend_setup.matrix.models import Row
from ascend_setup.steps.base import Context, Step
from ascend_setup.steps.common import cann_env, python_of, row_of, venv_dir
from ascend_setup.steps.triton import triton_check
from ascend_setup.fsutil import open_append

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


def problems(ctx: Context) -> List[str]:
    """Why the venv does not yet serve the row (empty when it does)."""
    proc = capture([python_of(ctx), "-c", PROBE, json.dumps(MODULES)], env=cann_env(ctx), timeout=600)
    try:
        result = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return [f"the venv's Python could not run the import check: {(proc.stderr or proc.stdout).strip()[-300:]}"]
    found = []
    row = row_of(ctx)
    for dist, info in result.items():
        if not info["ok"]:
            found.append(f"import of {dist} fails: {info['error']}")
        elif info["version"] != row.packages[dist]:
            found.append(f"{dist} is {info['version']}, the row says {row.packages[dist]}")
    triton = triton_check(ctx)
    if triton:
        found.append(f"triton check: {triton}")
    return found


def shell_lines(ctx: Context) -> List[str]:
    scripts = ctx.outputs.get("preflight", {}).get("set_env", [])
    return [f"source {s}" for s in scripts] + [f"source {venv_dir(ctx)}/bin/activate"]


def serving_hints(ctx: Context) -> List[str]:
    return hints_for(row_of(ctx))


def hints_for(row: Row) -> List[str]:
    """The row's serving hints as lines a person can act on (text, env, serve arguments)."""
    hints = []
    for hint in row.runtime_hints:
        extra = " ".join(f"{k}={v}" for k, v in hint.env.items())
        args = " ".join(f"'{a}'" if " " in a or "{" in a else a for a in hint.serve_args)
        hints.append(" ".join(filter(None, [hint.text, extra, args])))
    return hints


class Verify(Step):
    """import torch, torch_npu, vllm, vllm_ascend in the venv; versions equal the row; triton works"""

    name = "verify"
    depends_on = ("vllm-ascend",)

    def inputs(self, ctx: Context) -> Dict[str, Any]:
        return {"pins": {d: row_of(ctx).packages[d] for d in MODULES.values()}}

    def is_done(self, ctx: Context) -> bool:
        return not problems(ctx)

    def run(self, ctx: Context, log: Path) -> Dict[str, Any]:
        found = problems(ctx)
        with open_append(log) as handle:
            handle.write("\n".join(found or ["all imports and versions match the row; triton kernel[grid] works"]))
            handle.write("\n")
        if found:
            raise StepFailed("verification failed: " + "; ".join(found), hint="ascend-setup audit --venv "
                             f"{venv_dir(ctx)} shows what to fix")
        return {"shell": shell_lines(ctx), "hints": serving_hints(ctx)}
