"""One host's doctor run, from what the command line settled to the report: the row this host takes (derived
when --cann names one the matrix lacks), the interpreters searched once for the python check and the install's
choice, the host's checks, a container's, and the install target the fleet groups hosts by."""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Tuple

from ascend_setup.container.inside import add_container_checks
from ascend_setup.engine.workdir import Workdir
from ascend_setup.errors import named_by
from ascend_setup.fleet.target import FleetTarget, fleet_target, install_interpreter
from ascend_setup.host.cann import detect_cann, row_for
from ascend_setup.host.doctor_checks import DoctorReport, interpreters_to_check, run_doctor
from ascend_setup.index.pipconfig import PipSettings
from ascend_setup.matrix.models import Matrix
from ascend_setup.matrix.newcann import provenance_line, with_derived_row
from ascend_setup.resolve.closure import IndexSources


@dataclass(frozen=True)
class DoctorRequest:
    """What the doctor looks at, each flag checked: `python` as given (`python_source` names the flag or
    variable it came from), `index` the primary index the install would use."""

    workdir: Path
    root: Path
    venv: Path
    matrix: Matrix
    settings: Optional[PipSettings]
    cann_home: Optional[str]
    python: Optional[str]
    python_source: str
    soc: Optional[str]
    index: str
    cann: Optional[str]
    vllm_ascend: Optional[str]


def doctor_report(request: DoctorRequest, show: Callable[[str], None]) -> Tuple[DoctorReport, FleetTarget]:
    """The report, with its install target in its facts; `show` hears where a derived row came from."""
    with named_by(request.python_source):
        # searched once: the python check and the install's choice
        interpreters = interpreters_to_check(request.python, Workdir(request.workdir).pythons)
    matrix = request.matrix
    if request.cann:
        matrix, derived = with_derived_row(matrix, request.cann, request.vllm_ascend, lambda: request.index)
        if derived is not None:
            show(provenance_line(derived, matrix))
    installs = detect_cann(request.cann_home)
    row = row_for(matrix, request.cann, installs[0] if installs else None).for_arch(platform.machine())
    sources = IndexSources.for_row(matrix, row, request.index)
    interpreter, no_interpreter = install_interpreter(row, sources, request.python, interpreters)  # once
    report = run_doctor(
        row,
        installs,
        interpreters,
        cann_home=request.cann_home,
        workdir=request.workdir,
        venv=request.venv,
        indexes=sources.as_dict(),
        settings=request.settings,
        install_python=interpreter,
        soc=request.soc,
    )
    add_container_checks(report, request.root, request.venv)  # only in a container: what its `docker run` left out
    target = fleet_target(
        row,
        sources,
        workdir=request.workdir,
        interpreter=interpreter,
        no_interpreter=no_interpreter,
        soc=request.soc or report.facts["npu"]["soc_version"],
        cann_installed=installs[0].version if installs else None,
    )
    report.facts["target"] = target.to_json()
    return report, target


def target_line(t: FleetTarget) -> str:
    """The install target in one line: what the install would take here, or what is unknown of it."""
    where = f"install target: {t.arch} / glibc {t.glibc} / Python {t.python or '?'} / SOC {t.soc or '?'}"
    if t.unknown:
        return f"{where} ({'; '.join(t.unknown)})"
    return f"{where}: lock {t.lock_name}, wheelhouse key {t.wheelhouse_key}"
