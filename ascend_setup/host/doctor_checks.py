"""`ascend-setup doctor`: host checks, each pass/warn/fail with its evidence and the exact fix."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from ascend_setup.dists.venv_reader import read_pyvenv_cfg
from ascend_setup.engine.state import RunState
from ascend_setup.engine.workdir import Workdir
from ascend_setup.errors import AscendSetupError, BadInput
from ascend_setup.host.cann import CannInstall, Driver, find_driver
from ascend_setup.host.checks import Check, check_cann, check_disk
from ascend_setup.host.interpreters import PREFERRED, Interpreter, find_interpreters, probe
from ascend_setup.host.machine import MachineFacts, machine_facts
from ascend_setup.host.npu import NpuFacts, missing_hwhiaiuser_group, npu_facts
from ascend_setup.host.os_hints import python_install_hint
from ascend_setup.host.setenv import CapturedEnv, capture_env
from ascend_setup.host.toolchain import builds_from_source, toolchain_checks
from ascend_setup.index.answers import IndexAnswer, ask_indexes
from ascend_setup.index.pipconfig import PipSettings
from ascend_setup.index.reach import IndexNeed
from ascend_setup.knowledge.scan import triage_stream
from ascend_setup.matrix.models import Row
from ascend_setup.matrix.soc import device_of, label
from ascend_setup.sourcebuild.kernel_meta import find_kernel_meta_locks
from ascend_setup.utils.inputs import load_model, open_input


def check_glibc(row: Row, facts: MachineFacts) -> Check:
    needs = [(name, per_arch[facts.arch]) for name, per_arch in row.wheel_glibc.items() if facts.arch in per_arch]
    if facts.glibc is None:
        return Check(
            "glibc",
            "warn",
            "no glibc found (musl or unknown C library): no manylinux wheel installs",
            "use a glibc distribution such as Ubuntu 22.04+",
        )
    host = tuple(int(p) for p in facts.glibc.split("."))
    late = [(n, g) for n, g in needs if tuple(int(p) for p in g.split(".")) > host]
    if late:
        text = "; ".join(
            f"glibc {facts.glibc} < {g}: {n} will be built from source, ~{row.build_minutes} min" for n, g in late
        )
        return Check(
            "glibc",
            "warn",
            text,
            "expected on Ubuntu 20.04; ascend-setup builds it once and keeps "
            "the wheel in <workdir>/wheelhouse (or use a host with glibc >= "
            f"{max(g for _, g in late)})",
        )
    return Check("glibc", "pass", f"glibc {facts.glibc} takes the row's wheels")


def newest_usable(row: Row, interpreters: List[Interpreter]) -> Optional[Interpreter]:
    """The newest interpreter in the row's range that can make venvs: what the python check passes on."""
    usable = [i for i in interpreters if row.python_allows(i.version) and i.has_venv]
    return max(usable, key=lambda i: tuple(int(p) for p in i.version.split(".")), default=None)


def check_python(row: Row, interpreters: List[Interpreter], install: Optional[Interpreter] = None) -> Check:
    """The newest interpreter in range passes; when the install takes another (`install`, by decide_python: 3.12
    fits, and triton-ascend has no cp312 wheel), the check says which one."""
    fitting = [i for i in interpreters if row.python_allows(i.version)]
    best = newest_usable(row, interpreters)
    if best is not None:
        takes = (
            (f"; the install takes Python {install.minor} at {install.path}, the newest the row's wheels exist for")
            if install is not None and install.minor != best.minor
            else ""
        )
        return Check("python", "pass", f"Python {best.version} at {best.path} fits {row.python}{takes}")
    if fitting:
        i = fitting[0]
        return Check(
            "python",
            "fail",
            f"Python {i.version} at {i.path} fits {row.python} but cannot make venvs",
            python_install_hint(i.minor),
        )
    seen = ", ".join(sorted({i.version for i in interpreters})) or "none"
    if install is not None and not install.path:  # decide_python's managed choice: the install fetches it
        return Check(
            "python",
            "warn",
            f"no interpreter in {row.python} (found: {seen}); the install fetches a "
            f"managed CPython {install.version} into <workdir>/python",
            "the install needs the python-build-standalone release or a mirror of it (--python-mirror "
            f"URL), or a bundle; or {python_install_hint(PREFERRED)}",
        )
    return Check(
        "python",
        "fail",
        f"no interpreter in {row.python} (found: {seen})",
        f"{python_install_hint(PREFERRED)}; then --python /path/to/python{PREFERRED}",
    )


