"""Run the rules, pick the row, and turn findings into the minimal fix plan."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from packaging.version import InvalidVersion, Version

from ascend_setup.audit.rules import (PHASE_FILL, PHASE_PINS, PHASE_TRITON, PHASE_UNINSTALL, RULES, AuditContext,
                                      Finding)
from ascend_setup.audit.venv import VenvContents, read_venv
from ascend_setup.matrix.load import select_row
from ascend_setup.matrix.models import Matrix, Row

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


@dataclass
class AuditReport:
    venv: Path
    row: Row
    row_reason: str
    findings: List[Finding]
    plan: List[str]

    @property
    def failed(self) -> bool:
        return any(f.severity == "error" for f in self.findings)

    def to_json(self) -> dict:
        return {"venv": str(self.venv), "row": self.row.cann, "row_reason": self.row_reason,
                "findings": [f.to_json() for f in self.findings], "fix_plan": self.plan,
                "ok": not self.failed}


def _same(installed: Optional[str], pinned: str) -> bool:
    try:
        return installed is not None and Version(installed).public == Version(pinned).public
    except InvalidVersion:
        return False


def infer_row(matrix: Matrix, venv: VenvContents) -> Tuple[Row, str]:
    """The row of the installed vllm-ascend, else of the installed torch-npu, else the newest."""
    for name in ("vllm-ascend", "torch-npu"):
        have = venv.get(name)
        if have is None:
            continue
        rows = [matrix.rows[v] for v in matrix.versions() if _same(have.version, matrix.rows[v].packages[name])]
        if rows:
            return rows[0], f"{name} {have.version} is installed, which row {rows[0].cann} pins"
        return matrix.newest(), f"{name} {have.version} matches no row; checking against the newest ({matrix.newest().cann})"
    return matrix.newest(), f"neither vllm-ascend nor torch-npu is installed; checking against the newest row " \
                            f"({matrix.newest().cann})"


def fix_plan(findings: List[Finding], ctx: AuditContext) -> List[str]:
    """One command per phase, in an order that cannot undo itself: uninstall, pins, fill, one-off fixes,
    and triton-ascend last."""
    by_phase: Dict[int, List[str]] = {}
    for f in findings:
        if f.severity == "info":
            continue
        for arg in f.fix_args:
            by_phase.setdefault(f.phase, [])
            if arg not in by_phase[f.phase]:
                by_phase[f.phase].append(arg)
    plan = []
    if by_phase.get(PHASE_UNINSTALL):
        plan.append(f"{ctx.pip} uninstall -y " + " ".join(by_phase[PHASE_UNINSTALL]))
    if by_phase.get(PHASE_PINS):
        plan.append(f"{ctx.pip} install --no-deps " + " ".join(by_phase[PHASE_PINS]))
    if by_phase.get(PHASE_FILL):
        plan.append(f"{ctx.pip} install " + " ".join(f"'{a}'" for a in by_phase[PHASE_FILL]))
    plan += [f.fix for f in findings if f.fix and not f.fix_args and f.phase != PHASE_TRITON
             and f.severity != "info" and f.fix not in plan]
    triton = [f.fix for f in findings if f.phase == PHASE_TRITON and f.fix]
    if triton:
        plan.append(triton[0])  # always last: anything installed after it may overwrite triton/
    return plan


def run_audit(matrix: Matrix, venv_path: Path, cann: Optional[str] = None) -> AuditReport:
    venv = read_venv(venv_path)
    if cann:
        row, reason = select_row(matrix, cann), f"--cann {cann}"
    else:
        row, reason = infer_row(matrix, venv)
    ctx = AuditContext(venv, row, matrix)
    findings = [f for rule in RULES for f in rule(ctx)]
    findings.sort(key=lambda f: (SEVERITY_ORDER[f.severity], f.id, f.package or ""))
    return AuditReport(venv=venv_path, row=row, row_reason=reason, findings=findings, plan=fix_plan(findings, ctx))
