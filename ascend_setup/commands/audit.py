"""`ascend-setup audit`: read-only check of a venv against a row (and against its lock, when known)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Dict, Optional, Tuple

from ascend_setup.audit.findings import run_audit, summary
from ascend_setup.cli import flags
from ascend_setup.cli.render import Output, print_field, print_items, stdout_console
from ascend_setup.dists.venv_reader import read_venv_record
from ascend_setup.errors import BadInput, named_by
from ascend_setup.host.npu import host_npu
from ascend_setup.index.tags import parse_glibc
from ascend_setup.index.urls import index_overrides
from ascend_setup.matrix import load_matrix
from ascend_setup.matrix.models import MIRROR
from ascend_setup.matrix.newcann import recorded_matrix
from ascend_setup.resolve.lockfile import Lock, read_lock
from ascend_setup.utils.paths import check_path_length


def recorded_lock(venv: Path) -> Tuple[Optional[Lock], Optional[str], Dict[str, str]]:
    """The lock and indexes ascend-setup recorded when it built `venv` (nothing for other venvs)."""
    record = read_venv_record(venv)
    if record is None:
        return None, None, {}
    lock = None
    if record.lock and Path(record.lock).is_file():
        try:
            lock = read_lock(Path(record.lock))
        except BadInput:
            lock = None
    return lock, record.lock if lock else None, record.indexes


def run(args: argparse.Namespace, output: Output) -> int:
    venv = Path(args.venv).expanduser().absolute()
    check_path_length(venv, "--venv")
    lock, source, indexes = recorded_lock(venv)
    if args.lock:
        lock, source = read_lock(Path(args.lock).expanduser().absolute()), args.lock
        indexes = dict(lock.indexes)
    named = {n: u for n, u in indexes.items() if n != MIRROR}
    matrix = load_matrix(args.matrix or recorded_matrix(venv))
    matrix = matrix.with_indexes(
        {**{n: u for n, u in named.items() if n in matrix.indexes}, **index_overrides(args.index)}
    )
    soc = args.soc or host_npu().soc_version  # --soc was checked as it was parsed
    with named_by("--glibc"):
        glibc = parse_glibc(args.glibc) if args.glibc else None
    report = run_audit(
        matrix,
        venv,
        args.cann,
        lock=lock,
        lock_source=source,
        mirror_url=indexes.get(MIRROR),
        soc=soc,
        deep=args.deep,
        glibc=glibc,
    )
    if args.json:
        output.print_json(report.to_json())
        return 1 if report.failed else 0
    console = stdout_console()
    console.print(
        f"row {report.row.cann} ({report.row_reason})" + (f"; lock {source}" if source else ""),
        soft_wrap=True,
        markup=False,
    )
    if report.findings:
        console.print(f"audit: {summary([f.severity for f in report.findings])}", markup=False)
        print_field(console, "venv", str(report.venv))
        shown = [f for f in report.findings if not (args.quiet_info and f.severity == "info")]
        print_items(console, [(f.severity, f.id, f.package) for f in shown], [[f.message] for f in shown])
    else:
        console.print("[green]no findings: the venv matches the row[/green]")
    if report.plan:
        console.print("[bold]fix plan, in order (the venv imports after each step):[/bold]")
        for step, command in enumerate(report.plan, 1):
            console.print(f"  {step}. {command}", soft_wrap=True, markup=False)
    return 1 if report.failed else 0


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
    p.set_defaults(func=run)


ARGUMENTS = {"audit": audit_arguments}
