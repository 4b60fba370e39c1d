"""`ascend-setup fleet report DIR`: the hosts x findings view of a fleet's audits (from ansible/audit.yml)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ascend_setup.cli import flags
from ascend_setup.cli.render import Output, print_table, stdout_console, terminal_safe
from ascend_setup.utils.files import atomic_write_text, make_dir
from ascend_setup.utils.paths import check_output_file, check_path_length


def run_report(args: argparse.Namespace, output: Output) -> int:
    from ascend_setup.fleet.merged_report import GRID_SEVERITIES, finding_ids, fleet_json, grid, read_fleet

    directory = Path(args.results).expanduser().absolute()
    check_path_length(directory, "DIR")
    hosts = read_fleet(directory)
    out = Path(args.out).expanduser().absolute() if args.out else directory / "report.json"
    check_output_file(out, "--out")
    data = fleet_json(hosts)
    make_dir(out.parent)  # as plan --lock does: check_output_file made sure it can be created
    atomic_write_text(out, json.dumps(data, indent=2) + "\n")
    if args.json:
        output.print_json({**data, "report": str(out)})
        return 0 if data["ok"] else 1
    console = stdout_console()
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
    return 0 if data["ok"] else 1


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
    f.set_defaults(func=run_report)


ARGUMENTS = {"fleet": fleet_arguments}
