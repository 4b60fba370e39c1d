"""Flags that contradict themselves or measure nothing are bad input before anything runs. Generated over
every numeric flag and every on/off flag of the whole parser, so a new flag joins the class by construction."""

from __future__ import annotations

import argparse
from typing import Dict, Iterator, List, Tuple

import pytest

from ascend_setup.cli import flags
from ascend_setup.cli.main import build_parser
from ascend_setup.errors import BadInput


def walk(parser: argparse.ArgumentParser, path: List[str]) -> Iterator[Tuple[List[str], argparse.Action]]:
    """Every (command path, option) of the parser, nested subcommands included."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from walk(sub, [*path, name])
        elif action.option_strings:
            yield path, action


ALL = list(walk(build_parser(full=True), []))
NUMERIC = [(path, a) for path, a in ALL if hasattr(a.type, "range")]
ON_OFF = [(path, a) for path, a in ALL if isinstance(a, flags.Once)]


def parse(argv: List[str]) -> argparse.Namespace:
    return build_parser(argv).parse_args(argv)


def test_every_numeric_flag_declares_its_range() -> None:
    plain = [(" ".join(path), a.option_strings[0]) for path, a in ALL if a.type in (int, float)]
    assert not plain, f"numeric flags without a range (use flags.ranged): {plain}"
    assert len(NUMERIC) >= 10 and ON_OFF


@pytest.mark.parametrize("path, action", NUMERIC, ids=[f"{' '.join(p)} {a.option_strings[0]}" for p, a in NUMERIC])
def test_a_number_out_of_its_range_is_bad_input(path: List[str], action: argparse.Action) -> None:
    low, high = action.type.range  # type: ignore[union-attr]
    flag = action.option_strings[-1]
    for value in (
        str(low - (1 if isinstance(low, int) else low / 2 or 1e-12)),
        str(high * 2 + 1),
        "nan",
        "inf",
        "-inf",
        "1e-12" if low > 1e-12 else "-1",
        "twelve",
    ):
        with pytest.raises(BadInput) as err:
            parse([*path, f"{flag}={value}"])
        assert flag in err.value.message and value in err.value.message, err.value.message
    assert action.type(str(low)) == low and action.type(str(high)) == high  # type: ignore[misc]  # both ends are in


@pytest.mark.parametrize("path, action", ON_OFF, ids=[f"{' '.join(p)} {a.option_strings[0]}" for p, a in ON_OFF])
def test_an_on_off_flag_given_both_ways_is_bad_input(path: List[str], action: flags.Once) -> None:
    on, off = action.option_strings
    for first, second in ((on, off), (off, on)):
        with pytest.raises(BadInput, match="contradict"):
            parse([*path, first, second])


def test_an_on_off_flag_said_twice_the_same_way_is_one_answer() -> None:
    from ascend_setup.cli.main import OneLineParser

    parser = OneLineParser(prog="x")
    flags.resume_on_login(parser, "resume at login")
    assert parser.parse_args(["--resume-on-login", "--resume-on-login"]).resume_on_login is True
    assert parser.parse_args(["--no-resume-on-login", "--no-resume-on-login"]).resume_on_login is False
    assert parser.parse_args([]).resume_on_login is None


def test_the_same_named_index_twice_must_agree() -> None:
    from ascend_setup.cli.values import index_override
    from ascend_setup.index.urls import index_overrides

    def parse_index_overrides(given: List[str]) -> Dict[str, str]:
        return index_overrides([index_override(v) for v in given])

    assert parse_index_overrides(["ascend=http://m/simple", "ascend=http://m/simple/"]) == {
        "ascend": "http://m/simple/"
    }
    with pytest.raises(BadInput, match="twice with different URLs"):
        parse_index_overrides(["ascend=http://m/simple", "ascend=http://n/simple"])
