"""The audit's native rule: every shared object of the venv, loaded as the loader would on this host (or on a
`--glibc` target), before anything imports it. A library that does not resolve is a finding even when the import
that loads it is wrapped in a `try` (vllm_ascend_C's missing GLIBC_2.3x is only a warning at start-up)."""

from __future__ import annotations

import os
from typing import List, Optional

from ascend_setup.audit.rules import AuditContext, Finding
from ascend_setup.knowledge.fixes import Host
from ascend_setup.native.advice import fix_for
from ascend_setup.native.venv_libs import NativeProblem, check_venv, host_target

#: The loader refuses all of these; a loop it copes with (said, since it is how a hostile file hangs a walk).
_SEVERITY = {"loop": "warning"}


def native_fix(item: NativeProblem, ctx: AuditContext, host: Optional[Host] = None) -> Optional[str]:
    """The triage fix, and for a glibc too old the command that gets this distribution built here."""
    fix = fix_for(item.problem, host)
    if item.problem.kind != "glibc":
        return fix
    if item.distribution == "vllm-ascend":
        build = (
            f"ascend-setup install --cann {ctx.row.cann} --venv {ctx.venv.root} (builds vllm-ascend "
            f"{item.version} from source on glibc {ctx.target.glibc})"
        )
    else:
        build = (
            f"{ctx.pip} install --no-deps --force-reinstall --no-binary {item.distribution} "
            f"{item.distribution}=={item.version}"
        )
    return f"{fix}: {build}"


def native_message(item: NativeProblem, root: str) -> str:
    problem = item.problem
    where = os.path.relpath(problem.library, root)
    through = f" (through {problem.through.name})" if problem.through else ""
    if problem.kind == "outside":
        return f"{item.distribution} {item.version}: its RECORD lists {where}, but {problem.detail}"
    verb = {"damaged": "is not a loadable library", "abi": "cannot load here"}.get(problem.kind)
    if verb:
        return f"{item.distribution} {item.version}: {where} {verb}: {problem.detail}"
    return f"{item.distribution} {item.version}: {where} needs {problem.needs}{through}: {problem.detail}"


def rule_native(ctx: AuditContext) -> List[Finding]:
    report = check_venv(ctx.venv, host_target(ctx.environ, ctx.glibc_target))
    host = Host.detect(soc=ctx.soc)
    return [
        Finding(
            f"native-{item.problem.kind}",
            _SEVERITY.get(item.problem.kind, "error"),
            item.distribution,
            native_message(item, str(ctx.venv.root)),
            native_fix(item, ctx, host),
            evidence=str(item.problem.through or item.problem.library),
        )
        for item in report.problems
    ]
