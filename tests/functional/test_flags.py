"""Flags defined once: their help, their errors named by the layer that knows the flag, and the decisions the
commands share (the CANN check of preflight and doctor, the install's Python in doctor, fit's row)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
from helpers.cli import assert_one_line_error
from helpers.session import session_for
from rich.console import Console

from ascend_setup.errors import BadInput
from ascend_setup.host.interpreters import Interpreter
from ascend_setup.index.tags import Target
from ascend_setup.matrix import load_matrix, select_row
from ascend_setup.simulate.fake_cann import build_fake_cann


@pytest.mark.parametrize(
    "command, variable, named",
    [
        (["status"], "ASCEND_SETUP_WORKDIR", True),
        (["doctor"], "ASCEND_SETUP_WORKDIR", True),
        (["mirrors"], "ASCEND_SETUP_WORKDIR", True),
        (["probe"], "ASCEND_SETUP_VENV", True),
        (["demo"], "ASCEND_SETUP_WORKDIR", False),  # the demo never runs in a real workdir: it reads no variable
        (["audit"], "ASCEND_SETUP_VENV", False),
        (["mirrors"], "ASCEND_SETUP_VENV", False),
    ],
)
def test_a_path_flag_names_its_variable_where_the_command_reads_it(command, variable, named) -> None:
    from ascend_setup.cli.main import build_parser

    sub = build_parser(full=True)._subparsers._group_actions[0].choices[command[0]]  # type: ignore[union-attr]
    flag = "--workdir" if variable.endswith("WORKDIR") else "--venv"
    (action,) = [a for a in sub._actions if flag in a.option_strings]
    assert (variable in action.help) is named, action.help


def test_target_parse_names_the_value_not_a_flag() -> None:
    for args in (("2.x", "aarch64", "3.11"), ("2.31", "sparc", "3.11"), ("2.31", "aarch64", "three")):
        with pytest.raises(BadInput) as caught:
            Target.parse(*args)
        assert "--" not in caught.value.message, caught.value.message


@pytest.mark.parametrize(
    "args, env, said",
    [
        (["--glibc", "2.x"], {}, "--glibc '2.x' is not a glibc version"),
        (["--glibc", "2.31", "--arch", "sparc"], {}, "--arch 'sparc' is not one of"),
        (["--glibc", "2.31", "--arch", "x86_64", "--python", "three"], {}, "--python three is not a CPython 3 version"),
        (
            ["--glibc", "2.31", "--arch", "x86_64"],
            {"ASCEND_SETUP_PYTHON": "3.99"},
            "ASCEND_SETUP_PYTHON 3.99 is Python 3.99, outside the row's range",
        ),
    ],
)
def test_plan_errors_name_the_flag_or_the_variable_given(cli, args, env, said) -> None:
    line = assert_one_line_error(cli("plan", "--cann", "9.1.0", *args, env=env))
    assert said.replace("three", "'three'") in line, line


def test_preflight_and_doctor_say_the_same_of_a_cann_that_differs(cli, tmp_path: Path) -> None:
    """One CANN check (host/checks.py): doctor lists it, preflight refuses it and adds --force."""
    from ascend_setup.steps.preflight import host_problems

    fake = build_fake_cann(tmp_path / "Ascend", version="9.0.1")
    matrix = load_matrix()
    (tmp_path / "wd").mkdir()
    ctx = session_for(
        tmp_path / "wd",
        cann_home=str(fake.root),
        matrix=matrix,
        row=select_row(matrix, "9.1.0"),
        console=Console(file=io.StringIO()),
    )
    (refused,) = [p for p in host_problems(ctx) if p.id == "cann"]
    proc = cli(
        "doctor",
        "--cann-home",
        str(fake.root),
        "--cann",
        "9.1.0",
        "--workdir",
        str(tmp_path / "wd"),
        "--index-url",
        "http://127.0.0.1:9/simple/",
        "--json",
    )
    (checked,) = [c for c in json.loads(proc.stdout)["checks"] if c["id"] == "cann"]
    assert checked["status"] == refused.status == "fail" and checked["detail"] == refused.detail
    assert "the row needs CANN 9.1.0" in refused.detail
    assert refused.fix == f"{checked['fix']}; or --force"
    assert not [
        p
        for p in host_problems(
            session_for(
                tmp_path / "wd", cann_home=str(fake.root), force=True, matrix=matrix, row=select_row(matrix, "9.1.0")
            )
        )
        if p.id == "cann"
    ]


def test_doctor_searches_the_interpreters_once(tmp_path: Path, monkeypatch, capsys) -> None:
    """The python check and the install's choice (decide_python) read one search: a search is seconds."""
    from ascend_setup.cli import main as cli
    from ascend_setup.host import doctor_checks as doctor
    from ascend_setup.resolve import pythons

    real = Interpreter(sys.executable, "%d.%d.%d" % sys.version_info[:3], True)
    searches = []
    monkeypatch.setattr(doctor, "find_interpreters", lambda *extra: searches.append(1) or [real])

    def second_search() -> list:
        raise AssertionError("doctor searched the interpreters again")

    monkeypatch.setattr(pythons, "find_interpreters", second_search)
    fake = build_fake_cann(tmp_path / "Ascend", version="9.1.0")
    cli.main(
        [
            "doctor",
            "--cann-home",
            str(fake.root),
            "--workdir",
            str(tmp_path / "wd"),
            "--index-url",
            "http://127.0.0.1:9/simple/",
            "--json",
        ]
    )
    data = json.loads(capsys.readouterr().out)
    assert searches == [1]
    assert data["facts"]["target"]["python_executable"] == sys.executable
    assert data["facts"]["python"]["path"] == sys.executable


@pytest.mark.parametrize("installed, row", [("9.0.1", "9.0.1"), (None, None)])
def test_fit_takes_the_installed_cann_row_else_the_newest(tmp_path: Path, monkeypatch, installed, row) -> None:
    """As doctor and mirrors: no fixed default row (it was 9.1.0, which a newer row would have left stale)."""
    from ascend_setup.cli.main import build_parser
    from ascend_setup.commands.fit import FitOptions
    from ascend_setup.fit import fit_request as request

    monkeypatch.delenv("ASCEND_SETUP_CANN_HOME", raising=False)
    if installed:
        monkeypatch.setenv("ASCEND_SETUP_CANN_HOME", str(build_fake_cann(tmp_path / "Ascend", version=installed).root))
    else:
        monkeypatch.setattr(request, "primary_cann", lambda home: None)
    monkeypatch.setattr(request, "estimate", lambda files, card, row, **_: row)
    monkeypatch.setattr(request, "host_calibration", lambda *_: None)
    args = build_parser(full=True).parse_args(["fit", "model", "--workdir", str(tmp_path / "wd")])
    chosen = request.fit_model(FitOptions.from_namespace(args), None, None)  # type: ignore[arg-type]
    assert chosen.cann == (row or load_matrix().newest().cann)


def test_mirrors_apply_venv_expands_the_home(cli, home: Path) -> None:
    """`--venv=~/v` (no shell expands a ~ after '='): the venv in HOME, not a directory named '~'."""
    import venv as venv_module

    venv_module.create(home / "v", with_pip=False)
    proc = cli(
        "mirrors",
        "--only",
        "--candidate",
        "http://127.0.0.1:9/simple/",
        "--budget",
        "1",
        "--apply",
        "--venv=~/v",
        "--workdir",
        str(home / "wd"),
    )
    assert "not a venv" not in proc.stderr and proc.returncode == 1, proc.stderr  # ranked: no index answered
