"""The target a host's install takes, in the terms a fleet groups hosts by: one lock per (arch, glibc,
Python and indexes), one vllm-ascend build per wheelhouse key. `doctor --json` reports it as
`facts.target`; the Ansible playbooks group hosts by `lock_key` and `wheelhouse_key` and never compute
either themselves."""

from __future__ import annotations

import platform
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ascend_setup.errors import AscendSetupError
from ascend_setup.host.interpreters import Interpreter
from ascend_setup.host.machine import glibc_version, this_machine
from ascend_setup.matrix.models import Row
from ascend_setup.matrix.soc import device_of
from ascend_setup.resolve.closure import IndexSources, inputs_digest
from ascend_setup.resolve.lockfile import lock_file_name
from ascend_setup.resolve.pythons import decide_python
from ascend_setup.sourcebuild.source import wheelhouse_key


@dataclass
class FleetTarget:
    cann: str  # the row
    arch: str
    glibc: Optional[str]
    python: Optional[str]  # X.Y of the interpreter the venv will use
    python_executable: Optional[str]  # pass it as --python so the install takes the same one
    soc: Optional[str]
    cann_installed: Optional[str]
    lock_name: Optional[str]  # the lock `install` keeps as <workdir>/lock/<lock_name>
    indexes: Dict[str, str]  # the indexes this host's install takes (mirror, then the row's named ones)
    # Hosts with the same row, target and indexes share a lock (lock_name and what the lock depends on): a
    # host behind another mirror gets a lock of its own, resolved with its own indexes.
    lock_key: Optional[str]
    wheelhouse_key: Optional[str]  # a built vllm-ascend wheel lives in <workdir>/wheelhouse/<key>/
    wheelhouse: Optional[str]
    unknown: List[str]  # why a field above is missing (each a sentence)

    def to_json(self) -> Dict[str, Any]:
        return asdict(self)


def install_interpreter(
    row: Row, sources: IndexSources, python: Optional[str], found: Optional[List[Interpreter]] = None
) -> Tuple[Optional[Interpreter], str]:
    """(the interpreter the install takes here, by decide_python; or None and why there is none). `python`: the
    one --python names; `found`: this machine's interpreters, when searched already."""
    try:
        return decide_python(row, sources, explicit=python, found=found).interpreter, ""
    except AscendSetupError as exc:
        return None, exc.message


def fleet_target(
    row: Row,
    sources: IndexSources,
    *,
    workdir: Path,
    interpreter: Optional[Interpreter],
    no_interpreter: str = "",
    soc: Optional[str],
    cann_installed: Optional[str],
) -> FleetTarget:
    """The same choices the install's preflight makes (interpreter, SOC, CANN), made now without writing:
    `interpreter` from install_interpreter (`no_interpreter` says why there is none)."""
    unknown: List[str] = []
    arch, glibc = platform.machine(), glibc_version()
    if interpreter is None:
        unknown.append(f"python: {no_interpreter}")
    if not soc:
        unknown.append("soc: npu-smi gave no SOC_VERSION (pass --soc)")
    if not cann_installed:
        unknown.append("cann: no CANN toolkit found (pass --cann-home)")
    minor = interpreter.minor if interpreter else None
    target = this_machine(minor) if minor else None
    key = (
        wheelhouse_key(
            version=row.packages["vllm-ascend"],
            cann=cann_installed,
            arch=arch,
            python=minor,
            glibc=glibc or "unknown",
            soc=soc,
        )
        if minor and soc and cann_installed
        else None
    )
    return FleetTarget(
        cann=row.cann,
        arch=arch,
        glibc=glibc,
        python=minor,
        python_executable=interpreter.path if interpreter else None,
        soc=soc,
        cann_installed=cann_installed,
        lock_name=lock_file_name(row.cann, target) if target else None,
        indexes=sources.as_dict(),
        lock_key=lock_file_name(row.cann, target, inputs_digest(row, target, sources, device_of(soc))[:8])
        if target
        else None,
        wheelhouse_key=key,
        wheelhouse=str(workdir / "wheelhouse" / key) if key else None,
        unknown=unknown,
    )
