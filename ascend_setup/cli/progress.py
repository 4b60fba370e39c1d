"""What a person sees while the install works: one line per step transition (with its log), and in a
terminal a live line with the current action (what pip or uv is collecting, downloading, building or
installing; the build's [n/m]) and a clock that ticks every second, kept to one line at any width. Off a
terminal: the plain lines, and every 30 s a heartbeat line naming the step and its last output (a CI log
that stays silent for 40 minutes looks hung)."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Optional

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from ascend_setup.engine.runner import FIRST_RUN
from ascend_setup.serve.run import phase_of
from ascend_setup.utils.procs import set_activity

if TYPE_CHECKING:  # rich's live widgets are imported only when a terminal shows them
    from rich.progress import Progress, TaskID
    from rich.status import Status

#: Seconds between two heartbeat lines off a terminal.
HEARTBEAT = 30.0

#: Lines of pip, uv and the build that say what is happening now (group 1: the action, shortened).
ACTION = re.compile(
    r"^\s*((?:Collecting|Downloading|Building wheel for|Installing collected packages|"
    r"Attempting uninstall|Successfully installed|Processing|Preparing metadata|Uninstalling|"
    r"Resolved|Prepared|Installed|Uninstalled|Downloaded|Building|Built)\b.*|\[\d+/\d+\].*)"
)


def action_of(line: str) -> Optional[str]:
    match = ACTION.match(line)
    if not match:
        return None
    text = match.group(1).split(" (from ", 1)[0]
    return text if len(text) <= 90 else text[:87] + "..."


class ConsoleReporter:
    """Step transitions on stderr (so --json output stays clean); the live line in a terminal, else heartbeats."""

    def __init__(self, console: Console, heartbeat: float = HEARTBEAT) -> None:
        self.console = console
        self.heartbeat = heartbeat
        self.status: Optional[Status] = None
        self.step = ""
        self.log: Optional[Path] = None
        self.since = 0.0
        self.action = ""
        self.last = ""  # the step's last non-empty output line, for the heartbeat
        self._stopped = threading.Event()
        self._clock: Optional[threading.Thread] = None

    def skipped(self, name: str, reason: str) -> None:
        self.console.print(f"[green]✓[/green] {name} [dim]({escape(reason)})[/dim]")

    def starting(self, name: str, reason: str, description: str, log: Optional[Path] = None) -> None:
        where = f" [dim]log: {escape(str(log))}[/dim]" if log else ""
        why = "" if reason == FIRST_RUN else f" [dim]({escape(reason)})[/dim]"
        self.console.print(f"[bold]→ {name}[/bold]: {escape(description)}{why}{where}", soft_wrap=True)
        self.step, self.log, self.since, self.action, self.last = name, log, time.monotonic(), "starting", ""
        set_activity(self.activity)
        if self.console.is_terminal:
            self.status = self.console.status(self._text())
            self.status.start()
        self._stopped = threading.Event()
        self._clock = threading.Thread(target=self._tick, args=(self._stopped,), daemon=True)
        self._clock.start()

    def activity(self, line: str) -> None:
        if line.strip():
            self.last = line.strip()
        action = action_of(line)
        if action:
            self.action = action
            if self.status is not None:
                self.status.update(self._text())

    def _tick(self, stopped: threading.Event) -> None:
        """In a terminal the clock moves every second, output or not; off one, a heartbeat line now and then."""
        while not stopped.wait(1.0 if self.status is not None else self.heartbeat):
            if self.status is not None:
                self.status.update(self._text())
            else:
                self.console.print(
                    f"… {self.step}: still running, {time.monotonic() - self.since:.0f} s; last "
                    f"output: {self.last or '(none yet)'}",
                    soft_wrap=True,
                    markup=False,
                    highlight=False,
                )

    def _text(self) -> Text:
        """One line: the spinner takes two columns; the log path is on the step's own line already."""
        clock = f" · {time.monotonic() - self.since:.0f} s"
        room = max(self.console.width - 2 - len(clock), 10)
        text = f"{self.step}: {self.action}"
        if len(text) > room:
            text = text[: room - 1] + "…"
        return Text(text + clock, no_wrap=True, overflow="ellipsis")

    def _stop(self) -> None:
        set_activity(None)
        self._stopped.set()
        if self._clock is not None:
            self._clock.join()
            self._clock = None
        if self.status is not None:
            self.status.stop()
            self.status = None

    def finished(self, name: str, seconds: float) -> None:
        self._stop()
        self.console.print(f"[green]✓ {name}[/green] done in {seconds:.1f}s")

    def failed(self, name: str, message: str) -> None:
        self._stop()
        self.console.print(
            f"[red]✗ {name}[/red] failed" + (f" [dim](log: {escape(str(self.log))})[/dim]" if self.log else "")
        )


def size_text(n: float) -> str:
    """Bytes for people: kB, MB or GB, one decimal."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


class TransferProgress:
    """Bytes and files of a batch of downloads: in a terminal a rich bar (bytes, files, speed); off one a
    line every `heartbeat` seconds, so a long download in a CI log never looks hung."""

    def __init__(self, console: Console, what: str, files: int, total_bytes: int, heartbeat: float = HEARTBEAT) -> None:
        self.console, self.what, self.files, self.total = console, what, files, total_bytes
        self.heartbeat = heartbeat
        self.done_files = 0
        self._bytes: Dict[str, int] = {}  # bytes on disk per file
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._bar: Optional[Progress] = None
        self._task: Optional[TaskID] = None
        self._thread: Optional[threading.Thread] = None

    @property
    def done_bytes(self) -> int:
        return sum(self._bytes.values())

    def line(self) -> str:
        return (
            f"{self.what}: {self.done_files} of {self.files} files, {size_text(self.done_bytes)} of "
            f"{size_text(self.total)}"
        )

    def __enter__(self) -> TransferProgress:
        if self.console.is_terminal:
            from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                console=self.console,
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task(self._files_text(), total=self.total or None)
        else:
            self._thread = threading.Thread(target=self._tick, daemon=True)
            self._thread.start()
        return self

    def _files_text(self) -> str:
        return f"{self.what} {self.done_files}/{self.files} files"

    def _tick(self) -> None:
        while not self._stopped.wait(self.heartbeat):
            self.console.print(f"… {self.line()}", soft_wrap=True, markup=False, highlight=False)

    def update(self, key: str, done: int) -> None:
        """`key` has `done` bytes on disk now."""
        with self._lock:
            self._bytes[key] = done
        self._refresh()

    def finished(self, key: str, size: int) -> None:
        with self._lock:
            self._bytes[key] = size
            self.done_files += 1
        self._refresh()

    def _refresh(self) -> None:
        if self._bar is not None and self._task is not None:  # set together
            self._bar.update(self._task, completed=self.done_bytes, description=self._files_text())

    def __exit__(self, *exc: object) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()
        if self._bar is not None:
            self._bar.stop()


class PhaseReporter(ConsoleReporter):
    """`serve`'s live line: the server's start-up phase ('loading weights', 'compiling', 'capturing graphs')
    read from its log, where the install's line names pip's action."""

    def activity(self, line: str) -> None:
        phase = phase_of(line)
        if phase:
            self.action = phase
            if self.status is not None:
                self.status.update(self._text())
        if line.strip():
            self.last = f"[{self.action}] {line.strip()}"
