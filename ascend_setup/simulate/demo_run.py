"""The demo's run around its story: where --interrupt-at may land, the workdir it runs in (the one given, or
a temporary one it removes), and the story run there with its log."""

from __future__ import annotations

import shutil
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple

from ascend_setup.engine.workdir import Workdir
from ascend_setup.errors import BadInput
from ascend_setup.simulate.story import LABEL, QUICK, interrupt_points, run_demo
from ascend_setup.steps.pipeline import run_lock
from ascend_setup.utils.files import open_append
from ascend_setup.utils.interrupts import at_interrupt
from ascend_setup.utils.paths import resolve_workdir
from ascend_setup.utils.tempdirs import kept_tempdir


def check_interrupt_at(step: str) -> None:
    """A step a SIGKILL can land in: not one over too soon (mirror, verify), nor a name the story lacks."""
    if step in QUICK:
        raise BadInput(
            f"--interrupt-at {step}: that step is over too soon for a SIGKILL to land in it",
            hint=f"pick one of {', '.join(interrupt_points())}",
        )
    if step not in interrupt_points():
        raise BadInput(f"--interrupt-at {step!r} is not one of {', '.join(interrupt_points())}")


def demo_workdir(given: Optional[str], keep: bool, stack: ExitStack) -> Tuple[Path, bool]:
    """(the demo's workdir, whether it is ours to remove afterwards), locked like an install's workdir: a
    second demo in the same directory is refused (exit 3), not raced."""
    if given:
        path = resolve_workdir(given)
        for locked in (False, True):  # before the lock (create nothing in a full directory), and under it
            if path.exists() and any(p != Workdir(path).run_lock for p in path.iterdir()):
                raise BadInput(f"--workdir {path} is not empty", hint="give the demo a new or empty directory")
            if not locked:
                path.mkdir(parents=True, exist_ok=True)
                stack.enter_context(run_lock(Workdir(path)))
        return path, False
    path = Path(tempfile.mkdtemp(prefix="ascend-setup-demo-", dir=kept_tempdir() if keep else None))
    stack.enter_context(run_lock(Workdir(path)))
    return path, not keep


def demo_in(
    workdir: Path, ours: bool, *, interrupt_at: str, installer: str, show: Callable[[str], None], logged: bool
) -> Dict[str, Any]:
    """The story's summary, run in `workdir` (removed afterwards, and on an interrupt, when `ours`); its
    commands' output goes to demo.log when `logged` (stdout is a JSON document's), else to stderr."""
    if ours:
        at_interrupt(lambda: shutil.rmtree(workdir, ignore_errors=True))  # made by us, for this run only
        # said before anything is removed, so that a rerun can keep what this one would lose
        show(f"{LABEL} working in {workdir}, removed at the end (--keep keeps it)")
    log = None
    try:
        if logged:
            log = open_append(workdir / "demo.log")
        summary = run_demo(
            workdir,
            interrupt_at=interrupt_at,
            installer=installer,
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
    return summary