#: A managed interpreter under a workdir's python/ (uv's folder per build), by its versioned name.
_MANAGED = re.compile(r"^python3\.\d+$")


def managed_interpreters(pythons: Path) -> List[str]:
    """The managed interpreters an install left in `pythons` (<workdir>/python): the search does not look there."""
    return sorted(str(p) for p in pythons.glob("cpython-*/bin/python3.*") if _MANAGED.match(p.name))


def interpreters_to_check(python: Optional[str], pythons: Optional[Path] = None) -> List[Interpreter]:
    """--python alone when given (a path that does not run is bad input, named by the caller), else every
    interpreter found, with the managed ones of the workdir's `pythons`."""
    if not python:
        return find_interpreters(managed_interpreters(pythons) if pythons is not None else ())
    found = probe(python)
    if found is None:
        raise BadInput(f"{python} is not a working Python interpreter")
    return [found]


def check_driver_and_npu(driver: Optional[Driver], npu: NpuFacts) -> List[Check]:
    checks = []
    if driver is None:
        checks.append(
            Check(
                "driver",
                "fail",
                "no NPU driver (driver/version.info not found)",
                "install the Ascend driver and firmware (Ascend-hdk-910b-npu-driver_*.run)",
            )
        )
    else:
        checks.append(
            Check(
                "driver",
                "pass",
                f"driver {driver.package_version or driver.version or 'unknown version'} at {driver.root}",
            )
        )
    if npu.error:
        fix = (
            "add <driver>/lib64, lib64/common and lib64/driver to LD_LIBRARY_PATH"
            if "libc_sec" in npu.error
            else "install the driver; on a machine without NPUs pass --soc to build anyway"
        )
        checks.append(Check("npu", "fail", npu.error, fix))
    elif not npu.chips:
        checks.append(Check("npu", "fail", f"{npu.npu_smi} lists no NPUs", "check the driver with 'npu-smi info'"))
    else:
        names = ", ".join(sorted({c["name"] for c in npu.chips}))
        checks.append(
            Check(
                "npu",
                "pass",
                f"{len(npu.chips)} NPU(s): {names}; SOC_VERSION={npu.soc_version} "
                f"(device type {label(npu.device_type)})",
            )
        )
    if missing_hwhiaiuser_group():
        checks.append(
            Check(
                "group",
                "fail",
                "this user is not in the HwHiAiUser group",
                "sudo usermod -aG HwHiAiUser $USER, then log in again",
            )
        )
    return checks


def check_nnal(installs: List[CannInstall]) -> Check:
    nnal = installs[0].nnal if installs else None
    if nnal is None or not nnal.set_env:
        return Check(
            "nnal",
            "warn",
            "NNAL (ATB) not found: libatb.so missing at runtime",
            "install Ascend-cann-nnal for the same CANN version",
        )
    return Check("nnal", "pass", f"NNAL at {nnal.set_env} (libatb: {nnal.libatb or 'not found'})")


def capture_cann_env(installs: List[CannInstall]) -> Union[CapturedEnv, Check]:
    """The captured environment, or the failing check that explains why there is none."""
    if not installs or not installs[0].set_env:
        return Check("set_env", "fail", "no set_env.sh to capture", "install the CANN toolkit")
    try:
        return capture_env(installs[0].set_env_scripts())
    except AscendSetupError as exc:
        return Check("set_env", "fail", exc.message, exc.hint)


def check_set_env(captured: Union[CapturedEnv, Check]) -> Check:
    if isinstance(captured, Check):
        return captured
    problems = captured.problems()
    note = f" ({'; '.join(problems)}: a 'set -e' caller would die; captured safely)" if problems else ""
    return Check(
        "set_env",
        "pass",
        f"captured {len(captured.changes)} variables from "
        f"{', '.join(captured.scripts)}{note}; "
        f"ASCEND_HOME_PATH={captured.changes.get('ASCEND_HOME_PATH', '-')}",
    )


