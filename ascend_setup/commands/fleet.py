"""`ascend-setup fleet report DIR`: the hosts x findings view of a fleet's audits (from ansible/audit.yml)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, Type

from pydantic import BaseModel, ConfigDict

from ascend_setup.cli import flags
from ascend_setup.cli.command import Options, Result
from ascend_setup.cli.documents import Document
from ascend_setup.cli.render import Output, print_table, terminal_safe
from ascend_setup.fleet.merged_report import GRID_SEVERITIES, Finding, HostAudit, finding_ids, grid
from ascend_setup.fleet.report_file import write_fleet_report

if TYPE_CHECKING:
    from rich.console import Console


class ReportOptions(Options):
    fleet_command: str
    results: str
    out: Optional[str] = None


class HostResult(BaseModel):
    """One host: its audit's findings, or why the audit did not run (`error`); `ok` when clean."""

    model_config = ConfigDict(extra="forbid")

    host: str
    ok: bool
    result: str
    venv: Optional[str]
    lock: Optional[str]
    error: Optional[str]
    findings: List[Finding]


class FleetDocument(Document):
    """`fleet report DIR --json`: each host, the hosts of each finding id, the hosts whose audit did not run,
    and where the merged report was written (the file holds the same document without `report`)."""

    ok: bool
    hosts: List[HostResult]
    findings: Dict[str, List[str]]
    did_not_run: List[str]
    report: str


DOCUMENTS: Dict[str, Type[BaseModel]] = {"fleet report": FleetDocument}


def run_report(options: ReportOptions, output: Output) -> Result:
    hosts, data, out = write_fleet_report(options.results, options.out)
    return Result(
        0 if data["ok"] else 1,
        FleetDocument.model_validate({**data, "report": str(out)}),
        lambda console: render(console, hosts, out),
    )


def render(console: Console, hosts: List[HostAudit], out: Path) -> None:
    print_table(
        console, f"audit of {len(hosts)} hosts", ["host", "result", *finding_ids(hosts, GRID_SEVERITIES)], grid(hosts)
    )
    for h in hosts:
        if h.error:
            console.print(terminal_safe(f"{h.host}: the audit did not run: {h.error}"), soft_wrap=True, markup=False)
        for f in h.findings:
            if f.severity == "error":
                console.print(
                    terminal_safe(f"{h.host}: {f.id} ({f.package or '-'}): {f.message}"), soft_wrap=True, markup=False
                )
    bad = [h.host for h in hosts if not h.ok]
    console.print(
        terminal_safe(
            f"{len(hosts) - len(bad)} of {len(hosts)} hosts clean"
            + (f"; not clean: {', '.join(bad)}" if bad else "")
            + f"; report {out}"
        ),
        soft_wrap=True,
        markup=False,
    )


def fleet_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="fleet_command", metavar="report")
    sub.required = True
    f = sub.add_parser(
        "report",
        help="one hosts x findings table of the audit play's per-host results; exit 1 when a host is not clean",
    )
    flags.common(f)
    f.add_argument("results", metavar="DIR", help="the directory of <host>.audit.json files the audit play wrote")
    f.add_argument("--out", metavar="FILE", help="where the merged JSON report goes (default DIR/report.json)")
    f.set_defaults(func=run_report, options=ReportOptions)


ARGUMENTS = {"fleet": fleet_arguments}
