"""`ascend-setup audit`: read-only check of a venv against a row (and against its lock, when known)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Literal, Optional, Type

from pydantic import BaseModel, ConfigDict

from ascend_setup.cli import flags
from ascend_setup.cli.command import Options, Result
from ascend_setup.cli.documents import Document
from ascend_setup.cli.render import Output, print_field, print_items
from ascend_setup.errors import named_by
from ascend_setup.utils.paths import check_path_length

if TYPE_CHECKING:
    from rich.console import Console

    from ascend_setup.audit.findings import AuditReport


class AuditOptions(Options):
    venv: str
    deep: bool = False
    cann: Optional[str] = None
    lock: Optional[str] = None
    index: Optional[List[str]] = None
    soc: Optional[str] = None
    glibc: Optional[str] = None
    quiet_info: bool = False


class AuditFinding(BaseModel):
    """One finding: what is wrong (an error), may be (a warning) or is as designed (info), and its fix."""

    model_config = ConfigDict(extra="forbid")

    id: str
    severity: Literal["error", "warning", "info"]
    package: Optional[str]
    message: str
    fix: Optional[str] = None
    evidence: Optional[str] = None


class AuditDocument(Document):
    """`audit --json`: the row the venv was held to and why that row, the lock (null: none known), every
    finding, the fix plan in order, and `ok` false (exit 1) when a finding is an error."""

    venv: str
    row: str
    row_reason: str
    lock: Optional[str]
    findings: List[AuditFinding]
    fix_plan: List[str]
    ok: bool
    summary: str


DOCUMENTS: Dict[str, Type[BaseModel]] = {"audit": AuditDocument}


def run(options: AuditOptions, output: Output) -> Result:
    from ascend_setup.audit.findings import run_audit
    from ascend_setup.audit.recorded import chosen_lock, with_recorded_indexes
    from ascend_setup.host.npu import host_npu
    from ascend_setup.index.tags import parse_glibc
    from ascend_setup.index.urls import index_overrides
    from ascend_setup.matrix import load_matrix
    from ascend_setup.matrix.models import MIRROR
    from ascend_setup.matrix.newcann import recorded_matrix

    venv = Path(options.venv).expanduser().absolute()
    check_path_length(venv, "--venv")
    lock, source, indexes = chosen_lock(venv, options.lock)
    matrix = load_matrix(options.matrix or recorded_matrix(venv))
    matrix = with_recorded_indexes(matrix, indexes, index_overrides(options.index))
    soc = options.soc or host_npu().soc_version
    with named_by("--glibc"):
        glibc = parse_glibc(options.glibc) if options.glibc else None
    report = run_audit(
        matrix,
        venv,
        options.cann,
        lock=lock,
        lock_source=source,
        mirror_url=indexes.get(MIRROR),
        soc=soc,
        deep=options.deep,
        glibc=glibc,
    )
    return Result(
        1 if report.failed else 0,
        AuditDocument.model_validate(report.to_json()),
        lambda console: render(console, report, source, options.quiet_info),
    )


def render(console: Console, report: AuditReport, source: Optional[str], quiet_info: bool) -> None:
    from ascend_setup.audit.findings import summary

    console.print(
        f"row {report.row.cann} ({report.row_reason})" + (f"; lock {source}" if source else ""),
        soft_wrap=True,
        markup=False,
    )
    if report.findings:
        console.print(f"audit: {summary([f.severity for f in report.findings])}", markup=False)
        print_field(console, "venv", str(report.venv))
        shown = [f for f in report.findings if not (quiet_info and f.severity == "info")]
        print_items(console, [(f.severity, f.id, f.package) for f in shown], [[f.message] for f in shown])
    else:
        console.print("[green]no findings: the venv matches the row[/green]")
    if report.plan:
        console.print("[bold]fix plan, in order (the venv imports after each step):[/bold]")
        for step, command in enumerate(report.plan, 1):
            console.print(f"  {step}. {command}", soft_wrap=True, markup=False)


def audit_arguments(p: argparse.ArgumentParser) -> None:
    flags.common(p)
    flags.venv(p, "the venv to audit", env=False, required=True)
    p.add_argument(
        "--deep",
        action="store_true",
        help="also check every installed file against its "
        "distribution's RECORD (size; sha256 for small files): what an interrupted install left",
    )
    flags.cann(p, "row to check against (default: inferred from vllm-ascend / torch-npu)")
    flags.lock(
        p,
        "also report drift against this lock (default: the lock ascend-setup installed this venv from, "
        "when it built it)",
    )
    flags.index(p, "the URL of a named index (ascend, pytorch-cpu) the fix plan installs from; repeatable")
    flags.soc(p, "this host's NPUs, checked against the device type vllm_ascend was built for (default: from npu-smi)")
    p.add_argument(
        "--glibc",
        help="hold the wheel tags and the native libraries to this glibc, e.g. 2.31 (default: this machine's)",
    )
    p.add_argument("--quiet-info", action="store_true", help="count the expected notes (info) but do not list them")
    p.set_defaults(func=run, options=AuditOptions)


ARGUMENTS = {"audit": audit_arguments}
