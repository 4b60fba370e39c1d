"""A command's end-of-run work: registered on the run the front door opens, done when the command ends, dropped
when it was refused as bad input, and never done outside a run."""

from __future__ import annotations

from typing import List

import pytest

from ascend_setup.cli import main as front_door
from ascend_setup.errors import EXIT_BAD_INPUT, EXIT_FINDINGS, EXIT_OK
from ascend_setup.utils import run_context


def test_work_registered_again_under_its_name_replaces_it() -> None:
    done: List[str] = []
    with run_context.command_run(0.0) as run:
        run_context.at_end("memo", lambda: done.append("first answer"))
        run_context.at_end("other", lambda: done.append("other"))
        run_context.at_end("memo", lambda: done.append("second answer"))
        run.end()
        run.end()  # once
    assert done == ["second answer", "other"]


def test_outside_a_run_nothing_is_registered_and_no_time_has_passed() -> None:
    done: List[str] = []
    run_context.at_end("memo", lambda: done.append("written"))
    with run_context.command_run(0.0) as run:
        run.end()
    assert done == [] and run_context.elapsed() == 0.0


@pytest.mark.parametrize(("code", "ended"), [(EXIT_OK, True), (EXIT_FINDINGS, True), (EXIT_BAD_INPUT, False)])
def test_main_ends_the_run_unless_the_command_was_bad_input(
    monkeypatch: pytest.MonkeyPatch, code: int, ended: bool
) -> None:
    done: List[str] = []

    def command(argv: List[str]) -> int:
        run_context.at_end("memo", lambda: done.append("written"))
        assert run_context.elapsed() >= 0
        return code

    monkeypatch.setattr(front_door, "run_front_door", command)
    assert front_door.main([]) == code
    assert done == (["written"] if ended else [])
