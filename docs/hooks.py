"""mkdocs hook: fills the manual's generated pages from the code at build time (ascend_setup/cli/manual.py),
so the command-line reference and the matrix schema cannot drift from the parser and the models."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

#: The published figures fit is judged on (beside the clone, as CI keeps them) and the test helper that runs
#: fit on each: the manual shows the same table the test checks.
TESTS = Path(__file__).resolve().parent.parent / "tests"
REFEREE_MARKER = "<!-- generated: the referee table -->"
ROOMS_MARKER = "<!-- generated: the rooms by their imports -->"
SPEEDS_MARKER = "<!-- generated: the referee speeds -->"

MARKERS = {
    "<!-- generated: the command line -->": "cli_reference",
    "<!-- generated: the matrix schema -->": "matrix_schema",
}


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    from ascend_setup.cli import manual

    for marker, name in MARKERS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, getattr(manual, name)())
    if REFEREE_MARKER in markdown:
        markdown = markdown.replace(REFEREE_MARKER, referee_table())
    if SPEEDS_MARKER in markdown:
        markdown = markdown.replace(SPEEDS_MARKER, referee_table(speeds=True))
    if ROOMS_MARKER in markdown:
        markdown = markdown.replace(ROOMS_MARKER, rooms_table())
    return markdown


def rooms_table() -> str:
    """Each room on the level its imports put it, from the import graph the architecture test reads."""
    sys.path.insert(0, str(TESTS))
    from helpers.import_graph import room_levels

    rows = ["| level | room | imports |", "|---|---|---|"]
    for level, room, below in room_levels():
        named = ", ".join(f"`{r}`" for r in below if r != "(package)") or "nothing of the package"
        rows.append(f"| {level} | `{room}` | {named} |")
    return "\n".join(rows)


def referee_table(speeds: bool = False) -> str:
    """fit against every published KV, concurrency and weights figure (or single-stream speed), or why there is
    no table."""
    sys.path.insert(0, str(TESTS))
    import tempfile

    from helpers.cli import clean_env
    from helpers.referee import KINDS, REFEREE, SPEEDS, run_all, speed_table, table, within

    if not (REFEREE / "MEASUREMENTS.tsv").is_file():
        return f"*(The referee was not beside this checkout when the manual was built: {REFEREE}.)*"
    with tempfile.TemporaryDirectory() as home:
        results = run_all(clean_env(Path(home)), kinds=SPEEDS if speeds else KINDS)
    if speeds:
        return "\n".join(speed_table(results))
    held = sum(1 for r in results if r.error is not None and within(r.row, r.error))
    return "\n".join(table(results) + ["", f"{held} of {len(results)} figures within the goal."])
