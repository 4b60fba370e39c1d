"""`ascend-setup install`, `resume` and `status`: the pipeline on the engine."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Type, Union

from pydantic import BaseModel, ConfigDict, Field, RootModel
from typing_extensions import Annotated, Literal

from ascend_setup.cli import flags
from ascend_setup.cli.command import LazyOptions, Options, Result
from ascend_setup.errors import AscendSetupError, BadInput

if TYPE_CHECKING:
    from rich.console import Console

    from ascend_setup.cli.render import Output
    from ascend_setup.commands.install_options import InstallCommandOptions
    from ascend_setup.engine.runner import Runner
    from ascend_setup.steps.install_session import InstallSession
    from ascend_setup.steps.options import InstallOptions, InstallRow


class ResumeOptions(Options):
    workdir: Optional[str] = None
    dry_run: bool = False
    on_login: bool = False


class StatusOptions(Options):
    workdir: Optional[str] = None


class _Document(BaseModel):
    model_config = ConfigDict(extra="forbid")


#: A step as `status` shows it: its recorded state, `running (pid N)` while a run holds the lock, else pending.
StepState = Union[
    Literal["done", "failed", "interrupted", "pending"], Annotated[str, Field(pattern=r"^running \(pid \d+\)$")]
]


class StepRow(_Document):
    name: str
    state: StepState
    seconds: Optional[float] = None
    started_at: Optional[float] = None
    log: Optional[str] = None
    error: Optional[str] = None


class InstallDone(_Document):
    """`install --json` (and `resume --json`) when every step is done."""

    ok: Literal[True] = True
    workdir: str
    changed: bool
    ran: List[str]
    steps: List[StepRow]
    shell: List[str]
    hints: List[str]


class InstallFailed(_Document):
    """`install --json` when a step fails: which step, the error, its root cause and the log to read.
    `exit` repeats `exit_code` under the name every other error document uses; both are kept for callers."""

    ok: Literal[False] = False
    workdir: str
    step: Optional[str] = None
    error: str
    hint: Optional[str] = None
    root_cause: Optional[str] = None
    log: Optional[str] = None
    exit_code: int
    exit: int
    steps: List[StepRow]


class Problem(_Document):
    what: str
    fix: str


class PreflightForecast(_Document):
    will_fail: bool
    problems: List[Problem]


class PlannedStep(_Document):
    name: str
    action: Literal["run", "skip"]
    reason: str
    description: str


class InstallPlan(_Document):
    """`install --dry-run --json`: what each step would do, whether preflight would refuse, the closure."""

    workdir: str
    dry_run: Literal[True] = True
    changed: bool
    preflight: PreflightForecast
    closure: Dict[str, Any]
    steps: List[PlannedStep]


class StatusDocument(_Document):
    workdir: str
    options: Dict[str, Any]
    steps: List[StepRow]


class InstallDocument(RootModel[Union[InstallDone, InstallPlan, InstallFailed]]):
    """`install --json` and `resume --json`: done, the plan of a dry run, or the step that failed."""


DOCUMENTS: Dict[str, Type[BaseModel]] = {
    "install": InstallDocument,
    "resume": InstallDocument,
    "status": StatusDocument,
}


def _runner(
    options: InstallOptions, loaded: InstallRow, console: Console, *, dry_run: bool = False
) -> Runner[InstallSession]:
    """The pipeline on the matrix and row the command loaded (`loaded`), with pip's settings for this run."""
    from ascend_setup.engine.runner import Runner
    from ascend_setup.engine.workdir import Workdir
    from ascend_setup.index.pipconfig import network_settings_for_this_run, pip_settings
    from ascend_setup.matrix.newcann import provenance_line, record
    from ascend_setup.steps.install_session import InstallSession, install_store
    from ascend_setup.steps.pipeline import build_pipeline, run_lock

    settings = network_settings_for_this_run(pip_settings(respect=options.respect_pip_config))
    if loaded.derived is not None:  # once: the run then reads the matrix recorded in the workdir (resume and audit too)
        console.print(provenance_line(loaded.derived, loaded.matrix), soft_wrap=True, markup=False)
        if not dry_run:
            options = options.model_copy(
                update={"matrix": str(record(loaded.matrix, loaded.derived, Path(options.workdir)))}
            )
            console.print(f"the derived row is recorded in {options.matrix}", soft_wrap=True, markup=False)
    workdir = Workdir(Path(options.workdir))
    session = InstallSession(
        workdir, console=console, options=options, matrix=loaded.matrix, row=loaded.row, pip_settings=settings
    )
    return Runner(build_pipeline(), session, install_store(workdir), run_lock(workdir))


