"""Terminal output: rich tables for people, JSON for programs. Nothing else prints."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any, Iterable, Optional, Sequence, TextIO

from ascend_setup.utils.redact import redact, redacting

if TYPE_CHECKING:  # rich is imported when something is drawn: --json output stays quick to start
    from rich.console import Console
    from rich.table import Table

STATUS_STYLE = {
    "pass": "green",
    "ok": "green",
    "done": "green",
    "wheel": "green",
    "warn": "yellow",
    "warning": "yellow",
    "started": "yellow",
    "sdist": "yellow",
    "stale": "yellow",
    "slow": "yellow",
    "info": "cyan",
    "pending": "dim",
    "fail": "red",
    "error": "red",
    "failed": "red",
    "unavailable": "red",
    "timeout": "red",
}


#: Below this many columns no table reads: plain lines instead (COLUMNS=0 used to print nothing at all).
MIN_WIDTH = 20
#: The width of plain lines: nothing is hard-wrapped, so a copied path or command still works.
PLAIN_WIDTH = 400


def _columns() -> Optional[int]:
    """COLUMNS as a number, or None when it is unset or not a number."""
    value = os.environ.get("COLUMNS", "").strip()
    return int(value) if value.isdigit() else None


def _width(stream: TextIO) -> Optional[int]:
    columns = _columns()
    if columns is not None:
        return columns if columns >= MIN_WIDTH else PLAIN_WIDTH
    return None if stream.isatty() else PLAIN_WIDTH


def plain(console: Console) -> bool:
    """Plain lines, not tables: off a terminal (unless COLUMNS asks for a width), or under MIN_WIDTH columns."""
    columns = _columns()
    if columns is not None:
        return columns < MIN_WIDTH
    return not console.is_terminal


def stdout_console() -> Console:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=False, width=_width(sys.stdout), file=redacting(lambda: sys.stdout))


def stderr_console() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False, width=_width(sys.stderr), file=redacting(lambda: sys.stderr))


class Output:
    """One run's stdout contract, handed to every command: under --json, exactly one JSON document, whatever
    happens (success, findings, bad input, an interrupt, a defect). It is decided from the command line before
    parsing, so a flag the parser refuses is answered in JSON too; nothing else writes JSON to stdout."""

    def __init__(self, json_mode: bool) -> None:
        self.json = json_mode
        self.printed = False

    def print_json(self, data: Any) -> None:
        """The document, serialised before anything is written and flushed at once: a value that cannot be
        serialised leaves stdout empty for the error document, and a later exit cannot drop what is buffered."""
        text = json.dumps(data, indent=2, sort_keys=False, default=str) + "\n"
        sys.stdout.write(redact(text))
        sys.stdout.flush()
        self.printed = True

    def error(self, message: str, hint: Optional[str], code: int) -> None:
        """`{"error", "hint", "exit"}` when the run ends without its document: what a --json caller reads."""
        if self.json and not self.printed:
            self.print_json({"error": message, "hint": hint, "exit": code})


def terminal_safe(text: str) -> str:
    """A foreign string (a host name, a finding's message, a package's metadata) as the terminal may show it:
    control and format characters (ESC, CR, BEL, bidi overrides, zero-widths) become visible escapes, so
    no file we read can move the cursor, retitle the window or hide text."""
    import unicodedata

    if text.isprintable():
        return text
    return "".join(
        c
        if c.isprintable() or c == " "
        else (c.encode("unicode_escape").decode("ascii") if unicodedata.category(c)[0] == "C" else c)
        for c in text
    )


def styled(value: Optional[str]) -> str:
    if value is None:
        return ""
    style = STATUS_STYLE.get(value.split()[0] if value else "", "")
    return f"[{style}]{value}[/{style}]" if style else value


def table(
    title: Optional[str],
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    status_column: Optional[int] = None,
    compact: bool = False,
) -> Table:
    """A plain table; the status column (if any) is coloured by its value. `compact`: no borders, and
    cells never break inside a word (for the short-celled tables that must read at 80 columns)."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    t = Table(
        title=title,
        show_lines=False,
        header_style="bold",
        box=None if compact else box.HEAVY_HEAD,
        pad_edge=not compact,
    )
    for col in columns:
        t.add_column(col, overflow="fold", no_wrap=compact)
    for row in rows:
        cells = [escape(terminal_safe("" if c is None else str(c))) for c in row]  # '[grid]' is text, not markup
        if status_column is not None:
            cells[status_column] = styled(cells[status_column])
        t.add_row(*cells)
    return t


