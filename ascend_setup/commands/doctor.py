"""`ascend-setup doctor`: host checks with fixes."""

from __future__ import annotations

import argparse
import platform
from pathlib import Path
from typing import Optional

from ascend_setup.cli import flags
from ascend_setup.cli.render import Output, print_items, stderr_console, stdout_console
from ascend_setup.container.inside import add_container_checks
from ascend_setup.engine.workdir import Workdir
from ascend_setup.errors import AscendSetupError, BadInput, named_by
from ascend_setup.fleet.target import FleetTarget, fleet_target, install_interpreter
from ascend_setup.host.cann import detect_cann, row_for
from ascend_setup.host.doctor_checks import interpreters_to_check, run_doctor
from ascend_setup.index.pipconfig import PipSettings, network_settings_for_this_run, pip_settings
from ascend_setup.matrix import load_matrix
from ascend_setup.matrix.newcann import provenance_line, with_derived_row
from ascend_setup.resolve.closure import IndexSources
from ascend_setup.steps.options import check_soc, parse_index_overrides, which_index
from ascend_setup.utils.paths import CANN_HOME, PYTHON, VENV, check_dir_path, resolve_workdir, root_dir


def target_line(t: FleetTarget) -> str:
    where = f"install target: {t.arch} / glibc {t.glibc} / Python {t.python or '?'} / SOC {t.soc or '?'}"
    if t.unknown:
        return f"{where} ({'; '.join(t.unknown)})"
    return f"{where}: lock {t.lock_name}, wheelhouse key {t.wheelhouse_key}"


def run(args: argparse.Namespace, output: Output) -> int:
    workdir = resolve_workdir(args.workdir, mode="read")  # doctor only reads: a missing one is no problem
    root = root_dir(args.root)

    venv, venv_source = VENV.path(args.venv)
    venv = venv or Workdir(workdir).venv
    check_dir_path(venv, venv_source, mode="read")
    matrix = load_matrix(args.matrix).with_indexes(parse_index_overrides(args.index or []))
    try:
        settings: Optional[PipSettings] = network_settings_for_this_run(pip_settings(respect=args.respect_pip_config))
    except AscendSetupError:
        settings = None
    cann_home, home_source = CANN_HOME.value(args.cann_home)
    if cann_home and not Path(cann_home).is_dir():
        raise BadInput(f"{home_source} {cann_home} is not a directory")
    python, python_source = PYTHON.value(args.python)
    soc = check_soc(args.soc)
    index = which_index(args.index_url, None, lambda: settings.index if settings else "")
    with named_by(python_source):
        # searched once: the python check and the install's choice
        interpreters = interpreters_to_check(python, Workdir(workdir).pythons)
    if args.cann:
        matrix, derived = with_derived_row(matrix, args.cann, args.vllm_ascend, lambda: index)
        if derived is not None:
            stderr_console().print(provenance_line(derived, matrix), soft_wrap=True, markup=False)
    installs = detect_cann(cann_home)
    row = row_for(matrix, args.cann, installs[0] if installs else None).for_arch(platform.machine())
    sources = IndexSources.for_row(matrix, row, index)
    interpreter, no_interpreter = install_interpreter(row, sources, python, interpreters)  # the install's, once
    report = run_doctor(row, installs, interpreters, cann_home=cann_home, workdir=workdir, venv=venv,
                        indexes=sources.as_dict(), settings=settings, install_python=interpreter, soc=soc)
    add_container_checks(report, root)  # only in a container: what its `docker run` left out
    target = fleet_target(row, sources, workdir=workdir, interpreter=interpreter, no_interpreter=no_interpreter,
                          soc=soc or report.facts["npu"]["soc_version"],
                          cann_installed=installs[0].version if installs else None)
    report.facts["target"] = target.to_json()
    if args.json:
        output.print_json(report.to_json())
        return 1 if report.failed else 0
    console = stdout_console()
    print_items(console, [(c.status, c.id) for c in report.checks],
                [[c.detail, f"fix: {c.fix}" if c.fix and c.status != "pass" else ""] for c in report.checks])
    if report.bare:
        console.print("This machine has no CANN toolkit and no NPU: it cannot run vLLM-Ascend. This forecasts an "
                      "install for an Atlas A2 host (Ubuntu 20.04) from here:")
        console.print(f"  ascend-setup plan --cann {report.facts['row']} --glibc 2.31 --arch aarch64 --python 3.11",
                      soft_wrap=True, markup=False)
    console.print(target_line(target), markup=False)
    console.print("[red]some checks failed[/red]" if report.failed else "[green]no check failed[/green]")
    return 1 if report.failed else 0


def doctor_arguments(p: argparse.ArgumentParser) -> None:
    flags.common(p)
    flags.cann(p, "row to check against (default: the installed CANN's, else the newest)")
    flags.cann_home(p, "CANN root to check")
    flags.workdir(p, "workdir whose disk and locks to check")
    flags.venv(p, "venv to check for system site-packages")
    flags.python(p, "check this interpreter instead of searching")
    flags.soc(p, "the build target install would get (default: from npu-smi)")
    flags.vllm_ascend(p)
    flags.root(p)
    flags.index_url(p, "primary index the install would use, asked which Pythons the row's wheels exist for "
                    "(default: pip's configuration)")
    flags.index_overrides(p)
    p.set_defaults(func=run)


ARGUMENTS = {"doctor": doctor_arguments}