def step_rows(rows: List[Dict[str, Any]]) -> List[StepRow]:
    return [StepRow.model_validate(r) for r in rows]


def failure_document(runner: Runner[InstallSession], exc: AscendSetupError) -> InstallFailed:
    """--json output when the run fails: which step, the error, its root cause, and the log to read."""
    from ascend_setup.engine.runner import status_rows

    try:
        state = runner.store.load()
    except AscendSetupError:
        state = None
    failed = next((n for n, r in state.steps.items() if r.state == "failed"), None) if state else None
    record = state.steps.get(failed) if state and failed else None
    return InstallFailed(
        workdir=runner.session.options.workdir,
        step=failed,
        error=exc.message,
        hint=exc.hint,
        root_cause=exc.details,
        log=record.log if record else None,
        exit_code=exc.exit_code,
        exit=exc.exit_code,
        steps=step_rows(status_rows(runner.steps, state)) if state else [],
    )


def closure_line(closure: Dict[str, Any]) -> str:
    if closure.get("error"):
        return f"closure: cannot be resolved now: {closure['error']}" + (
            f" ({closure['hint']})" if closure.get("hint") else ""
        )
    t, c = closure["target"], closure["summary"]
    where = f" (lock {closure['lock']})" if closure.get("lock") else " (resolved now; the resolve step writes the lock)"
    return (
        f"closure for glibc {t['glibc']} / {t['arch']} / Python {t['python']}: {c['packages']} packages, "
        f"{c['wheels']} wheels, {c['sdists']} source builds, {c['unavailable']} unavailable, "
        f"{closure['download_bytes'] / 1e6:.1f} MB{where}"
    )


def _confirm(console: Console) -> bool:
    if not sys.stdin.isatty():
        return True
    answer = console.input("Proceed? \\[y/N] ")  # escaped, or rich takes it for markup and drops it
    return answer.strip().lower() in ("y", "yes")


def _rerun_cannot_fix(runner: Runner[InstallSession], exc: AscendSetupError) -> bool:
    """Bad input, or a host that preflight refused (no CANN, no interpreter, no disk): the same again at login."""
    return isinstance(exc, BadInput) or runner.ran[-1:] == ["preflight"]


def plan(runner: Runner[InstallSession]) -> Result:
    """`--dry-run`: each step's decision, whether preflight would refuse this host, and the closure."""
    from ascend_setup.cli.render import print_table
    from ascend_setup.steps.preflight import host_problems
    from ascend_setup.steps.resolve import preview_closure

    session = runner.session
    decisions = runner.plan()
    refused = host_problems(session) if any(d.run and d.step.name == "preflight" for d in decisions) else []
    closure = preview_closure(session)
    document = InstallPlan(
        workdir=session.options.workdir,
        changed=any(d.run for d in decisions),
        preflight=PreflightForecast(
            will_fail=bool(refused), problems=[Problem(what=p.detail, fix=p.fix or "") for p in refused]
        ),
        closure=closure,
        steps=[
            PlannedStep(
                name=d.step.name,
                action="run" if d.run else "skip",
                reason=d.reason,
                description=d.step.describe(session),
            )
            for d in decisions
        ],
    )

    def render(out: Console) -> None:
        print_table(
            out,
            f"install plan for CANN {session.options.cann} in {session.options.workdir}",
            ["step", "action", "why", "what"],
            [[s.name, s.action, s.reason, s.description] for s in document.steps],
        )
        out.print(closure_line(closure), soft_wrap=True, markup=False)
        for p in closure.get("not_wheels", []):
            out.print(
                f"  {p['name']} {p['version'] or ''}: {p['outcome']} ({p['reason']})", soft_wrap=True, markup=False
            )
        for problem in refused:
            out.print(f"preflight will fail: {problem.detail} (fix: {problem.fix or ''})", soft_wrap=True, markup=False)

    return Result(0, InstallDocument(document), render)


