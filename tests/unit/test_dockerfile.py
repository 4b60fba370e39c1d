"""Dockerfile.test runs the README's test command: the same line, its tiers replaced by the TESTS argument,
whose default is the README's tiers. A change to one of the two is a change to both."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TIERS = " tests/unit tests/functional"


def _readme_test_command() -> str:
    (line,) = [l for l in (REPO / "README.md").read_text().splitlines() if l.startswith("python3 -m venv .venv ")]
    assert line.endswith(TIERS), line
    return line


def _instructions() -> list:
    """The Dockerfile's instructions, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", (REPO / "Dockerfile.test").read_text())
    return [l.strip() for l in text.splitlines() if l.strip() and not l.lstrip().startswith("#")]


def test_the_last_step_is_the_readmes_test_command_on_TESTS() -> None:
    readme = _readme_test_command()
    assert _instructions()[-1] == "RUN " + readme[: -len(TIERS)] + " $TESTS"


def test_TESTS_defaults_to_the_readmes_tiers_and_BASE_to_debian_11_with_python_3_11() -> None:
    args = dict(l[len("ARG ") :].split("=", 1) for l in _instructions() if l.startswith("ARG ") and "=" in l)
    assert args["TESTS"].strip('"') == TIERS.strip()
    assert args["BASE"] == "python:3.11-bullseye"  # bullseye: Debian 11, glibc 2.31


def test_the_context_leaves_out_what_a_clean_clone_lacks() -> None:
    ignored = (REPO / ".dockerignore").read_text().split()
    assert {".git", ".venv", ".venv-*"} <= set(ignored)
