"""`ascend-setup doctor`: host checks with fixes."""

from __future__ import annotations

import argparse
from pathlib import Path

from ascend_setup.host.doctor import run_doctor
from ascend_setup.matrix import load_matrix
from ascend_setup.paths import env_or, resolve_workdir
from ascend_setup.render import print_json, stdout_console, table


def run(args: argparse.Namespace) -> int:
    workdir = resolve_workdir(args.workdir)
    venv_value = env_or(args.venv, "ASCEND_SETUP_VENV")
    venv = Path(venv_value).absolute() if venv_value else workdir / "venv"
    report = run_doctor(load_matrix(args.matrix), cann=args.cann,
                        cann_home=env_or(args.cann_home, "ASCEND_SETUP_CANN_HOME"), workdir=workdir, venv=venv)
    if args.json:
        print_json(report.to_json())
        return 1 if report.failed else 0
    console = stdout_console()
    console.print(table("ascend-setup doctor", ["check", "status", "evidence", "fix"],
                        [[c.id, c.status, c.detail, c.fix or ""] for c in report.checks], status_column=1))
    if report.bare:
        console.print("This machine has no CANN toolkit and no NPU: it cannot run vLLM-Ascend. "
                      "'ascend-setup plan --cann 9.1.0 --glibc 2.31 --arch aarch64' forecasts an install "
                      "for an Ascend host from here.")
    console.print("[red]some checks failed[/red]" if report.failed else "[green]no check failed[/green]")
    return 1 if report.failed else 0
