"""What the commands' modules used to hold, called directly in its room: mirrors' flag checks and budget,
matrix check's rows, an audit's recorded indexes, the demo's --interrupt-at."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

import pytest

from ascend_setup.audit.recorded import with_recorded_indexes
from ascend_setup.errors import BadInput
from ascend_setup.matrix import load_matrix
from ascend_setup.matrix.check import RowCheck, check_rows, sdist_versions
from ascend_setup.matrix.models import MIRROR
from ascend_setup.mirrors.ranking_request import checked_flags
from ascend_setup.simulate.demo_run import check_interrupt_at


@pytest.mark.parametrize(
    "flags, refused",
    [
        ({"apply": True}, "--apply needs --venv"),
        ({"user": True}, "--global does nothing without --apply"),
        ({"apply": True, "user": True, "venv": "v"}, "two different pip configurations"),
        ({"venv": "v"}, "--venv does nothing without --apply"),
        ({"only": True}, "--only ranks just the --candidate URLs"),
    ],
)
def test_mirrors_flags_that_do_not_go_together_are_bad_input(flags: Dict[str, Any], refused: str) -> None:
    given = {"apply": False, "venv": None, "user": False, "only": False, "candidates": [], **flags}
    with pytest.raises(BadInput, match=refused):
        checked_flags(**given)


def test_mirrors_apply_needs_a_real_venv(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="not a venv"):
        checked_flags(apply=True, venv=str(tmp_path), user=False, only=False, candidates=[])
    (tmp_path / "pyvenv.cfg").write_text("home = /usr/bin\n")
    assert checked_flags(apply=True, venv=str(tmp_path), user=False, only=False, candidates=[]) == tmp_path


def test_matrix_check_rows_of_the_packaged_matrix_hold_without_the_indexes() -> None:
    matrix = load_matrix()
    report = check_rows(matrix, {}, live=None)
    assert list(report) == matrix.versions()
    assert not any(entry.bad(strict=True) for entry in report.values())


def test_a_newer_release_is_bad_only_under_strict() -> None:
    entry = RowCheck.model_validate({"newer": [{"version": "9.9.9", "prerelease": False, "files": "wheels"}]})
    assert entry.bad(strict=True) and not entry.bad(strict=False)
    assert RowCheck(stale_hints=["X is no longer read"]).bad(strict=False)


def test_an_sdist_that_is_not_vllm_ascends_is_bad_input(tmp_path: Path) -> None:
    other = tmp_path / "torch-2.5.1.tar.gz"
    other.write_bytes(b"")
    with pytest.raises(BadInput, match="not a vllm-ascend sdist"):
        sdist_versions([str(other)], load_matrix())
    with pytest.raises(BadInput, match="not an sdist file name"):
        sdist_versions([str(tmp_path / "notes.txt")], load_matrix())


def test_an_audit_takes_the_recorded_named_indexes_then_the_flags() -> None:
    matrix = load_matrix()
    name = next(iter(matrix.indexes))
    recorded = {MIRROR: "https://mirror.example/simple", name: "https://recorded.example/simple", "gone": "x"}
    assert with_recorded_indexes(matrix, recorded, {}).indexes[name] == "https://recorded.example/simple"
    overridden = with_recorded_indexes(matrix, recorded, {name: "https://flag.example/simple"})
    assert overridden.indexes[name] == "https://flag.example/simple" and "gone" not in overridden.indexes


@pytest.mark.parametrize("step, refused", [("mirror", "over too soon"), ("nowhere-such", "is not one of")])
def test_the_demo_refuses_an_interrupt_point_a_kill_cannot_land_in(step: str, refused: str) -> None:
    with pytest.raises(BadInput, match=refused):
        check_interrupt_at(step)