def check_workdir(row: Row, facts: MachineFacts) -> List[Check]:
    checks = []
    if facts.workdir_persistent:
        checks.append(Check("workdir", "pass", f"{facts.workdir} is on a persistent path"))
    else:
        checks.append(
            Check(
                "workdir",
                "warn",
                f"{facts.workdir} is not under /mnt/workspace or /home: a preemptible instance loses it on stop",
                "--workdir /mnt/workspace/ascend-setup",
            )
        )
    checks.append(check_disk(row, facts.workdir, facts.workdir_free))
    return checks


def check_locks(workdir: Path) -> Check:
    stale = [lock for lock in find_kernel_meta_locks(workdir) if lock.stale]
    if stale:
        paths = " ".join(str(lock.path) for lock in stale)
        return Check(
            "locks",
            "warn",
            f"{len(stale)} stale kernel_meta.lock file(s) (recorded pid dead): {paths}",
            f"rm {paths}  (ascend-setup install removes them before building)",
        )
    return Check("locks", "pass", f"no stale compile locks under {workdir}")


def check_last_failure(workdir: Path) -> Check:
    """The root cause of the install's failed step, read from its log by the same triage the install shows:
    a user who comes back to a stopped host asks doctor first."""
    state = Workdir(workdir).state
    if not state.is_file():
        return Check("last-failure", "pass", f"no install has run in {workdir}")
    try:
        steps = load_model(state, "state", RunState, follow=False).steps
        failed = [(name, rec) for name, rec in steps.items() if rec.state == "failed"]
        if not failed:
            return Check("last-failure", "pass", f"no failed step in {state}")
        name, record = failed[-1]
        log = Path(record.log)
        with open_input(log, "log", follow=False) as stream:
            diagnosis = triage_stream(stream)
    except (BadInput, AttributeError) as exc:
        return Check(
            "last-failure", "warn", f"the last install's record cannot be read: {getattr(exc, 'message', exc)}"
        )
    if diagnosis is None or diagnosis.id is None:
        return Check(
            "last-failure",
            "warn",
            f"step {name} failed: {record.error or 'no known cause'} ({log})",
            f"ascend-setup triage {log}",
        )
    return Check(
        "last-failure",
        "fail",
        f"step {name} failed: {diagnosis.cause} ({log}, line {diagnosis.line_number})",
        diagnosis.fix,
    )


def check_venv(venv: Path) -> Check:
    cfg = read_pyvenv_cfg(venv)
    if cfg is None:
        return Check("venv", "pass", f"no venv at {venv} yet (install creates a clean one)")
    if cfg.get("include-system-site-packages", "false").lower() == "true":
        return Check(
            "venv",
            "warn",
            f"{venv} includes system site-packages: stale torch builds leak in",
            f"set include-system-site-packages = false in {venv}/pyvenv.cfg, or recreate the venv",
        )
    return Check("venv", "pass", f"{venv} is isolated from system site-packages")


def check_pip_config(settings: Optional[PipSettings]) -> Check:
    """What of the user's pip configuration the tool's pip and uv runs ignore, and what they keep."""
    if settings is None:
        return Check("pip-config", "warn", "pip could not be asked for its configuration", "pass --index-url URL")
    kept = ", ".join(f"{k} = {v}" for k, v in settings.network.items()) or "none"
    source = f"index {settings.index}; network settings kept: {kept}"
    if settings.respect:
        return Check("pip-config", "pass", f"{source}; --respect-pip-config: all of it applies")
    if settings.ignored:
        return Check(
            "pip-config",
            "warn",
            f"{source}; ignored by ascend-setup's pip and uv runs: {'; '.join(settings.describe_ignored())}",
            "nothing to do, unless your site needs them: then pass --respect-pip-config",
        )
    return Check("pip-config", "pass", f"{source}; nothing else set")


