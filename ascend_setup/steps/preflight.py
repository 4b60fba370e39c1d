"""preflight: the host can take this row (CANN, interpreter, disk) before anything is installed."""

from __future__ import annotations

import platform
from dataclasses import replace
from pathlib import Path
from typing import Any, Dict, List, Optional

from ascend_setup.engine.step import Step
from ascend_setup.errors import AscendSetupError, BadInput
from ascend_setup.host.cann import CannInstall, primary_cann, same_cann
from ascend_setup.host.checks import Check, check_cann, check_disk
from ascend_setup.host.interpreters import probe
from ascend_setup.host.machine import free_disk_bytes, glibc_version, memory_bytes, usable_cpus
from ascend_setup.host.npu import host_npu
from ascend_setup.host.toolchain import builds_from_source, toolchain_checks
from ascend_setup.managed.pinned import MANAGED
from ascend_setup.matrix.models import MIRROR, Row
from ascend_setup.matrix.soc import device_of
from ascend_setup.resolve.closure import IndexSources
from ascend_setup.resolve.lockfile import read_lock
from ascend_setup.resolve.pythons import PythonChoice, decide_python
from ascend_setup.sourcebuild.jobs import host_job_budget
from ascend_setup.steps.install_session import InstallSession
from ascend_setup.steps.options import which_index
from ascend_setup.steps.outputs import HostFacts
from ascend_setup.utils.files import open_append


def _cann_problem(row: Row, found: Optional[CannInstall], force: bool, cann_home: Optional[str]) -> Optional[Check]:
    """Doctor's CANN check as the install takes it: --force passes a CANN that differs from the row (or whose
    version cannot be read), never a missing one."""
    check = check_cann(row, found, cann_home)
    if check.status == "pass" or (force and found is not None):
        return None
    more = (
        ("'ascend-setup doctor' checks the whole host, and 'ascend-setup plan' forecasts an install from any machine")
        if found is None
        else "or --force"
    )
    return replace(check, status="fail", fix=f"{check.fix}; {more}")


def _fail(problems: List[Check], log: Path) -> None:
    """Every blocking problem at once, in the log too, so one fix round is enough."""
    with open_append(log) as handle:
        for problem in problems:
            handle.write(f"problem: {problem.detail}\n  fix: {problem.fix or ''}\n")
    first = problems[0]
    if len(problems) == 1:
        raise AscendSetupError(first.detail, hint=first.fix)
    details = "\n".join(f"  - {p.detail} (fix: {p.fix or ''})" for p in problems)
    raise AscendSetupError(
        f"{len(problems)} problems: " + "; ".join(p.detail for p in problems),
        hint="fix each as listed above",
        details=details,
    )


def host_problems(ctx: InstallSession) -> List[Check]:
    """What preflight refuses for certain from the host's facts alone (CANN, disk): the failing checks. The dry
    run predicts its verdict with the same function (it once said every step would run, on a host without CANN)."""
    row: Row = ctx.the_row
    options = ctx.options
    cann = _cann_problem(row, primary_cann(options.cann_home), bool(options.force), options.cann_home)
    disk = check_disk(row, ctx.root, free_disk_bytes(ctx.root))
    return [c for c in (cann, disk) if c is not None and c.status == "fail"]


class Preflight(Step[HostFacts]):
    """check CANN, interpreter, glibc, cores, memory and disk against the row"""

    name = "preflight"
    Output = HostFacts

    def inputs(self, ctx: InstallSession) -> Dict[str, Any]:
        o = ctx.options
        return {"cann": o.cann, "cann_home": o.cann_home, "python": o.python, "force": o.force, "soc": o.soc}

    def is_done(self, ctx: InstallSession) -> bool:
        if not ctx.has(self):
            return False
        facts = ctx.get(Preflight)
        if facts.managed:  # the python step installs it and checks it; preflight's choice stands
            return self._same_cann(ctx, facts)
        interp = probe(facts.python)
        if interp is None or interp.version != facts.python_version:
            return False
        return self._same_cann(ctx, facts)

    @staticmethod
    def _same_cann(ctx: InstallSession, facts: HostFacts) -> bool:
        found = primary_cann(ctx.options.cann_home)
        return found is not None and same_cann(found.version, facts.cann_version)

    def run(self, ctx: InstallSession, log: Path) -> HostFacts:
        row: Row = ctx.the_row
        options = ctx.options
        _log_ignored_pip_settings(ctx, log)
        problems = host_problems(ctx)
        found = primary_cann(options.cann_home)
        interp, managed = None, None
        try:
            choice = decide_python(
                row,
                preflight_sources(ctx),
                explicit=options.python,
                pool=ctx.the_index.pool(),
                builds=ctx.python_builds(),
            )
            interp, managed = choice.interpreter, choice.managed
            if managed is not None:  # where the python step will put it
                interp = replace(interp, path=str(managed.python_in(ctx.workdir.pythons)))
                choice = replace(choice, interpreter=interp)
            _log_python_choice(ctx, log, choice, bool(options.python) and options.python != MANAGED)
        except BadInput as exc:  # about the recorded --python
            raise exc.given_as("--python") from None
        except AscendSetupError as exc:
            problems.append(Check("python", "fail", exc.message, exc.hint))
        soc = options.soc
        npu = None
        if not soc:
            npu = host_npu(options.cann_home)
            soc = npu.soc_version
        source_build = builds_from_source(row, platform.machine(), glibc_version(), device_of(soc))
        if source_build:
            problems += _toolchain_problems(ctx, row, found, soc, source_build, log)
        if problems:
            _fail(problems, log)
        assert found is not None and interp is not None
        facts: Dict[str, Any] = {  # HostFacts validates each field
            "python": interp.path,
            "python_version": interp.version,
            "managed": managed.key if managed else None,
            "cann_version": found.version,
            "cann_toolkit": found.toolkit,
            "cann_root": found.root,
            "set_env": [str(p) for p in found.set_env_scripts()],
            "glibc": glibc_version(),
            "arch": platform.machine(),
            "cpus": usable_cpus(),
            "mem_total": memory_bytes().get("MemTotal", 0),
            "soc": soc,
            "npu_error": npu.error if npu else None,
            "device_type": device_of(soc),
            "source_build": source_build,
        }
        budget = host_job_budget(options.jobs)
        facts["max_jobs"] = f"{budget.jobs} ({budget.why})"
        ctx.console.print(
            f"note: a vllm-ascend source build would use MAX_JOBS={facts['max_jobs']}", soft_wrap=True, markup=False
        )
        with open_append(log) as handle:
            for key, value in facts.items():
                handle.write(f"{key}: {value}\n")
        return HostFacts(**facts)


