"""mkdocs hook: fills the manual's generated pages from the code at build time (ascend_setup/cli/manual.py),
so the command-line reference and the matrix schema cannot drift from the parser and the models."""

from __future__ import annotations

from typing import Any

MARKERS = {
    "<!-- generated: the command line -->": "cli_reference",
    "<!-- generated: the matrix schema -->": "matrix_schema",
}


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    from ascend_setup.cli import manual

    for marker, name in MARKERS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, getattr(manual, name)())
    return markdown
