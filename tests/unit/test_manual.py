"""The manual cannot drift: the generated command-line reference holds every command and option of the real
parser, the matrix schema every field of the models, the README stays short, its links resolve, and every
example in its command table is one the parser accepts."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import List

import pytest

from ascend_setup.cli.main import COMMANDS, build_parser
from ascend_setup.cli.manual import cli_reference, commands, matrix_schema, options

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()


def _sections(text: str) -> dict:
    """`## \\`ascend-setup WORDS\\`` heading -> its section."""
    parts = re.split(r"^## `ascend-setup ?(.*?)`$", text, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def test_every_command_and_option_is_in_the_reference() -> None:
    sections = _sections(cli_reference())
    walked = list(commands(build_parser(full=True)))
    assert {w[0] for w, _, _ in walked} == set(COMMANDS)
    missing: List[str] = []
    for words, _, parser in walked:
        section = sections.get(" ".join(words))
        if section is None:
            missing.append(" ".join(words))
            continue
        missing += [
            f"{' '.join(words)} {o}" for a in options(parser) for o in a.option_strings if f"`{o}`" not in section
        ]
    assert not missing, missing
    assert len(walked) > len(COMMANDS)  # sub-commands too (bundle verify, serve stop, ...)


def test_the_matrix_schema_holds_every_field() -> None:
    from ascend_setup.matrix.models import Matrix, Row

    text = matrix_schema()
    for model in (Matrix, Row):
        assert f"### {model.__name__}" in text
        missing = [f for f, info in model.model_fields.items() if f"| `{info.alias or f}` |" not in text]
        assert not missing, (model.__name__, missing)


def test_the_readme_is_short_and_its_links_resolve() -> None:
    assert len(README.splitlines()) <= 120
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    assert links and [link for link in links if not (REPO / link).exists()] == []


def _examples() -> List[str]:
    rows = [line for line in README.splitlines() if line.startswith("| `") and line.count("|") >= 4]
    return [cell.strip().strip("`").replace("\\|", "|") for row in rows for cell in [row.rsplit(" | ", 1)[-1][:-2]]]


@pytest.mark.parametrize("example", _examples())
def test_each_readme_example_parses(example: str) -> None:
    words = shlex.split(example.split(" 2>&1 | ")[-1])
    assert words[0] == "ascend-setup"
    argv = words[1:]
    build_parser(argv).parse_args(argv)  # a flag the parser does not know raises BadInput


def test_the_top_level_help_names_the_exit_codes_and_the_manual() -> None:
    text = build_parser().format_help()
    assert "exit codes:" in text and "130" in text and "docs/" in text
