"""Terminal output: rich tables for people, JSON for programs. Nothing else prints."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, Iterable, Optional, Sequence

if TYPE_CHECKING:  # rich is imported when something is drawn: --json output stays quick to start
    from rich.console import Console
    from rich.table import Table

STATUS_STYLE = {"pass": "green", "ok": "green", "done": "green", "wheel": "green",
                "warn": "yellow", "warning": "yellow", "started": "yellow", "sdist": "yellow", "stale": "yellow",
                "slow": "yellow", "info": "cyan", "pending": "dim",
                "fail": "red", "error": "red", "failed": "red", "unavailable": "red", "timeout": "red"}


def stdout_console() -> "Console":
    from rich.console import Console

    return Console(highlight=False, soft_wrap=False)


def stderr_console() -> "Console":
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def styled(value: Optional[str]) -> str:
    if value is None:
        return ""
    style = STATUS_STYLE.get(value.split()[0] if value else "", "")
    return f"[{style}]{value}[/{style}]" if style else value


def table(title: Optional[str], columns: Sequence[str], rows: Iterable[Sequence[Any]],
          status_column: Optional[int] = None) -> "Table":
    """A plain table; the status column (if any) is coloured by its value."""
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=title, show_lines=False, header_style="bold")
    for col in columns:
        t.add_column(col, overflow="fold")
    for row in rows:
        cells = [escape("" if c is None else str(c)) for c in row]  # '[grid]' is text, not markup
        if status_column is not None:
            cells[status_column] = styled(cells[status_column])
        t.add_row(*cells)
    return t
