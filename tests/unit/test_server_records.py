"""A server record is input: a pid at or below 1 (or as text), a name that is not one printable file name, and
a record whose name is not its file's are each one line of bad input, before anything is signalled or removed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ascend_setup.errors import BadInput
from ascend_setup.serve.server_records import SUFFIX, load, record_path

GOOD = {
    "name": "dense",
    "pid": 4242,
    "start_ticks": 1,
    "port": 8000,
    "cards": [0],
    "log": "/w/dense.log",
    "argv": ["vllm"],
    "detached": True,
    "started_at": 1.0,
    "token": "0" * 32,
}


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("pid", 1, "pid"),
        ("pid", 0, "pid"),
        ("pid", -1, "pid"),
        ("pid", "1", "pid"),
        ("pid", 4194305, "pid"),
        ("pid", 4242.0, "pid"),
        ("pid", True, "pid"),
        ("name", "../victim", "single file name"),
        ("name", "a/b", "single file name"),
        ("name", "..", "single file"),
        ("name", ".", "single file name"),
        ("name", "", "name"),
        ("name", "a\0b", "single file name"),
        ("name", "x" * 129, "name"),
        ("name", "vic\x1b]0;owned\x07tim", "control character"),
        ("token", "not-a-token", "token"),
        ("detached", "yes", "detached"),
    ],
)
def test_a_bad_field_is_one_line_of_bad_input(tmp_path: Path, field: str, value: Any, said: str) -> None:
    path = tmp_path / "serve" / f"dense{SUFFIX}"
    path.parent.mkdir()
    path.write_text(json.dumps({**GOOD, field: value}))
    with pytest.raises(BadInput) as caught:
        load(path)
    line = caught.value.one_line()
    assert said in line and f"at {field}" in line and len(line.splitlines()) == 1, line
    assert line.isprintable(), line


def test_a_record_names_its_own_file(tmp_path: Path) -> None:
    path = tmp_path / "serve" / f"other{SUFFIX}"
    path.parent.mkdir()
    path.write_text(json.dumps(GOOD))
    with pytest.raises(BadInput, match="not its own file's name"):
        load(path)


@pytest.mark.parametrize("name", ["../../victim", "/etc/passwd", "a/b", ".."])
def test_no_name_builds_a_path_outside_the_records(tmp_path: Path, name: str) -> None:
    with pytest.raises(BadInput):
        record_path(tmp_path, name)