def check_indexes(row: Row, urls: Mapping[str, str]) -> Tuple[Check, List[IndexAnswer]]:
    """Each index the install would use (`urls` by name: the mirror, pip's or --index-url, and the row's named
    ones), asked for one pin it serves."""
    answers = ask_indexes(
        [
            IndexNeed(n, [url], dict([next(iter(row.packages_from(n).items()))]))
            for n, url in urls.items()
            if url and row.packages_from(n)
        ]
    )
    worst = (
        "fail"
        if any(a.status == "unreachable" for a in answers)
        else "warn"
        if any(a.status != "reachable" for a in answers)
        else "pass"
    )
    fix = {
        "fail": "check the network, or pass --index NAME=URL / --index-url URL for an index this host can reach",
        "warn": "a nearer mirror answers faster: ascend-setup mirrors",
    }.get(worst)
    return Check("indexes", worst, "; ".join(a.line() for a in answers) or "no index to ask", fix), answers


@dataclass
class DoctorReport:
    checks: List[Check]
    facts: Dict[str, Any]  # the machine, CANN, NPU, indexes and Python as doctor found them (a JSON document)

    @property
    def failed(self) -> bool:
        return any(c.status == "fail" for c in self.checks)

    @property
    def bare(self) -> bool:
        """No CANN and no NPU: this machine cannot serve, only plan and audit."""
        return not self.facts["cann"] and not self.facts["npu"]["chips"]

    def to_json(self) -> Dict[str, Any]:
        return {"checks": [c.to_json() for c in self.checks], "facts": self.facts, "ok": not self.failed}


def check_toolchain(row: Row, installs: List[CannInstall], facts: MachineFacts, soc: Optional[str]) -> List[Check]:
    """The source build's toolchain, as preflight checks it: failures fail when this host will build
    vllm-ascend from source (by the row), and only warn otherwise."""
    why = builds_from_source(row, facts.arch, facts.glibc, device_of(soc))
    needed = f"vllm-ascend will be built from source: {why}" if why else "needed only for a source build"
    return [
        c if c.ok else replace(c, status="fail" if why else "warn", detail=f"{c.detail} ({needed})")
        for c in toolchain_checks(row, toolkit=Path(installs[0].toolkit) if installs else None, arch=facts.arch)
    ]


def run_doctor(
    row: Row,
    installs: List[CannInstall],
    interpreters: List[Interpreter],
    *,
    cann_home: Optional[str],
    workdir: Path,
    venv: Path,
    indexes: Mapping[str, str],
    settings: Optional[PipSettings] = None,
    install_python: Optional[Interpreter] = None,
    soc: Optional[str] = None,
) -> DoctorReport:
    """`row` as this host takes it; `installs` the CANN toolkits found (the first is the one used);
    `interpreters` those to check (interpreters_to_check); `indexes` the install's, by name (IndexSources);
    `install_python` the interpreter the install takes here (decide_python, asked by the command)."""
    facts = machine_facts(workdir)
    driver = installs[0].driver if installs else find_driver(Path(cann_home) if cann_home else None)
    npu = npu_facts(driver.root if driver else None)
    captured = capture_cann_env(installs)
    checks = [Check("row", "pass", f"checking against CANN {row.cann} (vllm-ascend {row.packages['vllm-ascend']})")]
    checks.append(check_cann(row, installs[0] if installs else None, cann_home))
    checks.append(check_glibc(row, facts))
    newest = newest_usable(row, interpreters)
    checks.append(check_python(row, interpreters, install_python))
    checks += check_driver_and_npu(driver, npu)
    checks += check_toolchain(row, installs, facts, soc or npu.soc_version)
    checks.append(check_nnal(installs))
    checks.append(check_set_env(captured))
    checks += check_workdir(row, facts)
    checks.append(check_locks(workdir))
    checks.append(check_last_failure(workdir))
    checks.append(check_venv(venv))
    checks.append(check_pip_config(settings))
    index_check, answers = check_indexes(row, indexes)
    checks.append(index_check)
    return DoctorReport(
        checks=checks,
        facts={
            "indexes": [a.to_json() for a in answers],
            "row": row.cann,
            "machine": facts.to_json(),
            "cann": installs[0].to_json() if installs else None,
            "npu": npu.to_json(),
            "env": captured.changes if isinstance(captured, CapturedEnv) else {},
            "python": newest.to_json() if newest else None,
        },
    )
