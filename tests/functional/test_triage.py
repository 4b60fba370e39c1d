"""`ascend-setup triage FILE|-`: the command as a user runs it (exit codes, --json, standard input, bad input)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import assert_one_line_error

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"


def test_a_known_cause_exits_0_with_line_context_and_fix(cli) -> None:
    proc = cli("triage", str(LOGS / "dlog-missing.log"))
    assert proc.returncode == 0, proc.stderr
    assert "cause (dlog-missing)" in proc.stdout and "fix: " in proc.stdout and "line 602:" in proc.stdout
    assert "> " in proc.stdout and "Could NOT find dlog" in proc.stdout


def test_json_shape_and_standard_input(cli) -> None:
    text = (LOGS / "root-dir-unset.log").read_text()
    proc = subprocess.run(
        [sys.executable, "-m", "ascend_setup", "triage", "--json", "-"], input=text, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert set(data) == {
        "id",
        "line_number",
        "line",
        "cause",
        "fix",
        "context",
        "evidence",
        "processes",
        "reported_by",
        "codes",
        "unknown_codes",
    }
    assert data["id"] == "root-dir-unset" and data["line_number"] == 541 and "setuptools" in data["fix"]
    assert data["line"] in data["context"] and data["evidence"] == []


def test_no_known_cause_exits_1_and_still_shows_the_most_error_like_line(cli, tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("copying a_error.py -> build/\nERROR: something odd happened\nFailed to build x\n")
    proc = cli("triage", "--json", str(log))
    assert proc.returncode == 1
    data = json.loads(proc.stdout)
    assert data["id"] is None and data["line_number"] == 2 and data["line"] == "ERROR: something odd happened"
    clean = cli("triage", str(LOGS / "clean-compile-custom-kernels-0.log"))
    assert clean.returncode == 1 and "no known cause" in clean.stdout
    empty = cli("triage", "--json", str(LOGS / "clean-compile-custom-kernels-0.log"))
    assert set(json.loads(empty.stdout)) == set(data)


def test_codes_are_listed_with_their_meaning_and_the_unknown_ones_apart(cli, tmp_path: Path) -> None:
    log = tmp_path / "codes.log"
    log.write_text(
        "[ERROR] 2025-01-01-00:00:00 (PID:1, Device:0, RankID:-1) ERR00100 PTA call acl api failed\n"
        "EZ9999: Inner Error!\n"
        "EZ8123: [PID: 1] some new failure\n"
    )
    data = json.loads(cli("triage", "--json", str(log)).stdout)
    assert [(c["code"], c["kind"]) for c in data["codes"]] == [("ERR00100", "generic"), ("EZ9999", "generic")]
    assert [(c["code"], c["family"], c["line_number"]) for c in data["unknown_codes"]] == [("EZ8123", "cann", 3)]
    assert data["id"] is None  # generic codes only: no cause is named
    shown = cli("triage", str(log)).stdout
    assert "code EZ9999 (line 2): Inner Error" in shown and "unknown codes: EZ8123 (cann, line 3)" in shown


@pytest.mark.parametrize("kind", ["missing", "a-dir", "a-fifo", "binary", "device"])
def test_bad_input_is_one_line_and_exit_2(cli, tmp_path: Path, kind: str) -> None:
    path = {
        "missing": tmp_path / "nope.log",
        "a-dir": tmp_path,
        "a-fifo": tmp_path / "fifo",
        "binary": tmp_path / "core",
        "device": Path("/dev/zero"),
    }[kind]
    if kind == "a-fifo":
        os.mkfifo(path)
    if kind == "binary":
        path.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 64)
    line = assert_one_line_error(cli("triage", str(path)))
    assert "FILE" in line


def test_an_empty_value_is_bad_input(cli) -> None:
    assert_one_line_error(cli("triage", ""))
