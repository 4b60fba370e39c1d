"""What a person sees while the install works: one line per step transition (with its log), and in a
terminal a live line with the current action (what pip or uv is collecting, downloading, building or
installing; the build's [n/m]) and the elapsed time. Off a terminal: the plain lines only."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Optional

from rich.console import Console
from rich.markup import escape

from ascend_setup.procs import set_activity

#: Lines of pip, uv and the build that say what is happening now (group 1: the action, shortened).
ACTION = re.compile(r"^\s*((?:Collecting|Downloading|Building wheel for|Installing collected packages|"
                    r"Attempting uninstall|Successfully installed|Processing|Preparing metadata|Uninstalling|"
                    r"Resolved|Prepared|Installed|Uninstalled|Downloaded|Building|Built)\b.*|\[\d+/\d+\].*)")


def action_of(line: str) -> Optional[str]:
    match = ACTION.match(line)
    if not match:
        return None
    text = match.group(1).split(" (from ", 1)[0]
    return text if len(text) <= 90 else text[:87] + "..."


class ConsoleReporter:
    """Step transitions on stderr (so --json output stays clean), and the live action in a terminal."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.status = None
        self.step = ""
        self.log: Optional[Path] = None
        self.since = 0.0

    def skipped(self, name: str, reason: str) -> None:
        self.console.print(f"[green]✓[/green] {name} [dim]({escape(reason)})[/dim]")

    def starting(self, name: str, reason: str, description: str, log: Optional[Path] = None) -> None:
        where = f" [dim]log: {escape(str(log))}[/dim]" if log else ""
        self.console.print(f"[bold]→ {name}[/bold]: {escape(description)} [dim]({escape(reason)})[/dim]{where}",
                           soft_wrap=True)
        self.step, self.log, self.since = name, log, time.monotonic()
        if self.console.is_terminal:
            self.status = self.console.status(self._text("starting"))
            self.status.start()
            set_activity(self.activity)

    def activity(self, line: str) -> None:
        action = action_of(line)
        if action and self.status is not None:
            self.status.update(self._text(action))

    def _text(self, action: str) -> str:
        return f"{self.step}: {escape(action)} [dim]· {time.monotonic() - self.since:.0f} s · log {escape(str(self.log))}[/dim]"

    def _stop(self) -> None:
        set_activity(None)
        if self.status is not None:
            self.status.stop()
            self.status = None

    def finished(self, name: str, seconds: float) -> None:
        self._stop()
        self.console.print(f"[green]✓ {name}[/green] done in {seconds:.1f}s")

    def failed(self, name: str, message: str) -> None:
        self._stop()
        self.console.print(f"[red]✗ {name}[/red] failed" + (f" [dim](log: {escape(str(self.log))})[/dim]"
                                                            if self.log else ""))
