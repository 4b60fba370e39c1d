"""The --json contract, generated over every command module's `DOCUMENTS`: each document is a model with a
JSON schema that holds it to its fields (extra="forbid"), named by a command path the parser has, and shown
in the manual's command-line reference. A command that declares its documents joins by construction."""

from __future__ import annotations

import argparse
from typing import Set, Type

import pytest
from pydantic import BaseModel

from ascend_setup.cli.main import build_parser
from ascend_setup.cli.manual import cli_reference, command_words, commands, documents

DOCUMENTS = documents()
PATHS: Set[str] = {" ".join(words) for words, _, _ in commands(build_parser(full=True))}


def test_the_moved_commands_declare_documents() -> None:
    assert {"triage", "mirrors", "matrix show", "doctor", "audit", "fleet report", "demo"} <= set(DOCUMENTS)


@pytest.mark.parametrize("path, model", sorted(DOCUMENTS.items()), ids=sorted(DOCUMENTS))
def test_each_document_has_a_schema_and_holds_to_it(path: str, model: Type[BaseModel]) -> None:
    schema = model.model_json_schema()
    defs = schema.get("$defs", {})
    # A document of several shapes (a dry run's plan, a failed step) is a union: each shape is held the same way.
    shapes = [defs[s["$ref"].split("/")[-1]] if "$ref" in s else s for s in schema.get("anyOf", [schema])]
    for shape in shapes:
        assert shape.get("type") == "object" and shape.get("properties"), shape
        assert shape.get("additionalProperties") is False, (
            f"{model.__name__}: {shape.get('title')} must forbid extra keys"
        )


@pytest.mark.parametrize("path", sorted(DOCUMENTS))
def test_each_document_is_of_a_command_the_parser_has(path: str) -> None:
    words = command_words(path)
    assert words in PATHS, f"{path}: no command {words!r}"
    flags = path[len(words) :].split()
    if flags:
        parser = next(p for w, _, p in commands(build_parser(full=True)) if " ".join(w) == words)
        known = {o for a in parser._actions if isinstance(a, argparse.Action) for o in a.option_strings}
        assert set(flags) <= known, f"{path}: the flags of its path are not {words}'s"


def test_the_reference_shows_every_document() -> None:
    text = cli_reference()
    missing = [path for path in DOCUMENTS if f"### `ascend-setup {path} --json`" not in text]
    assert not missing, missing
