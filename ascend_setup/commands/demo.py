"""`ascend-setup demo`: the whole main job against a simulated Ascend host, on any machine."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

from ascend_setup.cli import flags
from ascend_setup.cli.render import Output, stderr_console, stdout_console
from ascend_setup.errors import BadInput
from ascend_setup.utils.files import open_append
from ascend_setup.utils.paths import resolve_workdir


def _workdir(args: argparse.Namespace, stack: ExitStack) -> tuple[Path, bool]:
    """(the demo's workdir, whether it is ours to remove afterwards), locked like an install's workdir: a
    second demo in the same directory is refused (exit 3), not raced."""
    from ascend_setup.engine.workdir import Workdir
    from ascend_setup.steps.pipeline import run_lock
    from ascend_setup.utils.tempdirs import kept_tempdir

    if args.workdir:
        path = resolve_workdir(args.workdir)
        for locked in (False, True):  # before the lock (create nothing in a full directory), and under it
            if path.exists() and any(p != Workdir(path).run_lock for p in path.iterdir()):
                raise BadInput(f"--workdir {path} is not empty", hint="give the demo a new or empty directory")
            if not locked:
                path.mkdir(parents=True, exist_ok=True)
                stack.enter_context(run_lock(Workdir(path)))
        return path, False
    path = Path(tempfile.mkdtemp(prefix="ascend-setup-demo-", dir=kept_tempdir() if args.keep else None))
    stack.enter_context(run_lock(Workdir(path)))
    return path, not args.keep


def run(args: argparse.Namespace, output: Output) -> int:
    from ascend_setup.simulate.story import QUICK, interrupt_points

    if args.interrupt_at in QUICK:
        raise BadInput(
            f"--interrupt-at {args.interrupt_at}: that step is over too soon for a SIGKILL to land in it",
            hint=f"pick one of {', '.join(interrupt_points())}",
        )
    if args.interrupt_at not in interrupt_points():
        raise BadInput(f"--interrupt-at {args.interrupt_at!r} is not one of {', '.join(interrupt_points())}")
    with ExitStack() as stack:
        return _run(args, output, *_workdir(args, stack))


def _run(args: argparse.Namespace, output: Output, workdir: Path, ours: bool) -> int:
    from ascend_setup.simulate.story import LABEL, run_demo
    from ascend_setup.utils.interrupts import at_interrupt

    if ours:
        at_interrupt(lambda: shutil.rmtree(workdir, ignore_errors=True))  # made by us, for this run only
    console = stderr_console()

    def show(line: str) -> None:
        console.print(line, soft_wrap=True, markup=False, highlight=False)

    if ours:  # said before anything is removed, so that a rerun can keep what this one would lose
        show(f"{LABEL} working in {workdir}, removed at the end (--keep keeps it)")
    log = None
    try:
        if args.json:
            log = open_append(workdir / "demo.log")
        summary = run_demo(
            workdir,
            interrupt_at=args.interrupt_at,
            installer=args.installer,
            show=show,
            stream=log if log else sys.stderr,
            kept=not ours,
        )
    finally:
        if log:
            log.close()
        if ours:
            shutil.rmtree(workdir, ignore_errors=True)
    summary["workdir_kept"] = not ours
    if args.json:
        output.print_json(summary)
        return 0 if summary["audit"]["ok"] else 1
    out = stdout_console()
    out.print(
        f"{LABEL} the main job, end to end, against a simulated Atlas A2 host (no NPU, no real CANN):",
        soft_wrap=True,
        markup=False,
    )
    for step in summary["steps"]:
        seconds = "" if step["seconds"] is None else f"{step['seconds']:6.1f} s"
        out.print(f"  {step['state']:<6} {step['name']:<17} {seconds}", markup=False)
    resumed = summary["resumed"]
    if resumed:
        continued = f", and the rerun asked for {resumed['continued_with']}" if resumed.get("continued_with") else ""
        kept = (
            f" ({resumed['kept_bytes'] / 1e6:.1f} MB of the sdist on disk{continued})" if resumed["kept_bytes"] else ""
        )
        out.print(
            f"resumed: SIGKILL during step {resumed['step']}{kept}; 'ascend-setup resume' took it from there",
            soft_wrap=True,
            markup=False,
        )
    audit = summary["audit"]
    out.print(f"audit: {audit['summary']}", markup=False)
    out.print(f"native libraries: {summary['native']}", soft_wrap=True, markup=False)
    out.print("serving hints for this row:")
    for hint in summary["hints"]:
        out.print(f"  - {hint}", soft_wrap=True, markup=False)
    served = summary["serve"]
    out.print(
        f"{LABEL} serve {served['model']}: ready in {served['ready_seconds']:.1f} s; smoke answer "
        f"{served['answer']!r}; TTFT {served['ttft_s'] * 1000:.0f} ms on a fresh prefix, TPOT "
        f"{served['tpot_ms']:.1f} ms (p90 {served['tpot_p90_ms']:.1f}), decode {served['tok_s']:.1f} tok/s "
        f"(fit predicted {served['predicted_tok_s']:.1f}, ratio {served['ratio']:.2f})",
        soft_wrap=True,
        markup=False,
    )
    swept = served["bench"]
    levels = swept["levels"]
    out.print(
        f"{LABEL} bench {served['model']} at concurrency {', '.join(str(lv['concurrency']) for lv in levels)}: "
        f"{' / '.join(format(lv['output_tok_s'], '.0f') for lv in levels)} tok/s, TPOT "
        f"{' / '.join(format(lv['tpot_ms'], '.1f') for lv in levels)} ms ({swept['client']}); the sweep took "
        f"{swept['seconds']:.1f} s; stopped with 'serve stop' ({served['seconds']:.0f} s in all)",
        soft_wrap=True,
        markup=False,
    )
    if not ours:  # only what still exists is pointed at
        out.print(f"the simulated install is kept in {workdir}; to use its venv:", soft_wrap=True, markup=False)
        for line in summary["shell"]:
            out.print(f"  {line}", soft_wrap=True, markup=False)
        out.print(
            f"  ascend-setup probe --device cpu --gib 0.1 --venv {workdir / 'install' / 'venv'}",
            soft_wrap=True,
            markup=False,
        )
    where = f"kept in {workdir}" if not ours else "removed"
    out.print(
        f"{LABEL} {summary['seconds']:.0f} s; the demo's workdir was {where}. On an Ascend host: "
        "ascend-setup install --cann 9.1.0",
        soft_wrap=True,
        markup=False,
    )
    return 0 if audit["ok"] else 1


def demo_arguments(p: argparse.ArgumentParser) -> None:
    flags.common(p)
    flags.workdir(
        p, "a new or empty directory to run in, kept afterwards (default: a temporary one, removed)", env=False
    )
    p.add_argument("--keep", action="store_true", help="keep the temporary workdir (its logs, venv and lock)")
    p.add_argument(
        "--interrupt-at",
        metavar="STEP",
        default="download",
        help="where to SIGKILL the install before resuming it: 'download' (the middle of the vllm-ascend "
        "sdist download, the default), a step name (not mirror or verify: over too soon), or 'none'",
    )
    flags.installer(p)
    p.set_defaults(func=run)


ARGUMENTS = {"demo": demo_arguments}