def _toolchain_problems(
    ctx: InstallSession, row: Row, found: Optional[CannInstall], soc: Optional[str], why: str, log: Path
) -> List[Check]:
    """vllm-ascend will be built from source (`why`): every missing piece of its toolchain, at once, with the
    lock's cmake and setuptools when a lock was given. A missing CANN is reported once, by its own check."""
    given = ctx.options.lock
    lock = read_lock(Path(given)) if given and Path(given).is_file() else None
    plugin = next((p for p in lock.packages if p.name == "vllm-ascend"), None) if lock else None
    checks = toolchain_checks(
        row,
        toolkit=Path(found.toolkit) if found else None,
        arch=platform.machine(),
        pins={p.name: p.version for p in lock.packages} if lock else None,
        backend=plugin.backend if plugin else None,
    )
    ctx.console.print(f"note: vllm-ascend will be built from source: {why}", soft_wrap=True, markup=False)
    with open_append(log) as handle:
        handle.write(f"vllm-ascend will be built from source ({why}); its toolchain:\n")
        handle.writelines(c.line() + "\n" for c in checks)
    problems = [
        replace(c, detail=f"{c.id}: {c.detail}")
        for c in checks
        if not c.ok and (found is not None or c.id not in ("bisheng", "setenv.bash"))
    ]
    if soc and device_of(soc) is None:
        problems.append(
            Check(
                "soc",
                "fail",
                f"npu-smi gives SOC_VERSION {soc}, which vllm-ascend's build does not know",
                "pass --soc with the SOC_VERSION of this card, e.g. --soc ascend910b1",
            )
        )
    return problems


def preflight_sources(ctx: InstallSession) -> IndexSources:
    """Where the row's wheels are looked up before the mirror step has chosen: the explicit index, else
    pip's (any fresh mirror has the same files)."""
    options = ctx.options
    if ctx.bundle is not None:  # the bundle's lock names the indexes, and the bundle answers for them
        lock = read_lock(ctx.bundle.lock_path)
        return IndexSources(
            lock.indexes[MIRROR], tuple(lock.extra_index_urls), {n: u for n, u in lock.indexes.items() if n != MIRROR}
        )
    mirror = which_index(options.index_url, options.mirror, lambda: ctx.pip_settings.index if ctx.pip_settings else "")
    return IndexSources.for_row(ctx.the_matrix, ctx.the_row, mirror, options.extra_index_urls or [])


def _log_python_choice(ctx: InstallSession, log: Path, choice: PythonChoice, explicit: bool) -> None:
    lines = [f"python {choice.interpreter.minor} ({choice.interpreter.path})"] + choice.reasons
    if choice.gaps:
        lines.append(
            ("--python forces" if explicit else "every interpreter lacks")
            + ": "
            + "; ".join(choice.gaps)
            + " (a source build or an unavailable package)"
        )
    with open_append(log) as handle:
        handle.write("\n".join(lines) + "\n")
    for line in lines[1:]:
        ctx.console.print(f"note: {line}", soft_wrap=True, markup=False)


def _log_ignored_pip_settings(ctx: InstallSession, log: Path) -> None:
    """Say what of the user's pip configuration our pip and uv runs ignore (and where it came from)."""
    settings = ctx.pip_settings
    if settings is None or settings.respect or not settings.ignored:
        return
    with open_append(log) as handle:
        for line in settings.describe_ignored():
            handle.write(f"ignored pip setting: {line}\n")
    ctx.console.print(
        f"note: ignoring {len(settings.ignored)} setting(s) of your pip configuration "
        f"({', '.join(settings.ignored)}); --respect-pip-config keeps them",
        soft_wrap=True,
        markup=False,
    )
