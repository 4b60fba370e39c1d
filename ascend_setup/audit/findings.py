"""Run the rules, pick the row, and turn findings into the minimal fix plan."""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ascend_setup.audit.native_rules import rule_native
from ascend_setup.audit.rules import (
    PHASE_FILL,
    PHASE_MANUAL,
    PHASE_PINS,
    PHASE_SHAPE,
    PHASE_TRITON,
    PHASE_UNINSTALL,
    RULES,
    AuditContext,
    Finding,
    rule_damaged_files,
)
from ascend_setup.dists.installed import VenvContents, read_venv
from ascend_setup.dists.versions import pin_verdict, same_release
from ascend_setup.matrix.load import select_row
from ascend_setup.matrix.models import Matrix, Row
from ascend_setup.resolve.lockfile import Lock

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


def summary(severities: List[str]) -> str:
    """One verdict that keeps errors, warnings and expected notes apart: infos are what a clean install
    has on purpose (CUDA-only packages left out, the wheelhouse URL), and a count of "findings" read as alarm."""
    errors, warnings, notes = (sum(s == k for s in severities) for k in ("error", "warning", "info"))
    noted = f"{notes} expected note{'s' * (notes != 1)}" if notes else ""
    if errors:
        return (
            "NOT clean ("
            + ", ".join(
                filter(
                    None,
                    [
                        f"{errors} error{'s' * (errors != 1)}",
                        f"{warnings} warning{'s' * (warnings != 1)}" if warnings else "",
                        noted,
                    ],
                )
            )
            + ")"
        )
    if warnings:
        return f"clean, with {warnings} warning{'s' * (warnings != 1)}" + (f" ({noted})" if noted else "")
    return f"clean ({noted})" if noted else "clean"


@dataclass
class AuditReport:
    venv: Path
    row: Row
    row_reason: str
    findings: List[Finding]
    plan: List[str]

    lock: Optional[str] = None

    @property
    def failed(self) -> bool:
        return any(f.severity == "error" for f in self.findings)

    def to_json(self) -> Dict[str, Any]:
        return {
            "venv": str(self.venv),
            "row": self.row.cann,
            "row_reason": self.row_reason,
            "lock": self.lock,
            "findings": [f.to_json() for f in self.findings],
            "fix_plan": self.plan,
            "ok": not self.failed,
            "summary": summary([f.severity for f in self.findings]),
        }


def infer_row(matrix: Matrix, venv: VenvContents) -> Tuple[Row, str]:
    """The row of the installed vllm-ascend, else of the installed torch-npu, else the newest."""
    for name in ("vllm-ascend", "torch-npu"):
        have = venv.get(name)
        if have is None:
            continue
        rows = [
            matrix.rows[v]
            for v in matrix.versions()
            if same_release(have.version, matrix.rows[v].packages[name])
            or pin_verdict(name, have.version, matrix.rows[v].packages[name]).accepted
        ]
        if rows:
            return rows[0], f"{name} {have.version} is installed, which row {rows[0].cann} pins"
        return matrix.newest(), (
            f"{name} {have.version} matches no row; checking against the newest ({matrix.newest().cann})"
        )
    return (
        matrix.newest(),
        f"neither vllm-ascend nor torch-npu is installed; checking against the newest row ({matrix.newest().cann})",
    )


def fix_plan(findings: List[Finding], ctx: AuditContext) -> List[str]:
    """Commands in an order after each of which the venv still imports: the venv's shape, the row's pins
    (one command per index they really come from), removals, gaps, one-off fixes, triton last."""
    acting = [f for f in findings if f.severity != "info" and f.fix]
    args: Dict[int, List[str]] = {}
    for f in acting:
        for arg in f.fix_args:
            args.setdefault(f.phase, [])
            if arg not in args[f.phase]:
                args[f.phase].append(arg)
    plan = [f.fix for f in acting if f.phase == PHASE_SHAPE]
    pins: Dict[str, List[str]] = {}
    for arg in args.get(PHASE_PINS, []):
        pins.setdefault(ctx.index_flag(arg.split("==")[0]), []).append(arg)
    plan += [f"{ctx.pip} install --no-deps --force-reinstall{flag} " + " ".join(group) for flag, group in pins.items()]
    if args.get(PHASE_UNINSTALL):
        plan.append(f"{ctx.pip} uninstall -y " + " ".join(args[PHASE_UNINSTALL]))
    if args.get(PHASE_FILL):
        plan.append(f"{ctx.pip} install{ctx.index_flag()} " + " ".join(f"'{a}'" for a in args[PHASE_FILL]))
    for f in acting:
        if f.phase == PHASE_MANUAL and not f.fix_args and f.fix not in plan:
            plan.append(f.fix)
    triton = [f.fix for f in acting if f.phase == PHASE_TRITON]
    if triton:
        plan.append(triton[0])  # always last: anything installed after it may overwrite triton/
    return [step for step in plan if step]


def run_audit(
    matrix: Matrix,
    venv_path: Path,
    cann: Optional[str] = None,
    lock: Optional[Lock] = None,
    lock_source: Optional[str] = None,
    mirror_url: Optional[str] = None,
    soc: Optional[str] = None,
    deep: bool = False,
    glibc: Optional[str] = None,
) -> AuditReport:
    """`deep` also checks every distribution's files against its RECORD (reads every file's size); `glibc` is the
    target's where it is not this host's (wheel tags and the native libraries are held to it)."""
    venv = read_venv(venv_path)
    if cann:
        row, reason = select_row(matrix, cann), "chosen with --cann"
    else:
        row, reason = infer_row(matrix, venv)
    row = row.for_arch(platform.machine())
    ctx = AuditContext(venv, row, matrix, lock=lock, mirror_url=mirror_url, soc=soc, glibc=glibc)
    findings = [f for rule in (*RULES, rule_native, *((rule_damaged_files,) if deep else ())) for f in rule(ctx)]
    findings.sort(key=lambda f: (SEVERITY_ORDER[f.severity], f.id, f.package or ""))
    return AuditReport(
        venv=venv_path, row=row, row_reason=reason, findings=findings, plan=fix_plan(findings, ctx), lock=lock_source
    )
