"""`ascend-setup doctor`: host checks with fixes."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Optional

from ascend_setup.errors import AscendSetupError
from ascend_setup.host.doctor import run_doctor
from ascend_setup.index.pipconfig import PipSettings, network_settings_for_this_run, pip_settings
from ascend_setup.matrix import load_matrix
from ascend_setup.options import parse_index_overrides
from ascend_setup.paths import env_or, resolve_workdir
from ascend_setup.render import print_json, stdout_console, table


def run(args: argparse.Namespace) -> int:
    workdir = resolve_workdir(args.workdir, write=False)  # doctor only reads
    venv_value = env_or(args.venv, "ASCEND_SETUP_VENV")
    venv = Path(venv_value).absolute() if venv_value else workdir / "venv"
    matrix = load_matrix(args.matrix).with_indexes(parse_index_overrides(args.index or []))
    try:
        settings: Optional[PipSettings] = network_settings_for_this_run(pip_settings(respect=args.respect_pip_config))
    except AscendSetupError:
        settings = None
    report = run_doctor(matrix, cann=args.cann, cann_home=env_or(args.cann_home, "ASCEND_SETUP_CANN_HOME"),
                        workdir=workdir, venv=venv, settings=settings, python=env_or(args.python, "ASCEND_SETUP_PYTHON"))
    if args.json:
        print_json(report.to_json())
        return 1 if report.failed else 0
    console = stdout_console()
    console.print(table("ascend-setup doctor", ["check", "status", "evidence", "fix"],
                        [[c.id, c.status, c.detail, c.fix or ""] for c in report.checks], status_column=1))
    if report.bare:
        console.print(f"This machine has no CANN toolkit and no NPU: it cannot run vLLM-Ascend. 'ascend-setup plan "
                      f"--cann {report.facts['row']} --glibc 2.31 --arch aarch64 --python 3.11' forecasts an install "
                      "for an Atlas A2 host (Ubuntu 20.04) from here.", soft_wrap=True)
    console.print("[red]some checks failed[/red]" if report.failed else "[green]no check failed[/green]")
    return 1 if report.failed else 0
