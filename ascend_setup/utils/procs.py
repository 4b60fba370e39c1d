"""Subprocesses of the pipeline: argument lists only, output into the step log, failures explained by the
caller's `explain` (knowledge's triage: this leaf imports nothing of the domain)."""

from __future__ import annotations

import os
import subprocess
from contextvars import ContextVar
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Protocol, Sequence, Union

from ascend_setup.errors import StepFailed
from ascend_setup.utils.diskfull import disk_full, in_output, path_in
from ascend_setup.utils.files import open_append

LineHook = Callable[[str], None]
#: An argument of a command: a string, or a path (each passed as str()).
Arg = Union[str, "os.PathLike[str]"]
#: Who is shown each output line as it arrives (the terminal's live progress), besides the step log.
_activity: ContextVar[Optional[LineHook]] = ContextVar("activity", default=None)


class Explanation(Protocol):
    """A failure's root cause in a command's output (knowledge's Diagnosis)."""

    cause: str
    fix: Optional[str]

    def render(self) -> str: ...


#: Finds the root cause in a failed command's output lines (knowledge.scan.triage), or None.
Explain = Callable[[List[str]], Optional[Explanation]]


def set_activity(hook: Optional[LineHook]) -> None:
    _activity.set(hook)


def run_logged(argv: Sequence[Arg], log: Path, *, env: Optional[Mapping[str, str]] = None,
               cwd: Optional[Path] = None, on_line: Optional[LineHook] = None, what: Optional[str] = None,
               writes: Optional[Path] = None, explain: Optional[Explain] = None) -> None:
    """Run `argv`, appending every output line to `log`; a non-zero exit raises StepFailed naming the
    root cause `explain` finds in this attempt's output (not its last line), or DiskFull when the output reports
    ENOSPC (naming the path it gives, else `writes`: where the command writes, else its cwd)."""
    what = what or Path(argv[0]).name
    merged: Dict[str, str] = dict(os.environ if env is None else env)
    merged.setdefault("PYTHONUNBUFFERED", "1")
    lines: List[str] = []
    with open_append(log) as handle:
        handle.write("$ " + " ".join(map(str, argv)) + "\n")
        handle.flush()
        try:
            proc = subprocess.Popen([str(a) for a in argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=merged, cwd=cwd, text=True, errors="replace",
                                    bufsize=1)
        except OSError as exc:
            raise StepFailed(f"{what} could not start: {exc}") from None
        assert proc.stdout is not None
        log_full: Optional[OSError] = None
        for line in proc.stdout:
            if log_full is None:
                try:
                    handle.write(line)
                    handle.flush()  # a SIGKILL of ours must not take the child's last words with it
                except OSError as exc:  # the disk is full: keep reading (the child must not block), report after
                    log_full = exc
            lines.append(line)
            if on_line is not None:
                on_line(line.rstrip("\n"))
            shown = _activity.get()
            if shown is not None:
                shown(line.rstrip("\n"))
        code = proc.wait()
        if log_full is None:
            handle.write(f"[exit {code}]\n")
    if log_full is not None and code == 0:
        raise log_full
    if code != 0:
        full = in_output(lines)
        if full is not None:
            raise disk_full(path_in(full) or writes or cwd or log.parent, what)
        if log_full is not None:
            raise log_full
        diagnosis = explain(lines) if explain is not None else None
        if diagnosis is not None:
            raise StepFailed(f"{what} failed: {diagnosis.cause}",
                             hint=f"{diagnosis.fix + '; ' if diagnosis.fix else ''}full log: {log}",
                             details=diagnosis.render())
        raise StepFailed(f"{what} exited with status {code}", hint=f"see {log}")


def capture(argv: Sequence[Arg], *, env: Optional[Mapping[str, str]] = None, timeout: float = 300,
            cwd: Optional[Path] = None) -> subprocess.CompletedProcess:
    """Run a short check and keep its output (no log). A program that cannot start is exit 127."""
    args = [str(a) for a in argv]
    try:
        return subprocess.run(args, capture_output=True, text=True, env=dict(env) if env else None,
                              timeout=timeout, stdin=subprocess.DEVNULL, cwd=cwd)
    except OSError as exc:
        return subprocess.CompletedProcess(args, 127, "", str(exc))


def pid_alive(pid: int, unknown: bool = True) -> bool:
    """Whether `pid` runs. A zombie (killed, never reaped: common in containers whose PID 1 does not reap
    orphans) holds its pid but will never do anything again, so it counts as gone. `unknown` is the answer
    when /proc cannot tell (True keeps a compile lock; False lets an interrupt stop waiting)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return unknown
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"
