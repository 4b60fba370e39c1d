"""The command contract: bad flags and paths give one line and exit 2; dry-run touches nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import assert_one_line_error


@pytest.mark.parametrize("args", [
    ["install"],
    ["install", "--cann", "9.1.0", "--bogus"],
    ["install", "--cann", "9.1.0", "--installer", "conda"],
    ["frobnicate"],
    ["matrix"],
    ["status", "--json", "extra"],
])
def test_bad_flags(cli, args) -> None:
    assert_one_line_error(cli(*args))


def test_bad_paths(cli, tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    cases = [
        (["install", "--cann", "9.1.0", "--workdir", str(a_file), "--dry-run"], "not a directory"),
        (["install", "--cann", "9.1.0", "--workdir", str(a_file / "sub"), "--dry-run"], "not a directory"),
        (["install", "--cann", "9.1.0", "--venv", str(a_file), "--workdir", str(tmp_path / "w"), "--dry-run"],
         "not a directory"),
        (["install", "--cann", "9.1.0", "--cann-home", str(tmp_path / "none"), "--workdir", str(tmp_path / "w"),
          "--dry-run"], "is not a directory"),
        (["install", "--cann", "9.1.0", "--python", str(tmp_path / "py"), "--workdir", str(tmp_path / "w"),
          "--dry-run"], "does not exist"),
        (["install", "--cann", "9.1.0", "--index-url", "ftp://x", "--workdir", str(tmp_path / "w"), "--dry-run"],
         "not an http(s)"),
        (["install", "--cann", "9.1.0", "--mirror", "fast", "--workdir", str(tmp_path / "w"), "--dry-run"],
         "not an http(s)"),
        (["status", "--workdir", str(a_file)], "not a directory"),
        (["resume", "--workdir", str(tmp_path / "nothing-here")], "nothing to resume"),
    ]
    for args, words in cases:
        assert words in assert_one_line_error(cli(*args)), args
    assert a_file.read_text() == "x"


def test_env_var_paths_are_checked_too(cli, tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    line = assert_one_line_error(cli("status", env={"ASCEND_SETUP_WORKDIR": str(a_file)}))
    assert str(a_file) in line


def test_dry_run_touches_nothing_and_status_json(cli, tmp_path: Path) -> None:
    workdir = tmp_path / "wd"
    proc = cli("install", "--cann", "9.1.0", "--workdir", str(workdir), "--dry-run", "--json")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["dry_run"] is True and plan["steps"][0]["name"] == "preflight"
    assert all(s["action"] == "run" for s in plan["steps"])
    assert not workdir.exists()
    status = cli("status", "--workdir", str(workdir), "--json")
    assert status.returncode == 0
    data = json.loads(status.stdout)
    assert data["workdir"] == str(workdir)
    assert [s["state"] for s in data["steps"]] == ["pending"] * len(data["steps"])
    assert set(data["steps"][0]) >= {"name", "state", "seconds", "log"}
    assert not workdir.exists()


def test_default_workdir_is_under_home(cli, home: Path) -> None:
    data = json.loads(cli("status", "--json").stdout)
    assert data["workdir"] == str(home / "ascend-setup")


def test_corrupt_state_is_exit_2_and_kept(cli, tmp_path: Path) -> None:
    workdir = tmp_path / "wd"
    workdir.mkdir()
    (workdir / "state.json").write_text("{half a file")
    for args in (["status", "--workdir", str(workdir)], ["resume", "--workdir", str(workdir)],
                 ["install", "--cann", "9.1.0", "--workdir", str(workdir), "--yes"]):
        line = assert_one_line_error(cli(*args))
        assert "state.json is corrupt" in line
    assert (workdir / "state.json").read_text() == "{half a file"


def test_version_and_module_entry(cli) -> None:
    proc = cli("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("ascend-setup ")
