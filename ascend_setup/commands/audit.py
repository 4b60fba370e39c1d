"""`ascend-setup audit`: read-only check of a venv against a row."""

from __future__ import annotations

import argparse
from pathlib import Path

from ascend_setup.audit.report import run_audit
from ascend_setup.matrix import load_matrix
from ascend_setup.render import print_json, stdout_console, table


def run(args: argparse.Namespace) -> int:
    report = run_audit(load_matrix(args.matrix), Path(args.venv).expanduser().absolute(), args.cann)
    if args.json:
        print_json(report.to_json())
        return 1 if report.failed else 0
    console = stdout_console()
    console.print(f"row {report.row.cann}: {report.row_reason}")
    if report.findings:
        console.print(table(f"audit of {report.venv}", ["severity", "id", "package", "finding", "fix"],
                            [[f.severity, f.id, f.package or "", f.message, f.fix or ""] for f in report.findings],
                            status_column=0))
    else:
        console.print("[green]no findings: the venv matches the row[/green]")
    if report.plan:
        console.print("[bold]fix plan, in order:[/bold]")
        for step, command in enumerate(report.plan, 1):
            console.print(f"  {step}. {command}", soft_wrap=True)
    return 1 if report.failed else 0