def run_pipeline(runner: Runner[InstallSession], output: Output, console: Console) -> Result:
    """Every step that is not done, in order; the resume-on-login block goes once the install is done."""
    from ascend_setup.cli.progress import ConsoleReporter
    from ascend_setup.engine.login import install_block, remove_block
    from ascend_setup.engine.runner import status_rows
    from ascend_setup.steps.verify import serving_hints, shell_lines

    options = runner.session.options
    workdir = Path(options.workdir)
    if options.resume_on_login:
        console.print(
            f"resume-on-login: {install_block(workdir)} resumes this install at the next login after a stop",
            soft_wrap=True,
            markup=False,
        )
    try:
        state = runner.run(ConsoleReporter(console), options=options.record())
    except AscendSetupError as exc:
        if options.resume_on_login and _rerun_cannot_fix(runner, exc) and remove_block(workdir):
            console.print(
                "resume-on-login: removed again: a rerun at login cannot fix this failure; fix it, then "
                "run the install again",
                soft_wrap=True,
                markup=False,
            )
        if output.json:  # the document of the failure; the front door then prints the error's one line
            output.print_json(InstallDocument(failure_document(runner, exc)).model_dump(mode="json"))
        raise
    remove_block(workdir)  # done: a resume-on-login block for this workdir has served
    document = InstallDone(
        workdir=options.workdir,
        changed=bool(runner.ran),
        ran=runner.ran,
        steps=step_rows(status_rows(runner.steps, state)),
        shell=shell_lines(runner.session),
        hints=serving_hints(runner.session),
    )
    return Result(0, InstallDocument(document), lambda out: render_ready(out, options, document))


def render_ready(out: Console, options: InstallOptions, document: InstallDone) -> None:
    from rich.markup import escape

    out.print(
        f"[green]vLLM-Ascend for CANN {options.cann} is ready in {escape(str(options.venv))}.[/green] In your shell:",
        soft_wrap=True,
    )
    for line in document.shell:
        out.print(f"  {line}", soft_wrap=True, markup=False)
    out.print(
        "Before you download a model: 'ascend-setup probe' measures this card's HBM bandwidth, and "
        "'ascend-setup fit MODEL_DIR' tells whether a model fits and how fast it will decode.",
        soft_wrap=True,
        markup=False,
    )
    out.print("Serving hints for this row:")
    for hint in document.hints:
        out.print(f"  - {hint}", soft_wrap=True, markup=False)


def execute(options: InstallOptions, loaded: InstallRow, output: Output, *, dry_run: bool, assume_yes: bool) -> Result:
    from ascend_setup.cli.render import stderr_console

    console = stderr_console()
    runner = _runner(options, loaded, console, dry_run=dry_run)
    if dry_run:
        return plan(runner)
    if not assume_yes and not _confirm(console):
        console.print("nothing done")
        return Result(1)
    return run_pipeline(runner, output, console)


def run_install(options: InstallCommandOptions, output: Output) -> Result:
    from ascend_setup.cli.render import stderr_console
    from ascend_setup.dists.venv_reader import adoption_notice, venv_target_kind
    from ascend_setup.engine.login import bashrc, remove_block
    from ascend_setup.steps.options import resolve_install

    recorded, loaded = resolve_install(options, dry_run=options.dry_run)
    if options.adopt_venv and venv_target_kind(Path(recorded.venv)) == "foreign":
        stderr_console().print(adoption_notice(Path(recorded.venv)), soft_wrap=True, markup=False)
    if options.resume_on_login is False and remove_block(Path(recorded.workdir)):
        stderr_console().print(
            f"removed the resume-on-login block for {recorded.workdir} from {bashrc()}", soft_wrap=True
        )
    return execute(recorded, loaded, output, dry_run=options.dry_run, assume_yes=options.yes)


def on_login(workdir: Path) -> int:
    """What the ~/.bashrc block runs at login: quiet when the install is done (the block goes) or running;
    else one line saying where it stopped, and the resume in the background."""
    from ascend_setup.cli.render import stderr_console
    from ascend_setup.engine.login import remove_block, resume_in_background
    from ascend_setup.engine.runner import status_rows
    from ascend_setup.engine.workdir import Workdir
    from ascend_setup.steps.install_session import install_store
    from ascend_setup.steps.pipeline import build_pipeline, run_lock

    state = install_store(Workdir(workdir)).load()
    running = run_lock(Workdir(workdir)).running()
    rows = status_rows(build_pipeline(), state, running)
    if all(r["state"] == "done" for r in rows):
        remove_block(workdir)
        return 0
    if running:
        return 0
    stopped = next(r for r in rows if r["state"] != "done")
    log = resume_in_background(workdir)
    stderr_console().print(
        f"ascend-setup: the install in {workdir} stopped at step {stopped['name']} "
        f"({stopped['state']}); resuming it in the background (log {log})",
        soft_wrap=True,
        markup=False,
    )
    return 0


