"""Each command's options model and its parser say the same thing: a flag without a field, or a field no flag
sets, fails here. Generated over the whole parser, so a new flag or a new command joins by construction."""

from __future__ import annotations

import argparse
from typing import Dict, Iterator, List, Set, Tuple, Type

import pytest

from ascend_setup.cli.command import FRONT_DOOR, Options, options_model
from ascend_setup.cli.main import build_parser


def leaves(
    parser: argparse.ArgumentParser, path: List[str], dests: Set[str]
) -> Iterator[Tuple[List[str], argparse.ArgumentParser, Set[str]]]:
    """Every runnable (command path, parser, the dests a parse of it sets), nested sub-commands included."""
    own = set(dests)
    subs = None
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            subs = action
            if action.dest not in (argparse.SUPPRESS, "command"):
                own.add(action.dest)
        elif action.dest not in (argparse.SUPPRESS, "help", "version"):
            own.add(action.dest)
    own |= {k for k in parser._defaults if k not in FRONT_DOOR}
    if subs is None:
        yield path, parser, own
        return
    for name, sub in subs.choices.items():
        yield from leaves(sub, [*path, name], own)


LEAVES = [(path, p, dests) for path, p, dests in leaves(build_parser(full=True), [], set()) if path]


def model_of(parser: argparse.ArgumentParser) -> Type[Options]:
    return options_model(parser._defaults["options"])


def fields(model: Type[Options]) -> Dict[str, str]:
    """dest -> field name: the flag's name is the field's alias where they differ (`json` -> `json_output`)."""
    return {(info.alias or name): name for name, info in model.model_fields.items()}


@pytest.mark.parametrize("path, parser, dests", LEAVES, ids=[" ".join(p) for p, _, _ in LEAVES])
def test_every_flag_has_a_field_and_every_field_a_flag(
    path: List[str], parser: argparse.ArgumentParser, dests: Set[str]
) -> None:
    assert "options" in parser._defaults, f"{' '.join(path)} has no options model"
    declared = fields(model_of(parser))
    assert sorted(dests - declared.keys()) == [], "flags without a field"
    assert sorted(declared.keys() - dests) == [], "fields no flag sets"


@pytest.mark.parametrize("path, parser, dests", LEAVES, ids=[" ".join(p) for p, _, _ in LEAVES])
def test_the_options_are_frozen(path: List[str], parser: argparse.ArgumentParser, dests: Set[str]) -> None:
    model = model_of(parser)
    assert model.model_config.get("frozen") and model.model_config.get("extra") == "forbid"
