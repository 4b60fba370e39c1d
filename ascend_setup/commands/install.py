"""`ascend-setup install`, `resume` and `status`: the pipeline on the engine."""

from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from ascend_setup.errors import BadInput
from ascend_setup.index.pipconfig import pip_settings
from ascend_setup.matrix import load_matrix, select_row
from ascend_setup.options import InstallOptions, build_install_options
from ascend_setup.paths import resolve_workdir
from ascend_setup.render import print_json, stderr_console, stdout_console, table
from ascend_setup.steps.base import Context
from ascend_setup.steps.pipeline import build_pipeline
from ascend_setup.steps.runner import Runner, status_rows
from ascend_setup.steps.state import StateStore
from ascend_setup.steps.verify import serving_hints, shell_lines


class ConsoleReporter:
    """Step transitions as one line each, on stderr so --json output stays clean."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def skipped(self, name: str, reason: str) -> None:
        self.console.print(f"[green]✓[/green] {name} [dim]({reason})[/dim]")

    def starting(self, name: str, reason: str, description: str) -> None:
        self.console.print(f"[bold]→ {name}[/bold]: {escape(description)} [dim]({escape(reason)})[/dim]")

    def finished(self, name: str, seconds: float) -> None:
        self.console.print(f"[green]✓ {name}[/green] done in {seconds:.1f}s")

    def failed(self, name: str, message: str) -> None:
        self.console.print(f"[red]✗ {name}[/red] failed")


def _runner(options: InstallOptions, console: Console) -> Runner:
    matrix = load_matrix(options.matrix).with_indexes(options.indexes)
    row = select_row(matrix, options.cann, platform.machine())
    settings = pip_settings(respect=options.respect_pip_config)
    ctx = Context(workdir=Path(options.workdir), options=options.to_record(), console=console,
                  extras={"matrix": matrix, "row": row, "pip_settings": settings})
    return Runner(build_pipeline(), ctx)


def _confirm(console: Console) -> bool:
    if not sys.stdin.isatty():
        return True
    answer = console.input("Proceed? [y/N] ")
    return answer.strip().lower() in ("y", "yes")


def execute(options: InstallOptions, *, dry_run: bool, assume_yes: bool, as_json: bool) -> int:
    console = stderr_console()
    runner = _runner(options, console)
    if dry_run:
        decisions = runner.plan()
        if as_json:
            print_json({"workdir": options.workdir, "dry_run": True, "steps": [
                {"name": d.step.name, "action": "run" if d.run else "skip", "reason": d.reason,
                 "description": d.step.describe(runner.ctx)} for d in decisions]})
        else:
            stdout_console().print(table(f"install plan for CANN {options.cann} in {options.workdir}",
                                         ["step", "action", "why", "what"],
                                         [[d.step.name, "run" if d.run else "skip", d.reason, d.step.describe(runner.ctx)]
                                          for d in decisions]))
        return 0
    if not assume_yes and not _confirm(console):
        console.print("nothing done")
        return 1
    state = runner.run(ConsoleReporter(console), options=options.to_record())
    shell, hints = shell_lines(runner.ctx), serving_hints(runner.ctx)
    if as_json:
        print_json({"workdir": options.workdir, "steps": status_rows(runner.steps, state), "shell": shell,
                    "hints": hints})
        return 0
    out = stdout_console()
    out.print(f"[green]vLLM-Ascend for CANN {options.cann} is ready in {options.venv}.[/green] In your shell:")
    for line in shell:
        out.print(f"  {line}", soft_wrap=True, markup=False)
    out.print("Serving hints for this row:")
    for hint in hints:
        out.print(f"  - {hint}", soft_wrap=True, markup=False)
    return 0


def run_install(args: argparse.Namespace) -> int:
    options = build_install_options(
        cann=args.cann, workdir=args.workdir, venv=args.venv, python=args.python, cann_home=args.cann_home,
        index_url=args.index_url, extra_index_urls=args.extra_index_url or [], mirror=args.mirror,
        installer=args.installer, soc=args.soc, force=args.force, matrix=args.matrix, indexes=args.index,
        lock=args.lock, respect_pip_config=args.respect_pip_config)
    return execute(options, dry_run=args.dry_run, assume_yes=args.yes, as_json=args.json)


def run_resume(args: argparse.Namespace) -> int:
    workdir = resolve_workdir(args.workdir)
    state = StateStore(workdir / "state.json").load()
    if not state.options:
        raise BadInput(f"nothing to resume in {workdir}: no install has recorded its options there",
                       hint="start one with 'ascend-setup install --cann VERSION'")
    options = InstallOptions.from_record(state.options)
    return execute(options, dry_run=args.dry_run, assume_yes=True, as_json=args.json)


def run_status(args: argparse.Namespace) -> int:
    workdir = resolve_workdir(args.workdir)
    state = StateStore(workdir / "state.json").load()
    rows = status_rows(build_pipeline(), state)
    if args.json:
        print_json({"workdir": str(workdir), "options": state.options, "steps": rows})
        return 0
    title = f"ascend-setup status ({workdir})" + ("" if state.steps else ": no install has run here")
    stdout_console().print(table(title, ["step", "state", "seconds", "log", "error"],
                                 [[r["name"], r["state"], "" if r["seconds"] is None else f"{r['seconds']:.1f}",
                                   r["log"], r["error"]] for r in rows], status_column=1))
    return 0