def run_resume(options: ResumeOptions, output: Output) -> Result:
    from ascend_setup.engine.workdir import Workdir
    from ascend_setup.steps.install_session import install_store
    from ascend_setup.steps.options import InstallOptions
    from ascend_setup.utils.paths import resolve_workdir

    if options.on_login:
        return Result(on_login(resolve_workdir(options.workdir, mode="read", exist=True)))
    workdir = resolve_workdir(options.workdir, mode="plan" if options.dry_run else "write", exist=True)
    state = install_store(Workdir(workdir)).load()
    if not state.options:
        raise BadInput(
            f"nothing to resume in {workdir}: no install has recorded its options there",
            hint="start one with 'ascend-setup install --cann VERSION'",
        )
    recorded = InstallOptions.from_record(state.options).moved_to(workdir)
    return execute(recorded, recorded.load_row(), output, dry_run=options.dry_run, assume_yes=True)


def run_status(options: StatusOptions, output: Output) -> Result:
    from ascend_setup.cli.render import print_table
    from ascend_setup.engine.runner import status_rows
    from ascend_setup.engine.workdir import Workdir
    from ascend_setup.steps.install_session import install_store
    from ascend_setup.steps.pipeline import build_pipeline, run_lock
    from ascend_setup.utils.paths import resolve_workdir

    workdir = resolve_workdir(options.workdir, mode="read", exist=True)
    state = install_store(Workdir(workdir)).load()
    rows = status_rows(build_pipeline(), state, run_lock(Workdir(workdir)).running())
    document = StatusDocument(workdir=str(workdir), options=state.options, steps=step_rows(rows))

    def render(out: Console) -> None:
        title = f"ascend-setup status ({workdir})" + ("" if state.steps else ": no install has run here")
        print_table(
            out,
            title,
            ["step", "state", "seconds", "log", "error"],
            [
                [r.name, r.state, "" if r.seconds is None else f"{r.seconds:.1f}", r.log, r.error]
                for r in document.steps
            ],
            status_column=1,
        )

    return Result(0, document, render)


def install_arguments(p: argparse.ArgumentParser) -> None:
    flags.common(p)
    flags.cann(p, required=True)
    flags.venv(p, "venv to build (default <workdir>/venv)")
    flags.workdir(p, "state, logs, downloads, build tree")
    flags.python(
        p,
        "interpreter for the venv, or 'managed' for a pinned CPython the install fetches (the default "
        "where the host has none in the row's range)",
    )
    flags.managed_python(p)
    flags.cann_home(p, "CANN root, e.g. /usr/local/Ascend")
    flags.index_url(p)
    flags.extra_index_url(p, "another index beside the mirror, for anything the row does not assign (repeatable)")
    flags.index_overrides(p)
    flags.lock(p, "install this lock (from 'plan --lock') instead of resolving here")
    p.add_argument(
        "--bundle",
        metavar="PATH",
        help="install from this offline bundle (a directory or tar from "
        "'ascend-setup bundle'): no index is asked; a bundle for another target, row or SOC is refused",
    )
    flags.vllm_ascend(p)
    flags.mirror(p)
    flags.installer(p)
    flags.soc(p, "build target, e.g. ascend910b3 (default: from npu-smi)")
    p.add_argument(
        "--jobs",
        type=flags.ranged(int, 1, 1024, "a number of parallel compile jobs"),
        metavar="N",
        help="MAX_JOBS for a vllm-ascend source build (default: from the memory the build can use, 4 GiB a job)",
    )
    flags.build_deps_url(p)
    p.add_argument("--force", action="store_true", help="proceed although the installed CANN differs from the row")
    p.add_argument(
        "--adopt-venv",
        action="store_true",
        help="install into an existing venv that ascend-setup did not "
        "make (it says what it will change; it never deletes it)",
    )
    flags.dry_run(p, "print the plan of steps; touch nothing")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    flags.resume_on_login(
        p,
        "add a block to ~/.bashrc that resumes this install at the next login after a stop "
        "(removed when the install completes); --no-resume-on-login removes it",
    )
    p.set_defaults(func=run_install, options=LazyOptions("ascend_setup.commands.install_options:InstallCommandOptions"))


def resume_arguments(p: argparse.ArgumentParser) -> None:
    flags.common(p)
    flags.workdir(p, "the workdir whose install to resume; a copied one resumes in place")
    flags.dry_run(p, "print what the resumed run would do; touch nothing")
    p.add_argument(
        "--on-login",
        action="store_true",
        help="what the ~/.bashrc block runs: if the install is not "
        "done and not running, say so and resume it in the background",
    )
    p.set_defaults(func=run_resume, options=ResumeOptions)


def status_arguments(p: argparse.ArgumentParser) -> None:
    flags.common(p)
    flags.workdir(p, "the workdir to report on, read only")
    p.set_defaults(func=run_status, options=StatusOptions)


ARGUMENTS = {"install": install_arguments, "resume": resume_arguments, "status": status_arguments}