def print_field(console: Console, label: str, value: str, indent: str = "  ") -> None:
    """`label: value` on one line when it fits, else the value whole on a line of its own below: a path
    longer than the line (a venv under a deep temp dir) read `venv: /tmp/...` cut at the edge."""
    value = terminal_safe(value)
    line = f"{indent}{label}: {value}"
    if len(line) <= console.width:
        console.print(line, soft_wrap=True, markup=False, highlight=False)
    else:
        console.print(f"{indent}{label}:", soft_wrap=True, markup=False, highlight=False)
        console.print(f"{indent}  {value}", soft_wrap=True, markup=False, highlight=False)


def print_prose(console: Console, text: str, indent: str = "", first: Optional[str] = None) -> None:
    """One sentence for people, wrapped at words at the console's width; a word longer than a line (a path,
    a URL) stays whole on a line of its own. `first` starts the first line instead of `indent`."""
    import textwrap

    for i, part in enumerate(
        textwrap.wrap(
            terminal_safe(text),
            width=max(40, console.width - len(indent)),
            break_long_words=False,
            break_on_hyphens=False,
        )
    ):
        console.print(
            (first if i == 0 and first is not None else indent) + part, soft_wrap=True, markup=False, highlight=False
        )


def print_items(console: Console, items: Iterable[Sequence[Optional[str]]], texts: Iterable[Sequence[str]]) -> None:
    """A list for people: per item a short header line (status coloured, then its names), then its texts
    indented below, wrapped at words (a table's narrow cells broke words: 'unavailabl|e')."""
    from rich.markup import escape

    for head, lines in zip(items, texts):
        status, *names = [h or "" for h in head]
        console.print(
            f"{styled(escape(status)):<8} " + "  ".join(escape(terminal_safe(n)) for n in names if n), soft_wrap=True
        )
        for line in lines:
            print_prose(console, line, "    ")


def print_table(
    console: Console,
    title: Optional[str],
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    status_column: Optional[int] = None,
) -> None:
    """A table whose every cell is printed whole. When it does not fit the console, its widest columns go
    on lines of their own below each row (as plan's reasons do); when even that does not fit, or off a
    terminal, one plain line per row: the first cell, then `column: value` for each non-empty cell."""
    from rich.markup import escape

    columns = [terminal_safe(c) for c in columns]  # cells and headers may be a file's text (a host, an id)
    body = [[terminal_safe("" if c is None else str(c)) for c in row] for row in rows]
    if title:  # a line of its own: inside the table it would wrap at the table's width
        console.print(f"[bold]{escape(title)}[/bold]", soft_wrap=True, highlight=False)
    if not plain(console):
        full = table(None, columns, body, status_column, compact=True)
        if _fits(console, full):
            console.print(full)
            return
        short = list(range(len(columns)))
        for col in sorted(short[1:], key=lambda i: -max([len(columns[i])] + [len(r[i]) for r in body])):
            short.remove(col)
            if _fits(
                console, table(None, [columns[i] for i in short], [[r[i] for i in short] for r in body], compact=True)
            ):
                _print_split(console, columns, body, short, status_column)
                return
    for row in body:
        head = row[0]
        rest = "  ".join(f"{columns[i]}: {v}" for i, v in enumerate(row) if i and v)
        console.print(f"  {head}  {rest}".rstrip(), soft_wrap=True, markup=False, highlight=False)


def _fits(console: Console, renderable: Any) -> bool:
    return console.measure(renderable, options=console.options.update_width(10_000)).maximum <= console.width


def _print_split(
    console: Console,
    columns: Sequence[str],
    body: Sequence[Sequence[str]],
    short: Sequence[int],
    status_column: Optional[int],
) -> None:
    """The short columns aligned, each row followed by its long values, one `column: value` line each."""
    from rich.markup import escape

    widths = {i: max([len(columns[i])] + [len(r[i]) for r in body]) for i in short}
    console.print(
        "[bold]" + escape("  ".join(columns[i].ljust(widths[i]) for i in short).rstrip()) + "[/bold]", highlight=False
    )
    for row in body:
        cells = [escape(row[i].ljust(widths[i])) for i in short]
        if status_column is not None and status_column in short:
            at = list(short).index(status_column)
            cells[at] = styled(escape(row[status_column])) + " " * (widths[status_column] - len(row[status_column]))
        console.print("  ".join(cells).rstrip(), highlight=False, soft_wrap=True)
        for i, value in enumerate(row):
            if i not in short and value:
                console.print(f"    {columns[i]}: {value}", soft_wrap=True, markup=False, highlight=False)
